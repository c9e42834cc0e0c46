//go:build !amd64

package cpu

// Stand-ins for the K-quant kernels of qkquants_amd64.s, never called since useQuantAsm is false.

func q4kx1AVX2(res *[8]float32, w *byte, act *actBlock, nsb int) {
	panic("cpu: no assembly kernels on this architecture")
}

func q6kx1AVX2(res *[8]float32, w *byte, act *actBlock, nsb int) {
	panic("cpu: no assembly kernels on this architecture")
}
