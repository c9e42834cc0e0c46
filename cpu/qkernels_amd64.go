package cpu

import xcpu "golang.org/x/sys/cpu"

// hasVNNI reports whether the CPU has AVX-512 VNNI's VPDPBUSD on YMM registers (which needs
// AVX512VL too); x/sys/cpu also checks that the OS saves the AVX-512 state.
var hasVNNI = xcpu.X86.HasAVX512VNNI && xcpu.X86.HasAVX512VL

// The assembly kernels of quantized matrix products in the block order (qkernels_amd64.s): one
// (x1) or two (x2) rows of nb activation blocks at act (the second row right after the first)
// against the group of eight Q8_0 or Q4_0 weight rows at w, nb units; res[8r+c] gets the dot
// product of row r with column c. nb is positive and the caller has checked the bounds. The VNNI
// kernels need hasVNNI, all of them AVX2, FMA and F16C.

//go:noescape
func q8x1AVX2(res *[16]float32, w *byte, act *actBlock, nb int)

//go:noescape
func q8x2AVX2(res *[16]float32, w *byte, act *actBlock, nb int)

//go:noescape
func q4x1AVX2(res *[16]float32, w *byte, act *actBlock, nb int)

//go:noescape
func q4x2AVX2(res *[16]float32, w *byte, act *actBlock, nb int)

//go:noescape
func q8x1VNNI(res *[16]float32, w *byte, act *actBlock, nb int)

//go:noescape
func q8x2VNNI(res *[16]float32, w *byte, act *actBlock, nb int)

//go:noescape
func q4x1VNNI(res *[16]float32, w *byte, act *actBlock, nb int)

//go:noescape
func q4x2VNNI(res *[16]float32, w *byte, act *actBlock, nb int)

// q8x4VNNI and q4x4VNNI (qtile_amd64.s) are the VNNI kernels of four rows, the rows one after the
// other at act as for two, against ng groups of eight weight rows, one after the other at w: the
// dot product of row r with column c of group g goes to dst + r·stride bytes + 4(8g+c). nb and
// ng are positive.

//go:noescape
func q8x4VNNI(dst *float32, stride int, w *byte, act *actBlock, nb, ng int)

//go:noescape
func q4x4VNNI(dst *float32, stride int, w *byte, act *actBlock, nb, ng int)

// q8x4AVX2 and q4x4AVX2 are q8x4VNNI and q4x4VNNI for AVX2 without VNNI.

//go:noescape
func q8x4AVX2(dst *float32, stride int, w *byte, act *actBlock, nb, ng int)

//go:noescape
func q4x4AVX2(dst *float32, stride int, w *byte, act *actBlock, nb, ng int)

// quantizeActsAVX2 quantizes nb blocks of activations at x into dst as quantizeBlock does, bit
// for bit. It needs AVX2.
//
//go:noescape
func quantizeActsAVX2(dst *actBlock, x *float32, nb int)

// The kernels of 4- and 8-bit MLX affine weights (qaffine_amd64.s), x1 and x2 as the others: sb
// points at the group's scales and biases (see qweights), F16 (sdt 1) or BF16 (sdt 2), and a
// quantization group spans bpg blocks.

//go:noescape
func aff8x1AVX2(res *[8]float32, w *byte, sb *byte, act *actBlock, nb int, bpg int, sdt int)

//go:noescape
func aff8x2AVX2(res *[8]float32, w *byte, sb *byte, act *actBlock, nb int, bpg int, sdt int)

//go:noescape
func aff4x1AVX2(res *[8]float32, w *byte, sb *byte, act *actBlock, nb int, bpg int, sdt int)

//go:noescape
func aff4x2AVX2(res *[8]float32, w *byte, sb *byte, act *actBlock, nb int, bpg int, sdt int)

//go:noescape
func aff8x1VNNI(res *[8]float32, w *byte, sb *byte, act *actBlock, nb int, bpg int, sdt int)

//go:noescape
func aff8x2VNNI(res *[8]float32, w *byte, sb *byte, act *actBlock, nb int, bpg int, sdt int)

//go:noescape
func aff4x1VNNI(res *[8]float32, w *byte, sb *byte, act *actBlock, nb int, bpg int, sdt int)

//go:noescape
func aff4x2VNNI(res *[8]float32, w *byte, sb *byte, act *actBlock, nb int, bpg int, sdt int)
