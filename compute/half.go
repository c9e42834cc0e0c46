package compute

import (
	"encoding/binary"
	"math"
)

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

// WidenToF32 returns little-endian F16 or BF16 data as little-endian F32 bytes, exactly: what
// the GPU backends keep of 1-D 16-bit weights (norms, biases).
func WidenToF32(dtype DType, data []byte) []byte {
	out := make([]byte, 2*len(data))
	for i := range len(data) / 2 {
		h := binary.LittleEndian.Uint16(data[2*i:])
		var f float32
		if dtype == BF16 {
			f = BF16ToF32(h)
		} else {
			f = F16ToF32(h)
		}
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(f))
	}
	return out
}
