package cpu

import "fmt"

// The kernels every op's arithmetic goes through. Each defines one fixed order of operations per
// output element and keeps it whatever the surrounding loop (how many rows, which columns, which
// goroutine), so ops built on them are batch-invariant. The assembly kernels (kernels_amd64.s) and
// the pure-Go ones below follow the same order; they differ only in whether a lane's multiply-add
// is fused (and so in the last bits), and a process uses one kind throughout (see useAsm).

// useAsm selects the assembly kernels. It is true where the CPU has them (asmSupported); tests set
// it to false to check the pure-Go kernels as well, and restore it.
var useAsm = asmSupported

// vdots writes out[r·ostride+c] = the lane part of the dot product of x[r·xstride:] and
// w[c·wstride:], for r < nr and c < nc. The lane part covers the first n8 elements (n8 a multiple
// of 8): eight lane accumulators, lane k summing products k, k+8, …, combined as
// ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)). Callers add the rest with dotTail.
func vdots(out []float32, ostride int, x []float32, xstride, nr int, w []float32, wstride, nc, n8 int) {
	if nr <= 0 || nc <= 0 {
		return
	}
	checkDots(out, ostride, x, xstride, nr, w, wstride, nc, n8)
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

// checkDots panics unless vdots with these arguments stays inside the slices: the assembly
// kernels trust their callers.
func checkDots(out []float32, ostride int, x []float32, xstride, nr int, w []float32, wstride, nc, n8 int) {
	if n8&7 != 0 || len(out) < (nr-1)*ostride+nc || len(x) < (nr-1)*xstride+n8 || len(w) < (nc-1)*wstride+n8 {
		panic(fmt.Sprintf("cpu: vdots out of bounds: out %d/%d x %d/%d×%d w %d/%d×%d n8 %d",
			len(out), ostride, len(x), xstride, nr, len(w), wstride, nc, n8))
	}
}

// vdotsAsm is vdots with the assembly kernels: three rows by four columns at a time, then one row
// by four columns, then single dot products for the last columns. All three give the same bits.
func vdotsAsm(out []float32, ostride int, x []float32, xstride, nr int, w []float32, wstride, nc, n8 int) {
	groups := nc / 4
	r := 0
	for ; r+3 <= nr; r += 3 {
		if groups > 0 {
			gemm3x4(&out[r*ostride], ostride, &x[r*xstride], xstride, &w[0], wstride, groups, n8, nil, 0)
		}
		for c := groups * 4; c < nc; c++ {
			for rr := r; rr < r+3; rr++ {
				out[rr*ostride+c] = dot1(&x[rr*xstride], &w[c*wstride], n8)
			}
		}
	}
	for ; r < nr; r++ {
		if groups > 0 {
			gemm1x4(&out[r*ostride], &x[r*xstride], &w[0], wstride, groups, n8)
		}
		for c := groups * 4; c < nc; c++ {
			out[r*ostride+c] = dot1(&x[r*xstride], &w[c*wstride], n8)
		}
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
