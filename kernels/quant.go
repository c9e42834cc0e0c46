package kernels

import (
	"tfd/compute"
	"tfd/quant"
)

// QuantFormat returns the kernels' name for the format of a quantized dtype ("q8_0", "q4_0",
// "q4_k", "q6_k", "affine_bf16", …) and, for an affine one, its bits and group size; ok is false for a dtype
// without kernels. Every backend names its kernels by it.
func QuantFormat(d compute.DType) (format string, bits, group int, ok bool) {
	switch d {
	case compute.Q8_0:
		return "q8_0", 8, quant.BlockSize, true
	case compute.Q4_0:
		return "q4_0", 4, quant.BlockSize, true
	case compute.Q4_K:
		return "q4_k", 4, quant.SuperBlockSize, true
	case compute.Q6_K:
		return "q6_k", 6, quant.SuperBlockSize, true
	}
	f, scales, affine := d.AffineParams()
	if !affine {
		return "", 0, 0, false
	}
	switch scales { // whole names, not joined: a launch allocates nothing
	case compute.BF16:
		format = "affine_bf16"
	case compute.F16:
		format = "affine_f16"
	case compute.F32:
		format = "affine_f32"
	default:
		return "", 0, 0, false
	}
	return format, f.Bits, f.GroupSize, true
}
