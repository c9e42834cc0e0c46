//go:build !amd64

package cpu

// asmSupported is false: this architecture has only the pure-Go kernels.
const asmSupported = false

// hasF16C is false with asmSupported.
const hasF16C = false

const (
	accLoad  = 1
	accStore = 2
)

// Stand-ins for the assembly kernels of kernels_amd64.s, never called since useAsm is false.

func gemm1x4BF16(out *float32, x *float32, w *uint16, wstride int, groups int, n8 int) {
	panic("cpu: no assembly kernels on this architecture")
}

func gemm1x4F16(out *float32, x *float32, w *uint16, wstride int, groups int, n8 int) {
	panic("cpu: no assembly kernels on this architecture")
}

func dot1BF16(x *float32, w *uint16, n8 int) float32 {
	panic("cpu: no assembly kernels on this architecture")
}

func dot1F16(x *float32, w *uint16, n8 int) float32 {
	panic("cpu: no assembly kernels on this architecture")
}

func widenBF16(dst *float32, src *uint16, n8 int) {
	panic("cpu: no assembly kernels on this architecture")
}

func widenF16(dst *float32, src *uint16, n8 int) {
	panic("cpu: no assembly kernels on this architecture")
}

func wsumF16(out *float32, p *float32, v *uint16, vstride int, keys int, n8 int, accumulate int) {
	panic("cpu: no assembly kernels on this architecture")
}

func wsumAsm(out *float32, p *float32, v *float32, vstride int, keys int, n8 int, accumulate int) {
	panic("cpu: no assembly kernels on this architecture")
}

func expSumAsm(e *float32, n8 int, m float32, lanes *[8]float32) {
	panic("cpu: no assembly kernels on this architecture")
}

func siluMulAsm(dst *float32, gate *float32, up *float32, n8 int) {
	panic("cpu: no assembly kernels on this architecture")
}

func gemm3x4(out *float32, ostride int, x *float32, xstride int, w *float32, wstride int, groups int, n8 int, acc *float32, mode int) {
	panic("cpu: no assembly kernels on this architecture")
}

func dot1(x *float32, w *float32, n8 int) float32 {
	panic("cpu: no assembly kernels on this architecture")
}

func vdotsAsm(out []float32, ostride int, x []float32, xstride, nr int, w []float32, wstride, nc, n8 int) {
	panic("cpu: no assembly kernels on this architecture")
}

// hasVNNI is false with asmSupported.
const hasVNNI = false

func q8x1AVX2(res *[16]float32, w *byte, act *actBlock, nb int) {
	panic("cpu: no assembly kernels on this architecture")
}

func q8x2AVX2(res *[16]float32, w *byte, act *actBlock, nb int) {
	panic("cpu: no assembly kernels on this architecture")
}

func q4x1AVX2(res *[16]float32, w *byte, act *actBlock, nb int) {
	panic("cpu: no assembly kernels on this architecture")
}

func q4x2AVX2(res *[16]float32, w *byte, act *actBlock, nb int) {
	panic("cpu: no assembly kernels on this architecture")
}

func q8x1VNNI(res *[16]float32, w *byte, act *actBlock, nb int) {
	panic("cpu: no assembly kernels on this architecture")
}

func q8x2VNNI(res *[16]float32, w *byte, act *actBlock, nb int) {
	panic("cpu: no assembly kernels on this architecture")
}

func q4x1VNNI(res *[16]float32, w *byte, act *actBlock, nb int) {
	panic("cpu: no assembly kernels on this architecture")
}

func q4x2VNNI(res *[16]float32, w *byte, act *actBlock, nb int) {
	panic("cpu: no assembly kernels on this architecture")
}

func q8x4VNNI(dst *float32, stride int, w *byte, act *actBlock, nb, ng int) {
	panic("cpu: no assembly kernels on this architecture")
}

func q4x4VNNI(dst *float32, stride int, w *byte, act *actBlock, nb, ng int) {
	panic("cpu: no assembly kernels on this architecture")
}

func q8x4AVX2(dst *float32, stride int, w *byte, act *actBlock, nb, ng int) {
	panic("cpu: no assembly kernels on this architecture")
}

func q4x4AVX2(dst *float32, stride int, w *byte, act *actBlock, nb, ng int) {
	panic("cpu: no assembly kernels on this architecture")
}

func quantizeActsAVX2(dst *actBlock, x *float32, nb int) {
	panic("cpu: no assembly kernels on this architecture")
}

func aff8x1AVX2(res *[8]float32, w *byte, sb *byte, act *actBlock, nb int, bpg int, sdt int) {
	panic("cpu: no assembly kernels on this architecture")
}

func aff8x2AVX2(res *[8]float32, w *byte, sb *byte, act *actBlock, nb int, bpg int, sdt int) {
	panic("cpu: no assembly kernels on this architecture")
}

func aff4x1AVX2(res *[8]float32, w *byte, sb *byte, act *actBlock, nb int, bpg int, sdt int) {
	panic("cpu: no assembly kernels on this architecture")
}

func aff4x2AVX2(res *[8]float32, w *byte, sb *byte, act *actBlock, nb int, bpg int, sdt int) {
	panic("cpu: no assembly kernels on this architecture")
}

func aff8x1VNNI(res *[8]float32, w *byte, sb *byte, act *actBlock, nb int, bpg int, sdt int) {
	panic("cpu: no assembly kernels on this architecture")
}

func aff8x2VNNI(res *[8]float32, w *byte, sb *byte, act *actBlock, nb int, bpg int, sdt int) {
	panic("cpu: no assembly kernels on this architecture")
}

func aff4x1VNNI(res *[8]float32, w *byte, sb *byte, act *actBlock, nb int, bpg int, sdt int) {
	panic("cpu: no assembly kernels on this architecture")
}

func aff4x2VNNI(res *[8]float32, w *byte, sb *byte, act *actBlock, nb int, bpg int, sdt int) {
	panic("cpu: no assembly kernels on this architecture")
}
