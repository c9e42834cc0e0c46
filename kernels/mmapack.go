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
	le := binary.LittleEndian
	var zeros [64]byte // a padding row's chunk
	for band := range (n + MMABandRows - 1) / MMABandRows {
		for g := range 8 { // rows g and g+8 of the band, whose pairs share each lane's 16 bytes
			var row0, row1 []byte // nil past n: zeros
			if r := band*MMABandRows + g; r < n {
				row0 = src[2*r*k:][:2*k]
			}
			if r := band*MMABandRows + g + 8; r < n {
				row1 = src[2*r*k:][:2*k]
			}
			for c := range chunks {
				out := dst[(band*chunks+c)*1024:][:1024]
				x0, x1 := zeros[:], zeros[:] // the two rows' 64 bytes of the chunk
				if row0 != nil {
					x0 = row0[64*c:][:64]
				}
				if row1 != nil {
					x1 = row1[64*c:][:64]
				}
				// Lane 4g+t's 16 bytes of step s are at 512s + 64g + 16t: from elements 8t+4s …
				// 8t+4s+3 of each row, two pairs each, the low words first.
				step0, step1 := out[64*g:][:64], out[512+64*g:][:64]
				for t := 0; t < 64; t += 16 {
					u0, v0 := le.Uint64(x0[t:]), le.Uint64(x1[t:])
					u1, v1 := le.Uint64(x0[t+8:]), le.Uint64(x1[t+8:])
					le.PutUint64(step0[t:], u0&0xffffffff|v0<<32)
					le.PutUint64(step0[t+8:], u0>>32|v0&^0xffffffff)
					le.PutUint64(step1[t:], u1&0xffffffff|v1<<32)
					le.PutUint64(step1[t+8:], u1>>32|v1&^0xffffffff)
				}
			}
		}
	}
}
