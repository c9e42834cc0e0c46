package cpu

import xcpu "golang.org/x/sys/cpu"

// hasNEON is true: Advanced SIMD is part of every arm64 CPU. hasSDOT reports whether the CPU has
// the dot product instructions (FEAT_DotProd: SDOT), which Apple's M1 and later and most arm64
// cores since the Cortex-A55 and A76 have; the Cortex-A53 and A72 do not.
const hasNEON = true

var hasSDOT = xcpu.ARM64.HasASIMDDP

// The NEON kernels of quantized matrix products in the block order (qkernels_arm64.s), with the
// contract of the AVX2 ones (qkernels_amd64.go): one (x1) or two (x2) rows of nb activation
// blocks at act (the second row right after the first) against the group of eight Q8_0 or Q4_0
// weight rows at w, nb units; res[8r+c] gets the dot product of row r with column c. nb is
// positive and the caller has checked the bounds. The SDOT kernels need hasSDOT.

//go:noescape
func q8x1NEON(res *[16]float32, w *byte, act *actBlock, nb int)

//go:noescape
func q8x2NEON(res *[16]float32, w *byte, act *actBlock, nb int)

//go:noescape
func q4x1NEON(res *[16]float32, w *byte, act *actBlock, nb int)

//go:noescape
func q4x2NEON(res *[16]float32, w *byte, act *actBlock, nb int)

//go:noescape
func q8x1SDOT(res *[16]float32, w *byte, act *actBlock, nb int)

//go:noescape
func q8x2SDOT(res *[16]float32, w *byte, act *actBlock, nb int)

//go:noescape
func q4x1SDOT(res *[16]float32, w *byte, act *actBlock, nb int)

//go:noescape
func q4x2SDOT(res *[16]float32, w *byte, act *actBlock, nb int)

// The NEON kernels of 4- and 8-bit MLX affine weights (qaffine_arm64.s), with F16 or BF16 scales
// as their names say: one row of nb activation blocks at act against the group of four weight rows
// at w, whose scales and biases are at sb (see qweights); a quantization group spans bpg blocks.
// res[c] gets the dot product with column c. nb is positive and the caller has checked the bounds.
// The SDOT kernels need hasSDOT.

//go:noescape
func aff8F16NEON(res *[8]float32, w *byte, sb *byte, act *actBlock, nb int, bpg int)

//go:noescape
func aff8BF16NEON(res *[8]float32, w *byte, sb *byte, act *actBlock, nb int, bpg int)

//go:noescape
func aff4F16NEON(res *[8]float32, w *byte, sb *byte, act *actBlock, nb int, bpg int)

//go:noescape
func aff4BF16NEON(res *[8]float32, w *byte, sb *byte, act *actBlock, nb int, bpg int)

//go:noescape
func aff8F16SDOT(res *[8]float32, w *byte, sb *byte, act *actBlock, nb int, bpg int)

//go:noescape
func aff8BF16SDOT(res *[8]float32, w *byte, sb *byte, act *actBlock, nb int, bpg int)

//go:noescape
func aff4F16SDOT(res *[8]float32, w *byte, sb *byte, act *actBlock, nb int, bpg int)

//go:noescape
func aff4BF16SDOT(res *[8]float32, w *byte, sb *byte, act *actBlock, nb int, bpg int)
