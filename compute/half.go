package compute

import (
	"encoding/binary"
	"math"

	"tfd/quant"
)

// F16ToF32 widens an IEEE 754 binary16 value exactly; NaNs keep their sign and payload. It is
// package quant's, whose quantized formats carry F16 scales, named here for the backends.
func F16ToF32(h uint16) float32 { return quant.F16ToF32(h) }

// BF16ToF32 widens a bfloat16 value exactly: its bits are the upper half of the F32 value's.
func BF16ToF32(h uint16) float32 { return quant.BF16ToF32(h) }

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
