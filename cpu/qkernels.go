package cpu

import (
	"encoding/binary"

	"tfd/compute"
	"tfd/quant"
)

// The kernels of quantized matrix products compute one or two activation rows (four, for Q8_0 and
// Q4_0 with VNNI) against a group of weight rows (see qweights) in package quant's
// order. Q8_0 and Q4_0 run in its block order: a block's 32 integer products summed exactly, by
// whatever route (VPDPBUSD with a correction, VPMADDUBSW with a sign trick, SDOT, or widening
// multiplies and pairwise adds), then one fused multiply-add a block by the block's combined
// scale, a chain a column. The others run in its lane order: each lane's four products summed,
// then a fused multiply-add a lane and block, and the lanes combined at the end. The Go kernels
// below emulate the fused multiply-add with quant.FMA32. So all of them, and quant's reference,
// give the same bits.

// useQuantAsm selects the assembly kernels for Q8_0, Q4_0, and 4- and 8-bit affine weights with
// F16 or BF16 scales (affine weights of other widths run in Go): AVX2, FMA and F16C (scales are
// F16). useVNNI selects, among them, those that sum with AVX-512 VNNI's VPDPBUSD on YMM
// registers. On arm64, useNEON selects the NEON kernels for Q8_0, Q4_0, Q4_K, Q6_K and 4- and
// 8-bit affine weights with F16 or BF16 scales (other affine weights run in Go there), and
// useSDOT, among them, those that sum with SDOT. Tests set them to false to check the other
// kernels, and restore them.
var (
	useQuantAsm = asmSupported && hasF16C
	useVNNI     = useQuantAsm && hasVNNI
	useNEON     = hasNEON
	useSDOT     = useNEON && hasSDOT
)

// qdotsBlockGo writes into res[c] the dot product of one activation row (nb blocks) with column
// c of a group of eight Q8_0 or Q4_0 weight rows w, in the block order.
func qdotsBlockGo(res []float32, q *qweights, w []byte, act []actBlock) {
	var n [quant.BlockSize]int8
	for c := range 8 {
		var acc float32
		for b := range act {
			a, unit := &act[b], w[b*q.unit:(b+1)*q.unit]
			q.blockQuants(&n, unit, c)
			var s int32
			for j, v := range n {
				s += int32(v) * int32(a.q[j])
			}
			f := float32(quant.F16ToF32(binary.LittleEndian.Uint16(unit[2*c:])) * a.d)
			acc = quant.FMA32(f, float32(s), acc)
		}
		res[c] = acc
	}
}

// qdotsGo returns the eight lanes of the dot products of one activation row (nb blocks) with the
// four weight rows of a group of K-quant or affine weights.
func qdotsGo(q *qweights, w, sb []byte, act []actBlock) (lanes [4][8]float32) {
	switch q.dtype {
	case compute.Q4_K, compute.Q6_K:
		return qdotsK(q, w, act)
	default:
		var n [quant.BlockSize]uint8
		for b := range act {
			a := &act[b]
			for c := range 4 {
				q.blockCodes(&n, w, b, c)
				scale, bias := q.scaleBias(sb, b*quant.BlockSize/q.affine.GroupSize, c)
				fs, fb := float32(scale*a.d), float32(bias*a.d)
				l := &lanes[c]
				for k := range l {
					x, nk := a.q[4*k:4*k+4:4*k+4], n[4*k:4*k+4:4*k+4]
					s := int32(nk[0])*int32(x[0]) + int32(nk[1])*int32(x[1]) + int32(nk[2])*int32(x[2]) + int32(nk[3])*int32(x[3])
					l[k] = quant.FMA32(fs, float32(s), l[k])
					l[k] = quant.FMA32(fb, float32(-a.m8[k]/8), l[k])
				}
			}
		}
	}
	return lanes
}

// qdotsAsm is qdots for Q8_0 and Q4_0 weights with the assembly kernels (nb > 0, bounds checked
// by the caller).
func qdotsAsm(res *[16]float32, dtype compute.DType, w *byte, act *actBlock, nb, nr int) {
	kernels := [2][2][2]func(res *[16]float32, w *byte, act *actBlock, nb int){
		{{q8x1AVX2, q8x2AVX2}, {q4x1AVX2, q4x2AVX2}},
		{{q8x1VNNI, q8x2VNNI}, {q4x1VNNI, q4x2VNNI}},
	}
	var vnni, q4 int
	if useVNNI {
		vnni = 1
	}
	if dtype == compute.Q4_0 {
		q4 = 1
	}
	kernels[vnni][q4][nr-1](res, w, act, nb)
}

// qdotsNEON is qdots for Q8_0 and Q4_0 weights with the NEON kernels (nb > 0, bounds checked by
// the caller).
func qdotsNEON(res *[16]float32, dtype compute.DType, w *byte, act *actBlock, nb, nr int) {
	kernels := [2][2][2]func(res *[16]float32, w *byte, act *actBlock, nb int){
		{{q8x1NEON, q8x2NEON}, {q4x1NEON, q4x2NEON}},
		{{q8x1SDOT, q8x2SDOT}, {q4x1SDOT, q4x2SDOT}},
	}
	var sdot, q4 int
	if useSDOT {
		sdot = 1
	}
	if dtype == compute.Q4_0 {
		q4 = 1
	}
	kernels[sdot][q4][nr-1](res, w, act, nb)
}

// qdotsAffineNEON is qdots for 4- and 8-bit affine weights with F16 or BF16 scales, with the NEON
// kernels, a row at a time (nb > 0, bounds checked by the caller).
func qdotsAffineNEON(res *[8]float32, q *qweights, w, sb *byte, act []actBlock, nb, nr int) {
	kernels := [2][2][2]func(res *[8]float32, w, sb *byte, act *actBlock, nb, bpg int){
		{{aff4F16NEON, aff4BF16NEON}, {aff8F16NEON, aff8BF16NEON}},
		{{aff4F16SDOT, aff4BF16SDOT}, {aff8F16SDOT, aff8BF16SDOT}},
	}
	var sdot, eight, bf16 int
	if useSDOT {
		sdot = 1
	}
	if q.affine.Bits == 8 {
		eight = 1
	}
	if q.sdt == compute.BF16 {
		bf16 = 1
	}
	kernel := kernels[sdot][eight][bf16]
	var row [8]float32
	for r := range nr {
		kernel(&row, w, sb, &act[r*nb], nb, q.affine.GroupSize/quant.BlockSize)
		copy(res[4*r:4*r+4], row[:4])
	}
}

// qdotsAffineAsm is qdots for 4- and 8-bit affine weights with F16 or BF16 scales, with the
// assembly kernels (nb > 0, bounds checked by the caller).
func qdotsAffineAsm(res *[8]float32, q *qweights, w, sb *byte, act *actBlock, nb, nr int) {
	bpg, sdt := q.affine.GroupSize/quant.BlockSize, 1
	if q.sdt == compute.BF16 {
		sdt = 2
	}
	kernel := aff4x1AVX2
	switch {
	case q.affine.Bits == 8 && useVNNI:
		kernel = aff8x1VNNI
		if nr == 2 {
			kernel = aff8x2VNNI
		}
	case q.affine.Bits == 8:
		kernel = aff8x1AVX2
		if nr == 2 {
			kernel = aff8x2AVX2
		}
	case useVNNI:
		kernel = aff4x1VNNI
		if nr == 2 {
			kernel = aff4x2VNNI
		}
	case nr == 2:
		kernel = aff4x2AVX2
	}
	kernel(res, w, sb, act, nb, bpg, sdt)
}
