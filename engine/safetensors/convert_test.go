package safetensors

import (
	"encoding/binary"
	"math"
	"strings"
	"testing"
)

// le16 encodes half-precision bit patterns as a tensor's Data.
func le16(bits ...uint16) []byte {
	var b []byte
	for _, v := range bits {
		b = binary.LittleEndian.AppendUint16(b, v)
	}
	return b
}

func TestFloat32(t *testing.T) {
	nan32 := math.Float32frombits(0x7fc00000)
	tests := []struct {
		name  string
		dtype string
		data  []byte
		want  []uint32 // float32 bit patterns, so NaNs and signed zeros compare exactly
	}{
		{"F32", "F32", binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil,
			math.Float32bits(1.5)), math.Float32bits(nan32)), []uint32{0x3fc00000, 0x7fc00000}},
		{"BF16", "BF16", le16(0x3f80, 0xc000, 0x7f80, 0xff80, 0x7fc1, 0x8000, 0x0001),
			[]uint32{0x3f800000, 0xc0000000, 0x7f800000, 0xff800000, 0x7fc10000, 0x80000000, 0x00010000}},
		{"F16", "F16", le16(
			0x3c00, // 1
			0xc000, // -2
			0x7bff, // 65504, the largest finite
			0x0400, // 2⁻¹⁴, the smallest normal
			0x0001, // 2⁻²⁴, the smallest subnormal
			0x03ff, // the largest subnormal, 1023 × 2⁻²⁴
			0x0200, // 2⁻¹⁵
			0x8000, // -0
			0x7c00, // +inf
			0xfc00, // -inf
			0x7e00, // quiet NaN
			0xfd01, // negative signalling NaN with a payload
			0x3555, // 0.333251953125
		), []uint32{
			0x3f800000, 0xc0000000, 0x477fe000, 0x38800000, 0x33800000, 0x387fc000, 0x38000000,
			0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0xffa02000, 0x3eaaa000,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tensor := Tensor{Name: "x", DType: tt.dtype, Shape: []int{len(tt.want)}, Data: tt.data}
			got, err := tensor.Float32()
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %d values, want %d", len(got), len(tt.want))
			}
			for i, w := range tt.want {
				if g := math.Float32bits(got[i]); g != w {
					t.Errorf("[%d] = %#08x (%g), want %#08x (%g)", i, g, got[i], w, math.Float32frombits(w))
				}
			}
		})
	}
}

// TestF16AllValues checks every binary16 bit pattern against the value its fields define,
// computed independently in float64.
func TestF16AllValues(t *testing.T) {
	for h := range 1 << 16 {
		sign, exp, mant := h>>15, (h>>10)&0x1f, h&0x3ff
		got := math.Float32frombits(f16ToF32Bits(uint16(h)))
		var want float64
		switch {
		case exp == 0x1f && mant != 0:
			bits := f16ToF32Bits(uint16(h))
			if !math.IsNaN(float64(got)) || bits>>31 != uint32(sign) || bits&0x7fffff != uint32(mant)<<13 {
				t.Fatalf("%#04x -> %#08x, want a NaN with the same sign and payload", h, bits)
			}
			continue
		case exp == 0x1f:
			want = math.Inf(1)
		case exp == 0:
			want = math.Ldexp(float64(mant), -24)
		default:
			want = math.Ldexp(float64(0x400|mant), exp-25)
		}
		if sign == 1 {
			want = -want
		}
		if float64(got) != want || math.Signbit(float64(got)) != (sign == 1) {
			t.Fatalf("%#04x -> %g, want %g", h, got, want)
		}
	}
}

func TestFloat32Refused(t *testing.T) {
	tests := []struct {
		name   string
		tensor Tensor
		want   string
	}{
		{"integer dtype", Tensor{Name: "ids", DType: "I64", Shape: []int{1}, Data: make([]byte, 8)},
			`tensor "ids" has dtype I64; only F32, F16 and BF16`},
		{"data of the wrong length", Tensor{Name: "w", DType: "F16", Shape: []int{3}, Data: make([]byte, 4)},
			`tensor "w": shape [3] of F16 needs 6 bytes, Data holds 4`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.tensor.Float32()
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "safetensors: ") {
				t.Errorf("Float32() error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}
