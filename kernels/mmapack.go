package kernels

import "fmt"

// The packed order of a BF16 matrix for the matrix unit (matmul_mma_packed_bf16_S and
// embed_packed_bf16). A matrix of n rows (outputs) of k elements, k a multiple of MMAChunk, is
// stored as ceil(n/16) bands of 16 rows, the last one padded with zero rows; a band as its k/32
// chunks in order; a chunk as 512 elements (1,024 bytes): for h = 0 and 1, and lane l = 0 … 31,
// elements 256h + 8l … 256h + 8l + 7 are elements 8(l%4) … 8(l%4)+7 of the chunk in row 8h + l/4
// of the band. Those eight are exactly what lane l of a SIMD group loads of that row for one
// MMA_STEP (the A operand of mma.sync.m16n8k16, prelude.cuh), so a chunk is two loads of 512
// contiguous bytes, 16 bytes a lane, where the row-major matrix gives 16 scattered runs of 64.
// Only the place of each element changes: a product on packed weights has the bits of the same
// product on the row-major ones.

// MMABandRows is the rows of a band of the packed order.
const MMABandRows = 16

// MMAPackedLen returns the elements of a matrix of n rows of k in the packed order: n rounded up
// to a whole band, times k.
func MMAPackedLen(n, k int) int { return (n + MMABandRows - 1) / MMABandRows * MMABandRows * k }

// MMAPackedAt returns where element i of row o of a matrix with rows of k elements lies in the
// packed order (embed_packed_bf16 computes the same).
func MMAPackedAt(o, i, k int) int {
	band, r, c, e := o/MMABandRows, o%MMABandRows, i/MMAChunk, i%MMAChunk
	return (band*(k/MMAChunk)+c)*512 + r/8*256 + (r%8*4+e/8)*8 + e%8
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
			row, slot := band*MMABandRows+r, r/8*32+r%8*4 // lane slot%32 of half slot/32 holds row r's
			for c := range chunks {
				at := (band*chunks+c)*1024 + 16*slot
				d := dst[at : at+64 : at+64] // the row's 32 elements: its four lanes' 16 bytes, side by side
				if row >= n {
					clear(d)
					continue
				}
				copy(d, src[2*(row*k+c*MMAChunk):])
			}
		}
	}
}
