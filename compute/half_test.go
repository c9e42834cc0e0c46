package compute

import (
	"math"
	"testing"
)

// f16Reference widens binary16 by its definition: rebias the exponent, and normalise subnormals
// one shift at a time.
func f16Reference(h uint16) uint32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	man := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f:
		return sign | 0x7f800000 | man<<13
	case exp != 0:
		return sign | (exp+112)<<23 | man<<13
	case man == 0:
		return sign
	}
	e := uint32(113) // the F32 biased exponent of 2⁻¹⁴, the smallest normal binary16
	for man&0x400 == 0 {
		man <<= 1
		e--
	}
	return sign | e<<23 | (man&0x3ff)<<13
}

func TestF16ToF32IsExactForEveryValue(t *testing.T) {
	for h := range 1 << 16 {
		if got, want := math.Float32bits(F16ToF32(uint16(h))), f16Reference(uint16(h)); got != want {
			t.Fatalf("F16ToF32(%#04x) = %#08x, want %#08x", h, got, want)
		}
	}
}

func TestBF16ToF32(t *testing.T) {
	for _, f := range []float32{0, 1, -2.5, float32(math.Inf(1)), 1e-40} {
		bits := math.Float32bits(f)
		if bits&0xffff != 0 {
			continue // not a bfloat16 value
		}
		if got := BF16ToF32(uint16(bits >> 16)); math.Float32bits(got) != bits {
			t.Errorf("BF16ToF32 of %v's top half = %v", f, got)
		}
	}
}

func TestCheckUpload(t *testing.T) {
	if n, err := CheckUpload(BF16, []int{3, 4}, make([]byte, 24)); n != 12 || err != nil {
		t.Errorf("a well-formed upload: %d, %v", n, err)
	}
	for _, tc := range []struct {
		dtype DType
		shape []int
		bytes int
	}{{BF16, []int{3, 4}, 23}, {DType(99), []int{1}, 4}, {F32, []int{-1}, 0}, {F32, []int{1 << 40, 1 << 40}, 0}} {
		if _, err := CheckUpload(tc.dtype, tc.shape, make([]byte, tc.bytes)); err == nil {
			t.Errorf("CheckUpload(%v, %v, %d bytes) accepted", tc.dtype, tc.shape, tc.bytes)
		}
	}
}

// TestWidenToF32: every element widened as F16ToF32 and BF16ToF32 widen one value.
func TestWidenToF32(t *testing.T) {
	data := []byte{0x00, 0x3c, 0x01, 0x80, 0xff, 0x7b, 0x00, 0x7e} // 1.0, a subnormal, the largest finite, a NaN
	for _, dt := range []DType{F16, BF16} {
		out := WidenToF32(dt, data)
		if len(out) != 2*len(data) {
			t.Fatalf("%v: %d bytes from %d", dt, len(out), len(data))
		}
		for i := range len(data) / 2 {
			h := uint16(data[2*i]) | uint16(data[2*i+1])<<8
			want := F16ToF32(h)
			if dt == BF16 {
				want = BF16ToF32(h)
			}
			got := uint32(out[4*i]) | uint32(out[4*i+1])<<8 | uint32(out[4*i+2])<<16 | uint32(out[4*i+3])<<24
			if got != math.Float32bits(want) {
				t.Errorf("%v element %d: %#08x, want %#08x", dt, i, got, math.Float32bits(want))
			}
		}
	}
}
