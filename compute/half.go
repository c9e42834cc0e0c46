package compute

import "math"

// F16ToF32 widens an IEEE 754 binary16 value exactly; NaNs keep their sign and payload (moved
// to the top of the wider mantissa), so a quiet NaN stays quiet. A finite value's bits, moved to
// F32's positions, read as an F32 value 2¹¹² times too small (subnormals included, which land
// among F32's subnormals), and the product by 2¹¹² is exact; infinities and NaNs take F32's
// all-ones exponent instead. It has no loop, so it inlines into conversion loops.
func F16ToF32(h uint16) float32 {
	sign, mag := uint32(h&0x8000)<<16, uint32(h&0x7fff)<<13
	if mag >= 0x1f<<23 {
		return math.Float32frombits(sign | mag | 0x70000000)
	}
	return math.Float32frombits(sign|mag) * 0x1p112
}

// BF16ToF32 widens a bfloat16 value exactly: its bits are the upper half of the F32 value's.
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }
