package safetensors

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Float32 returns the tensor's elements converted to float32 in a new slice the caller owns. It
// accepts F32, F16 and BF16, the dtypes tfd computes with; each conversion is exact (both
// half-precision formats are subsets of float32), including F16 subnormals, infinities, and NaN
// payloads. Any other dtype is an error.
func (t Tensor) Float32() ([]float32, error) {
	if t.DType != "F32" && t.DType != "F16" && t.DType != "BF16" {
		return nil, fmt.Errorf("safetensors: tensor %q has dtype %s; only F32, F16 and BF16 weights "+
			"can be used for compute: use a checkpoint exported in one of those", t.Name, t.DType)
	}
	n, size := t.Elements(), dtypeBits[t.DType]/8
	if len(t.Data) != n*size {
		return nil, fmt.Errorf("safetensors: tensor %q: shape %v of %s needs %d bytes, Data holds %d",
			t.Name, t.Shape, t.DType, n*size, len(t.Data))
	}
	out := make([]float32, n)
	le := binary.LittleEndian
	switch t.DType {
	case "F32":
		for i := range out {
			out[i] = math.Float32frombits(le.Uint32(t.Data[4*i:]))
		}
	case "F16":
		for i := range out {
			out[i] = math.Float32frombits(f16ToF32Bits(le.Uint16(t.Data[2*i:])))
		}
	case "BF16":
		for i := range out {
			out[i] = math.Float32frombits(uint32(le.Uint16(t.Data[2*i:])) << 16)
		}
	}
	return out, nil
}

// f16ToF32Bits converts an IEEE 754 binary16 value to the binary32 value that equals it, both as
// bit patterns. NaNs keep their sign and payload (shifted into the wider mantissa), so a quiet NaN
// stays quiet.
func f16ToF32Bits(h uint16) uint32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // infinity or NaN
		return sign | 0xff<<23 | mant<<13
	case exp != 0: // normal: rebias the exponent from 15 to 127
		return sign | (exp+127-15)<<23 | mant<<13
	case mant == 0: // signed zero
		return sign
	}
	// Subnormal: mant × 2⁻²⁴. Shift the leading 1 up to the implicit-bit position (bit 10); each
	// shift lowers the exponent by one from that of the smallest normal, 2⁻¹⁴.
	e := uint32(127 - 14)
	for mant&0x400 == 0 {
		mant <<= 1
		e--
	}
	return sign | e<<23 | (mant&0x3ff)<<13
}
