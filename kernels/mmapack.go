package kernels

import (
	"encoding/binary"
	"fmt"
)

// The packed order of a BF16 matrix for the matrix unit (matmul_mma_packed_bf16_S,
// matmul_wgP_bf16_N and embed_packed_bf16). A matrix of n rows (outputs) of k elements, k a
// multiple of MMAChunk, is stored as ceil(n/16) bands of 16 rows, the last one padded with zero
// rows; a band as its k/32 chunks in order; a chunk as 512 elements (1,024 bytes): for step s = 0
// and 1 and lane l = 4g + t (g < 8, t < 4), elements 256s + 8l … 256s + 8l + 7 are four BF16
// pairs of the chunk: elements 8t+4s and 8t+4s+1 of row g, the same of row g+8, then 8t+4s+2 and
// 8t+4s+3 of row g and of row g+8. Those four pairs are exactly the A operand of one MMA step in
// the order mma.sync.m16n8k16 and wgmma take their four registers (prelude.cuh: tfd_mma_a), so a
// chunk is two loads of 512 contiguous bytes, 16 bytes a lane, each of which lands in the
// registers an MMA reads: with the rows side by side instead (each lane's 16 bytes one row's),
// ptxas copied every loaded word into place right after the load and so waited for it there
// (ncu, matmul_wg: a third of the stalls). Only the place of each element changes: a product on
// packed weights has the bits of the same product on the row-major ones.

// MMABandRows is the rows of a band of the packed order.
const MMABandRows = 16

// MMAPackedLen returns the elements of a matrix of n rows of k in the packed order: n rounded up
// to a whole band, times k.
func MMAPackedLen(n, k int) int { return (n + MMABandRows - 1) / MMABandRows * MMABandRows * k }

// MMAPackedAt returns where element i of row o of a matrix with rows of k elements lies in the
// packed order (embed_packed_bf16 computes the same).
func MMAPackedAt(o, i, k int) int {
	band, r, c, e := o/MMABandRows, o%MMABandRows, i/MMAChunk, i%MMAChunk
	lane, step, j := r%8*4+e/8, e%8/4, e%4/2*2+r/8
	return (band*(k/MMAChunk)+c)*512 + step*256 + lane*8 + j*2 + e%2
}

// PackMMA writes the n×k BF16 matrix src (row-major, little-endian, 2n·k bytes) into dst in the
// packed order (2·MMAPackedLen(n, k) bytes), padding rows included. Bands are independent: the
// bytes of bands b0 … b1 are those PackMMA writes for rows 16·b0 … 16·b1 alone, at byte 32·b0·k,
// so a caller may pack a matrix a few bands at a time, or spread its bands over goroutines.
func PackMMA(dst, src []byte, n, k int) {
	if k%MMAChunk != 0 || len(src) != 2*n*k || len(dst) != 2*MMAPackedLen(n, k) {
		panic(fmt.Sprintf("kernels: PackMMA of %d×%d into %d bytes from %d: want rows a multiple of %d long, %d bytes from %d",
			n, k, len(dst), len(src), MMAChunk, 2*MMAPackedLen(n, k), 2*n*k))
	}
	chunks := k / MMAChunk
	for band := range (n + MMABandRows - 1) / MMABandRows {
		for r := range MMABandRows {
			row := band*MMABandRows + r
			for c := range chunks {
				base := (band*chunks+c)*1024 + 4*(r/8) // byte 4·j of a lane's 16, j = 2·(pair) + r/8
				for t := range 4 {
					for p := range 4 { // the row's pairs 8t+2p, 8t+2p+1: step p/2, pair p%2
						at := base + 512*(p/2) + 16*(r%8*4+t) + 8*(p%2)
						if row >= n {
							binary.LittleEndian.PutUint32(dst[at:], 0)
							continue
						}
						from := 2 * (row*k + c*MMAChunk + 8*t + 2*p)
						binary.LittleEndian.PutUint32(dst[at:], binary.LittleEndian.Uint32(src[from:]))
					}
				}
			}
		}
	}
}
