package cpu

import (
	"fmt"

	"tfd/compute"
)

// The kernels every op's arithmetic goes through. Each defines one fixed order of operations per
// output element and keeps it whatever the surrounding loop (how many rows, which columns, which
// goroutine), so ops built on them are batch-invariant. The assembly kernels (kernels_amd64.s) and
// the pure-Go ones below follow the same order; they differ only in whether a lane's multiply-add
// is fused (and so in the last bits), and a process uses one kind throughout (see useAsm).

// useAsm selects the assembly kernels. It is true where the CPU has them (asmSupported); tests set
// it to false to check the pure-Go kernels as well, and restore it.
var useAsm = asmSupported

// useF16C selects the assembly kernels that read F16 weights, which convert with F16C. It is true
// where the CPU has F16C as well as the other kernels' AVX2 and FMA; tests set it to false to check
// the fallback, which widens F16 weights into scratch for the F32 kernels.
var useF16C = asmSupported && hasF16C

// halfAsm reports whether the assembly kernels read 16-bit weights of dtype directly.
func halfAsm(dtype compute.DType) bool {
	return useAsm && (dtype == compute.BF16 || dtype == compute.F16 && useF16C)
}

// halfDirect reports whether vdotsHalf can read weights of dtype: with the pure-Go kernels, or
// with assembly kernels for the dtype. Otherwise (F16 weights, AVX2 and FMA but no F16C) callers
// widen the weights first, since the products must still be fused.
func halfDirect(dtype compute.DType) bool {
	return !useAsm || halfAsm(dtype)
}

// vdots writes out[r·ostride+c] = the lane part of the dot product of x[r·xstride:] and
// w[c·wstride:], for r < nr and c < nc. The lane part covers the first n8 elements (n8 a multiple
// of 8): eight lane accumulators, lane k summing products k, k+8, …, combined as
// ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)). Callers add the rest with dotTail.
func vdots(out []float32, ostride int, x []float32, xstride, nr int, w []float32, wstride, nc, n8 int) {
	if nr <= 0 || nc <= 0 {
		return
	}
	checkDots(out, ostride, x, xstride, nr, len(w), wstride, nc, n8)
	if n8 == 0 {
		for r := range nr {
			clear(out[r*ostride : r*ostride+nc])
		}
		return
	}
	if useAsm {
		vdotsAsm(out, ostride, x, xstride, nr, w, wstride, nc, n8)
		return
	}
	for c := range nc {
		wc := w[c*wstride : c*wstride+n8]
		for r := range nr {
			out[r*ostride+c] = dotLanes(x[r*xstride:r*xstride+n8], wc)
		}
	}
}

// vdotsHalf is vdots for F16 or BF16 weights (dtype), each widened to F32 as it is read: the bits
// are those of vdots with the weights widened beforehand. It is meant for one or two rows, whose
// weights are read once; callers with more rows widen a block of weights and use vdots. Only where
// halfDirect(dtype).
func vdotsHalf(out []float32, ostride int, x []float32, xstride, nr int, w []uint16, dtype compute.DType, wstride, nc, n8 int) {
	if nr <= 0 || nc <= 0 {
		return
	}
	checkDots(out, ostride, x, xstride, nr, len(w), wstride, nc, n8)
	if !halfDirect(dtype) {
		panic(fmt.Sprintf("cpu: vdotsHalf of %v weights without the kernels to read them", dtype))
	}
	if n8 == 0 {
		for r := range nr {
			clear(out[r*ostride : r*ostride+nc])
		}
		return
	}
	if useAsm {
		groups := nc / 4
		for r := range nr {
			o, xr := out[r*ostride:], &x[r*xstride]
			if groups > 0 {
				gemm1x4Half(&o[0], xr, &w[0], wstride, groups, n8, dtype)
			}
			for c := groups * 4; c < nc; c++ {
				o[c] = dot1Half(xr, &w[c*wstride], n8, dtype)
			}
		}
		return
	}
	for c := range nc {
		wc := w[c*wstride : c*wstride+n8]
		for r := range nr {
			xr := x[r*xstride : r*xstride+n8]
			if dtype == compute.BF16 {
				out[r*ostride+c] = dotLanesBF16(xr, wc)
			} else {
				out[r*ostride+c] = dotLanesF16(xr, wc)
			}
		}
	}
}

// checkDots panics unless vdots with these arguments, and wlen elements of weights, stays inside
// the slices: the assembly kernels trust their callers.
func checkDots(out []float32, ostride int, x []float32, xstride, nr int, wlen, wstride, nc, n8 int) {
	if n8&7 != 0 || len(out) < (nr-1)*ostride+nc || len(x) < (nr-1)*xstride+n8 || wlen < (nc-1)*wstride+n8 {
		panic(fmt.Sprintf("cpu: vdots out of bounds: out %d/%d x %d/%d×%d w %d/%d×%d n8 %d",
			len(out), ostride, len(x), xstride, nr, wlen, wstride, nc, n8))
	}
}

// gemm1x4Half is gemm1x4 for weights of dtype, F16 or BF16 (w and wstride count 16-bit elements).
func gemm1x4Half(out *float32, x *float32, w *uint16, wstride int, groups int, n8 int, dtype compute.DType) {
	if dtype == compute.BF16 {
		gemm1x4BF16(out, x, w, wstride, groups, n8)
	} else {
		gemm1x4F16(out, x, w, wstride, groups, n8)
	}
}

// dot1Half is dot1 for weights of dtype, F16 or BF16.
func dot1Half(x *float32, w *uint16, n8 int, dtype compute.DType) float32 {
	if dtype == compute.BF16 {
		return dot1BF16(x, w, n8)
	}
	return dot1F16(x, w, n8)
}

// widenOperands is widen for weights about to be multiplied, with the assembly kernels where the
// process uses them. VCVTPH2PS returns a signaling F16 NaN quieted, which no product can tell: an
// F32 multiply-add quiets it too.
func widenOperands(dst []float32, src []uint16, dtype compute.DType) {
	n8 := 0
	if halfAsm(dtype) {
		if n8 = len(dst) &^ 7; n8 > 0 {
			_ = src[n8-1]
			widenAsm(&dst[0], &src[0], n8, dtype)
		}
	}
	widen(dst[n8:], src[n8:], dtype)
}

// widenAsm writes the F32 values of the n8 (a positive multiple of 8) F16 or BF16 elements at src
// to dst.
func widenAsm(dst *float32, src *uint16, n8 int, dtype compute.DType) {
	if dtype == compute.BF16 {
		widenBF16(dst, src, n8)
	} else {
		widenF16(dst, src, n8)
	}
}

// dotLanes is the pure-Go lane part of a dot product; len(x) is a multiple of 8, len(w) ≥ len(x).
// The explicit float32 conversions forbid the compiler from fusing a multiply into the add (which
// the Go spec otherwise allows, and arm64 does), so every caller gets the same bits.
func dotLanes(x, w []float32) float32 {
	var l0, l1, l2, l3, l4, l5, l6, l7 float32
	for i := 0; i+8 <= len(x); i += 8 {
		xs := x[i : i+8 : i+8]
		ws := w[i : i+8 : i+8]
		l0 += float32(xs[0] * ws[0])
		l1 += float32(xs[1] * ws[1])
		l2 += float32(xs[2] * ws[2])
		l3 += float32(xs[3] * ws[3])
		l4 += float32(xs[4] * ws[4])
		l5 += float32(xs[5] * ws[5])
		l6 += float32(xs[6] * ws[6])
		l7 += float32(xs[7] * ws[7])
	}
	return ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7))
}

// dotLanesBF16 is dotLanes for BF16 weights, each widened exactly before its product. Lanes are
// independent sums, so it runs lanes 0–3 in one pass and lanes 4–7 in another: the same sums, but
// eight accumulators with a widened weight each need more registers than amd64 has, and an
// accumulator spilled to the stack doubles the latency of its chain.
func dotLanesBF16(x []float32, w []uint16) float32 {
	var l [8]float32
	for k := 0; k < 8; k += 4 {
		var l0, l1, l2, l3 float32
		for i := k; i+4 <= len(x); i += 8 {
			xs := x[i : i+4 : i+4]
			ws := w[i : i+4 : i+4]
			l0 += float32(xs[0] * compute.BF16ToF32(ws[0]))
			l1 += float32(xs[1] * compute.BF16ToF32(ws[1]))
			l2 += float32(xs[2] * compute.BF16ToF32(ws[2]))
			l3 += float32(xs[3] * compute.BF16ToF32(ws[3]))
		}
		l[k], l[k+1], l[k+2], l[k+3] = l0, l1, l2, l3
	}
	return sumLanes(&l)
}

// dotLanesF16 is dotLanesBF16 for F16 weights.
func dotLanesF16(x []float32, w []uint16) float32 {
	var l [8]float32
	for k := 0; k < 8; k += 4 {
		var l0, l1, l2, l3 float32
		for i := k; i+4 <= len(x); i += 8 {
			xs := x[i : i+4 : i+4]
			ws := w[i : i+4 : i+4]
			l0 += float32(xs[0] * compute.F16ToF32(ws[0]))
			l1 += float32(xs[1] * compute.F16ToF32(ws[1]))
			l2 += float32(xs[2] * compute.F16ToF32(ws[2]))
			l3 += float32(xs[3] * compute.F16ToF32(ws[3]))
		}
		l[k], l[k+1], l[k+2], l[k+3] = l0, l1, l2, l3
	}
	return sumLanes(&l)
}

// sumLanes combines eight lanes as ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)).
func sumLanes(l *[8]float32) float32 {
	return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]))
}

// dotTail adds the products of x and w, in order, to s: the part of a dot product after the lanes.
func dotTail(s float32, x, w []float32) float32 {
	w = w[:len(x)]
	for i, xi := range x {
		s += float32(xi * w[i])
	}
	return s
}

// dot returns the dot product of x and w[:len(x)] in the fixed order.
func dot(x, w []float32) float32 {
	n8 := len(x) &^ 7
	var s float32
	if n8 > 0 {
		if useAsm {
			if len(w) < len(x) {
				panic("cpu: dot: w shorter than x")
			}
			s = dot1(&x[0], &w[0], n8)
		} else {
			s = dotLanes(x[:n8], w)
		}
	}
	return dotTail(s, x[n8:], w[n8:])
}

// wsumHalf is wsum over F16 values, each widened as it is read: the bits of wsum over the values
// widened beforehand. Only where halfDirect(compute.F16).
func wsumHalf(out, p []float32, v []uint16, vstride int, accumulate bool) {
	n, keys := len(out), len(p)
	if keys == 0 {
		if !accumulate {
			clear(out)
		}
		return
	}
	if len(v) < (keys-1)*vstride+n {
		panic(fmt.Sprintf("cpu: wsumHalf out of bounds: v %d, %d keys of stride %d, %d wide", len(v), keys, vstride, n))
	}
	if !halfDirect(compute.F16) {
		panic("cpu: wsumHalf without the kernels to read F16 values")
	}
	n8 := n &^ 7
	if useAsm && n8 > 0 {
		acc := 0
		if accumulate {
			acc = 1
		}
		wsumF16(&out[0], &p[0], &v[0], vstride, keys, n8, acc)
	} else {
		if !accumulate {
			clear(out[:n8])
		}
		for j, pj := range p {
			vj := v[j*vstride : j*vstride+n8]
			for d, vd := range vj {
				out[d] += float32(pj * compute.F16ToF32(vd))
			}
		}
	}
	for d := n8; d < n; d++ {
		var acc float32
		if accumulate {
			acc = out[d]
		}
		for j, pj := range p {
			acc += float32(pj * compute.F16ToF32(v[j*vstride+d]))
		}
		out[d] = acc
	}
}

// wsum writes out[d] = Σ_j p[j]·v[j·vstride+d] for d < len(out), the terms added in j order to an
// accumulator per d (no reduction order is involved beyond the order of j). The accumulator starts
// at zero, or with accumulate at out[d], so that a sum over many keys can be taken in blocks of
// keys with the bits of one pass.
func wsum(out, p, v []float32, vstride int, accumulate bool) {
	n, keys := len(out), len(p)
	if keys == 0 {
		if !accumulate {
			clear(out)
		}
		return
	}
	if len(v) < (keys-1)*vstride+n {
		panic(fmt.Sprintf("cpu: wsum out of bounds: v %d, %d keys of stride %d, %d wide", len(v), keys, vstride, n))
	}
	n8 := n &^ 7
	if useAsm && n8 > 0 {
		acc := 0
		if accumulate {
			acc = 1
		}
		wsumAsm(&out[0], &p[0], &v[0], vstride, keys, n8, acc)
	} else {
		if !accumulate {
			clear(out[:n8])
		}
		for j, pj := range p {
			vj := v[j*vstride : j*vstride+n8]
			for d, vd := range vj {
				out[d] += float32(pj * vd)
			}
		}
	}
	for d := n8; d < n; d++ {
		var acc float32
		if accumulate {
			acc = out[d]
		}
		for j, pj := range p {
			acc += float32(pj * v[j*vstride+d])
		}
		out[d] = acc
	}
}
