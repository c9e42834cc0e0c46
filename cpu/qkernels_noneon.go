//go:build !arm64

package cpu

// hasNEON and hasSDOT are false: the NEON kernels are arm64's.
const (
	hasNEON = false
	hasSDOT = false
)

// Stand-ins for the NEON kernels of qkernels_arm64.s, never called since useNEON is false.

func q8x1NEON(res *[16]float32, w *byte, act *actBlock, nb int) {
	panic("cpu: no NEON kernels on this architecture")
}

func q8x2NEON(res *[16]float32, w *byte, act *actBlock, nb int) {
	panic("cpu: no NEON kernels on this architecture")
}

func q4x1NEON(res *[16]float32, w *byte, act *actBlock, nb int) {
	panic("cpu: no NEON kernels on this architecture")
}

func q4x2NEON(res *[16]float32, w *byte, act *actBlock, nb int) {
	panic("cpu: no NEON kernels on this architecture")
}

func q8x1SDOT(res *[16]float32, w *byte, act *actBlock, nb int) {
	panic("cpu: no NEON kernels on this architecture")
}

func q8x2SDOT(res *[16]float32, w *byte, act *actBlock, nb int) {
	panic("cpu: no NEON kernels on this architecture")
}

func q4x1SDOT(res *[16]float32, w *byte, act *actBlock, nb int) {
	panic("cpu: no NEON kernels on this architecture")
}

func q4x2SDOT(res *[16]float32, w *byte, act *actBlock, nb int) {
	panic("cpu: no NEON kernels on this architecture")
}

func aff8F16NEON(res *[8]float32, w *byte, sb *byte, act *actBlock, nb int, bpg int) {
	panic("cpu: no NEON kernels on this architecture")
}

func aff8F16SDOT(res *[8]float32, w *byte, sb *byte, act *actBlock, nb int, bpg int) {
	panic("cpu: no NEON kernels on this architecture")
}

func aff8BF16NEON(res *[8]float32, w *byte, sb *byte, act *actBlock, nb int, bpg int) {
	panic("cpu: no NEON kernels on this architecture")
}

func aff8BF16SDOT(res *[8]float32, w *byte, sb *byte, act *actBlock, nb int, bpg int) {
	panic("cpu: no NEON kernels on this architecture")
}

func aff4F16NEON(res *[8]float32, w *byte, sb *byte, act *actBlock, nb int, bpg int) {
	panic("cpu: no NEON kernels on this architecture")
}

func aff4F16SDOT(res *[8]float32, w *byte, sb *byte, act *actBlock, nb int, bpg int) {
	panic("cpu: no NEON kernels on this architecture")
}

func aff4BF16NEON(res *[8]float32, w *byte, sb *byte, act *actBlock, nb int, bpg int) {
	panic("cpu: no NEON kernels on this architecture")
}

func aff4BF16SDOT(res *[8]float32, w *byte, sb *byte, act *actBlock, nb int, bpg int) {
	panic("cpu: no NEON kernels on this architecture")
}

func q4kx1NEON(res *[8]float32, w *byte, act *actBlock, nsb int) {
	panic("cpu: no NEON kernels on this architecture")
}

func q6kx1NEON(res *[8]float32, w *byte, act *actBlock, nsb int) {
	panic("cpu: no NEON kernels on this architecture")
}

func q4kx1SDOT(res *[8]float32, w *byte, act *actBlock, nsb int) {
	panic("cpu: no NEON kernels on this architecture")
}

func q6kx1SDOT(res *[8]float32, w *byte, act *actBlock, nsb int) {
	panic("cpu: no NEON kernels on this architecture")
}
