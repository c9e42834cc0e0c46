package cpu

import (
	"encoding/binary"

	"tfd/compute"
	"tfd/quant"
)

// The K-quants (Q4_K, Q6_K) as qweights keeps them: a unit is one super-block (256 elements) of
// the four rows of a group, rearranged so that a kernel reads each block's scales and quants of
// the four rows together and never unpacks 6-bit fields:
//
//	Q4_K (592 bytes, 4 more a row than ggml's 144, for the unpacked scales):
//	  the four rows' d (F16, 8 bytes), their dmin (8 bytes), the sub-blocks' 6-bit scales as
//	  bytes [8 sub-blocks][4 rows] (32 bytes), their mins likewise (32 bytes), then ggml's four
//	  runs of 32 quant bytes as [4 runs][4 rows][32] (512 bytes): run r holds sub-block 2r in its
//	  low nibbles and 2r+1 in its high ones, element l in byte l.
//	Q6_K (840 bytes, ggml's 4 × 210):
//	  the four rows' d (F16, 8 bytes), the scales as [8 blocks of 32][4 rows][2] int8 (64 bytes:
//	  a block's two scales of 16 elements side by side), then for each half of 128 elements
//	  [4 rows][ql 64 bytes, qh 32 bytes] as ggml has them (2 × 384 bytes): block i of a half
//	  has its low 4 bits in ql[32·(i%2) + l] (the low nibble for i < 2) and its top 2 bits in
//	  bits 2i, 2i+1 of qh[l].
const (
	q4KUnit = 4 * (quant.Q4_KBlockBytes + 4)
	q6KUnit = 4 * quant.Q6_KBlockBytes

	q4KScales = 16             // offset of the scales in a Q4_K unit
	q4KMins   = q4KScales + 32 // of the mins
	q4KQuants = q4KMins + 32   // of the quants
	q6KScales = 8              // offset of the scales in a Q6_K unit
	q6KHalves = q6KScales + 64 // of the first half's quants
	q6KHalf   = 4 * 96         // bytes of a half's quants
)

// newKQuant lays out a Q4_K or Q6_K matrix (see above) from ggml's blocks.
func (q *qweights) newKQuant(data []byte) {
	q.units = q.in / quant.SuperBlockSize
	blockBytes := quant.Q4_KBlockBytes
	q.unit = q4KUnit
	if q.dtype == compute.Q6_K {
		blockBytes, q.unit = quant.Q6_KBlockBytes, q6KUnit
	}
	q.data = make([]byte, q.groups()*q.units*q.unit)
	for r := range q.out {
		g, c := r/4, r%4
		for u := range q.units {
			blk := data[(r*q.units+u)*blockBytes : (r*q.units+u+1)*blockBytes]
			unit := q.data[(g*q.units+u)*q.unit : (g*q.units+u+1)*q.unit]
			if q.dtype == compute.Q4_K {
				copy(unit[2*c:2*c+2], blk[0:2])
				copy(unit[8+2*c:8+2*c+2], blk[2:4])
				for j := range 8 {
					unit[q4KScales+4*j+c], unit[q4KMins+4*j+c] = quant.Q4_KScaleMin(blk[4:16], j)
				}
				for run := range 4 {
					copy(unit[q4KQuants+(4*run+c)*32:], blk[16+32*run:16+32*run+32])
				}
				continue
			}
			copy(unit[2*c:2*c+2], blk[208:210])
			for j := range 8 {
				unit[q6KScales+8*j+2*c], unit[q6KScales+8*j+2*c+1] = blk[192+2*j], blk[192+2*j+1]
			}
			for h := range 2 {
				at := q6KHalves + h*q6KHalf + c*96
				copy(unit[at:at+64], blk[64*h:64*h+64])
				copy(unit[at+64:at+96], blk[128+32*h:128+32*h+32])
			}
		}
	}
}

// kBlock returns, for block b of column c of a group's K-quant units w, the block's 32 quants
// (Q6_K's minus 32) in element order, its super-block's d (and dmin, Q4_K), and its sub-blocks'
// integer scales: Q4_K's scale and min, or Q6_K's two scales (for elements 0–15 and 16–31).
func (q *qweights) kBlock(n *[quant.BlockSize]int32, w []byte, b, c int) (d, dmin float32, s0, s1 int32) {
	unit := w[b/8*q.unit : (b/8+1)*q.unit]
	j := b % 8
	d = quant.F16ToF32(binary.LittleEndian.Uint16(unit[2*c:]))
	if q.dtype == compute.Q4_K {
		dmin = quant.F16ToF32(binary.LittleEndian.Uint16(unit[8+2*c:]))
		shift := 4 * uint(j%2)
		qs := unit[q4KQuants+(4*(j/2)+c)*32 : q4KQuants+(4*(j/2)+c+1)*32]
		for l, v := range qs {
			n[l] = int32(v >> shift & 15)
		}
		return d, dmin, int32(unit[q4KScales+4*j+c]), int32(unit[q4KMins+4*j+c])
	}
	i := j % 4
	at := q6KHalves + j/4*q6KHalf + c*96
	ql := unit[at+32*(i%2) : at+32*(i%2)+32]
	qh := unit[at+64 : at+96]
	lo, hi := 4*uint(i/2), 2*uint(i)
	for l := range n {
		n[l] = int32(ql[l]>>lo&15|(qh[l]>>hi&3)<<4) - 32
	}
	sc := unit[q6KScales+8*j+2*c:]
	return d, 0, int32(int8(sc[0])), int32(int8(sc[1]))
}

// qdotsK returns the eight lanes of the dot products of one activation row with the four K-quant
// rows of a group, in the order of quant.DotQ4_K and DotQ6_K.
func qdotsK(q *qweights, w []byte, act []actBlock) (lanes [4][8]float32) {
	var n [quant.BlockSize]int32
	for b := range act {
		a := &act[b]
		for c := range 4 {
			d, dmin, s0, s1 := q.kBlock(&n, w, b, c)
			fd := float32(d * a.d)
			l := &lanes[c]
			for k := range l {
				x, nk := a.q[4*k:4*k+4:4*k+4], n[4*k:4*k+4:4*k+4]
				s := nk[0]*int32(x[0]) + nk[1]*int32(x[1]) + nk[2]*int32(x[2]) + nk[3]*int32(x[3])
				if q.dtype == compute.Q4_K {
					l[k] = quant.FMA32(fd, float32(s0*s), l[k])
					// m8 is −8 times the lane's sum of activation quants t, so s1·m8/8 = −m·t.
					l[k] = quant.FMA32(float32(dmin*a.d), float32(s1*a.m8[k]/8), l[k])
					continue
				}
				sc := s0
				if k >= 4 {
					sc = s1
				}
				l[k] = quant.FMA32(fd, float32(sc*s), l[k])
			}
		}
	}
	return lanes
}

// kRow writes column c of a group's K-quant units w, dequantized as quant.DequantizeQ4_K and
// DequantizeQ6_K do, into dst.
func (q *qweights) kRow(dst []float32, w []byte, c int) {
	var n [quant.BlockSize]int32
	for b := range q.in / quant.BlockSize {
		d, dmin, s0, s1 := q.kBlock(&n, w, b, c)
		out := dst[b*quant.BlockSize : (b+1)*quant.BlockSize]
		if q.dtype == compute.Q4_K {
			for l, v := range n {
				out[l] = float32(float32(d*float32(s0))*float32(v)) - float32(dmin*float32(s1))
			}
			continue
		}
		for l, v := range n {
			sc := s0
			if l >= 16 {
				sc = s1
			}
			out[l] = d * float32(sc) * float32(v)
		}
	}
}

// qdotsKAsm is qdots for Q4_K and Q6_K weights with the assembly kernels (nb > 0, bounds checked
// by the caller): one row at a time, the second reading the group's units from the L1 cache.
func qdotsKAsm(res *[8]float32, dtype compute.DType, w []byte, act []actBlock, nb, nr int) {
	for r := range nr {
		// Direct calls, not through a function value, so that row does not escape to the heap.
		var row [8]float32
		if dtype == compute.Q6_K {
			q6kx1AVX2(&row, &w[0], &act[r*nb], nb/8)
		} else {
			q4kx1AVX2(&row, &w[0], &act[r*nb], nb/8)
		}
		copy(res[4*r:4*r+4], row[:4])
	}
}

// qdotsKNEON is qdots for Q4_K and Q6_K weights with the NEON kernels (nb > 0, bounds checked by
// the caller): one row at a time, the second reading the group's units from the L1 cache.
func qdotsKNEON(res *[8]float32, dtype compute.DType, w []byte, act []actBlock, nb, nr int) {
	kernel := q4kx1NEON
	switch {
	case dtype == compute.Q4_K && useSDOT:
		kernel = q4kx1SDOT
	case dtype == compute.Q6_K && useSDOT:
		kernel = q6kx1SDOT
	case dtype == compute.Q6_K:
		kernel = q6kx1NEON
	}
	for r := range nr {
		var row [8]float32
		kernel(&row, &w[0], &act[r*nb], nb/8)
		copy(res[4*r:4*r+4], row[:4])
	}
}
