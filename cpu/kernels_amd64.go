package cpu

import xcpu "golang.org/x/sys/cpu"

// asmSupported reports whether the AVX2/FMA kernels of kernels_amd64.s can run here (x/sys/cpu
// also checks that the OS saves the YMM registers).
var asmSupported = xcpu.X86.HasAVX2 && xcpu.X86.HasFMA

// hasF16C reports whether the CPU converts F16 to F32 in hardware (VCVTPH2PS), which the kernels for
// F16 weights use.
var hasF16C = xcpu.X86.HasF16C

// The assembly kernels. Lengths and strides count float32 elements; n8 is a positive multiple of
// 8; the caller (vdots, dot, wsum) has checked that every element they touch is in bounds. Each
// lane accumulates with fused multiply-adds from zero, and lanes combine as
// ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)).

// gemm3x4 computes the lane dot products of rows x, x+xstride, x+2·xstride with the 4·groups
// vectors w, w+wstride, …, over n8 elements. With mode&accStore it stores the raw lanes of group g
// to acc[96g:96(g+1)] (12 vectors of 8, row-major); without, it writes the dot products to
// out[r·ostride+c]. With mode&accLoad the lanes start from acc instead of zero. So a long dot
// product can be computed in pieces of K with the same bits as in one piece.
//
//go:noescape
func gemm3x4(out *float32, ostride int, x *float32, xstride int, w *float32, wstride int, groups int, n8 int, acc *float32, mode int)

// gemm3x4 modes.
const (
	accLoad  = 1
	accStore = 2
)

// gemm1x4 writes the lane dot products of x with the 4·groups vectors w, w+wstride, … into out[c].
//
//go:noescape
func gemm1x4(out *float32, x *float32, w *float32, wstride int, groups int, n8 int)

// dot1 returns the lane dot product of x and w.
//
//go:noescape
func dot1(x *float32, w *float32, n8 int) float32

// gemm1x4BF16 and gemm1x4F16 are gemm1x4 for BF16 and F16 weights (w and wstride count 16-bit
// elements), each widened to F32 in a register before its multiply-add: the bits are gemm1x4's on
// the widened weights. gemm1x4F16 needs F16C.
//
//go:noescape
func gemm1x4BF16(out *float32, x *float32, w *uint16, wstride int, groups int, n8 int)

//go:noescape
func gemm1x4F16(out *float32, x *float32, w *uint16, wstride int, groups int, n8 int)

// dot1BF16 and dot1F16 are dot1 for BF16 and F16 weights. dot1F16 needs F16C.
//
//go:noescape
func dot1BF16(x *float32, w *uint16, n8 int) float32

//go:noescape
func dot1F16(x *float32, w *uint16, n8 int) float32

// widenBF16 and widenF16 write the F32 values of the n8 BF16 or F16 elements at src to dst.
// widenF16 needs F16C.
//
//go:noescape
func widenBF16(dst *float32, src *uint16, n8 int)

//go:noescape
func widenF16(dst *float32, src *uint16, n8 int)

// wsumF16 is wsumAsm over F16 values, each widened before its multiply-add: the bits of wsumAsm
// over the values widened beforehand. It needs F16C.
//
//go:noescape
func wsumF16(out *float32, p *float32, v *uint16, vstride int, keys int, n8 int, accumulate int)

// wsumAsm writes out[d] = Σ_{j<keys} p[j]·v[j·vstride+d] for d < n8, one fused multiply-add per
// key in key order, starting from zero, or from out[d] when accumulate is 1.
//
//go:noescape
func wsumAsm(out *float32, p *float32, v *float32, vstride int, keys int, n8 int, accumulate int)

// expSumAsm replaces e[j] with exp(e[j]−m) for j < n8 (positive) and adds e[j] into lanes[j%8].
//
//go:noescape
func expSumAsm(e *float32, n8 int, m float32, lanes *[8]float32)

// siluMulAsm writes dst[i] = gate[i]/(1+exp(−gate[i]))·up[i] for i < n8 (positive).
//
//go:noescape
func siluMulAsm(dst *float32, gate *float32, up *float32, n8 int)

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
