package cpu

import (
	"encoding/binary"

	"tfd/compute"
	"tfd/quant"
)

// The kernels of quantized matrix products compute one or two activation rows (four, for Q8_0 and
// Q4_0 with VNNI: qtile_amd64.s) against a group of four weight rows (see qweights), lane by lane as package quant defines the dot product: the
// integer sum of each lane's four products, exact, then a fused multiply-add by the block's
// combined scale. The assembly kernels (qkernels_amd64.s, qkernels_arm64.s) get the integer sums
// by other routes (VPMADDUBSW with a sign trick, VPDPBUSD with a correction, SDOT, or widening
// multiplies and pairwise adds), which are exact too, and fuse the same multiply-adds; the Go
// kernels below emulate the fused multiply-add with quant.FMA32. So all of them, and quant's
// reference, give the same bits.

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

// qdotsGo returns the eight lanes of the dot products of one activation row (nb blocks) with the
// four weight rows of a group.
func qdotsGo(q *qweights, w, sb []byte, act []actBlock) (lanes [4][8]float32) {
	switch q.dtype {
	case compute.Q4_K, compute.Q6_K:
		return qdotsK(q, w, act)
	case compute.Q8_0:
		for b := range act {
			a := &act[b]
			unit := w[b*q8Unit : (b+1)*q8Unit]
			for c := range 4 {
				f := float32(quant.F16ToF32(binary.LittleEndian.Uint16(unit[2*c:])) * a.d)
				qs := unit[8+c*quant.BlockSize : 8+(c+1)*quant.BlockSize]
				l := &lanes[c]
				for k := range l {
					w, x := qs[4*k:4*k+4:4*k+4], a.q[4*k:4*k+4:4*k+4]
					s := int32(int8(w[0]))*int32(x[0]) + int32(int8(w[1]))*int32(x[1]) +
						int32(int8(w[2]))*int32(x[2]) + int32(int8(w[3]))*int32(x[3])
					l[k] = quant.FMA32(f, float32(s), l[k])
				}
			}
		}
	case compute.Q4_0:
		for b := range act {
			a := &act[b]
			unit, shift := w[b/2*q4Unit:(b/2+1)*q4Unit], uint(b%2)*4
			for c := range 4 {
				f := float32(quant.F16ToF32(binary.LittleEndian.Uint16(unit[shift*2+2*uint(c):])) * a.d)
				qs := unit[16+c*quant.BlockSize : 16+(c+1)*quant.BlockSize]
				l := &lanes[c]
				for k := range l {
					n, x := qs[4*k:4*k+4:4*k+4], a.q[4*k:4*k+4:4*k+4]
					s := (int32(n[0]>>shift&15)-8)*int32(x[0]) + (int32(n[1]>>shift&15)-8)*int32(x[1]) +
						(int32(n[2]>>shift&15)-8)*int32(x[2]) + (int32(n[3]>>shift&15)-8)*int32(x[3])
					l[k] = quant.FMA32(f, float32(s), l[k])
				}
			}
		}
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
func qdotsAsm(res *[8]float32, dtype compute.DType, w *byte, act *actBlock, nb, nr int) {
	switch {
	case dtype == compute.Q8_0 && useVNNI:
		if nr == 2 {
			q8x2VNNI(res, w, act, nb)
		} else {
			q8x1VNNI(res, w, act, nb)
		}
	case dtype == compute.Q8_0:
		if nr == 2 {
			q8x2AVX2(res, w, act, nb)
		} else {
			q8x1AVX2(res, w, act, nb)
		}
	case useVNNI:
		if nr == 2 {
			q4x2VNNI(res, w, act, nb)
		} else {
			q4x1VNNI(res, w, act, nb)
		}
	default:
		if nr == 2 {
			q4x2AVX2(res, w, act, nb)
		} else {
			q4x1AVX2(res, w, act, nb)
		}
	}
}

// qdotsNEON is qdots for Q8_0 and Q4_0 weights with the NEON kernels (nb > 0, bounds checked by
// the caller).
func qdotsNEON(res *[8]float32, dtype compute.DType, w *byte, act *actBlock, nb, nr int) {
	kernel := q4x1NEON
	switch {
	case dtype == compute.Q8_0 && useSDOT:
		kernel = q8x1SDOT
		if nr == 2 {
			kernel = q8x2SDOT
		}
	case dtype == compute.Q8_0:
		kernel = q8x1NEON
		if nr == 2 {
			kernel = q8x2NEON
		}
	case useSDOT:
		kernel = q4x1SDOT
		if nr == 2 {
			kernel = q4x2SDOT
		}
	case nr == 2:
		kernel = q4x2NEON
	}
	kernel(res, w, act, nb)
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
