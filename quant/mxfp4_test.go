package quant

import (
	"math"
	"testing"
)

// TestDequantizeMXFP4: the codes of one byte, lower nibble first, times each block's scale, as
// transformers' convert_moe_packed_tensors unpacks openai's blocks (its lookup table, then ldexp
// by the scale minus 127).
func TestDequantizeMXFP4(t *testing.T) {
	codes := make([]byte, 32)
	scales := []byte{127, 120}
	codes[0] = 0x71  // elements 0, 1: codes 1 (0.5) and 7 (6)
	codes[1] = 0xf8  // elements 2, 3: codes 8 (−0) and 15 (−6)
	codes[16] = 0x2a // elements 32, 33 (second block): codes 10 (−1) and 2 (1)
	got := make([]float32, 64)
	DequantizeMXFP4(got, codes, scales)
	want := make([]float32, 64)
	want[0], want[1], want[2], want[3] = 0.5, 6, float32(math.Copysign(0, -1)), -6
	want[32], want[33] = -1*0x1p-7, 1*0x1p-7
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Errorf("element %d = %v, want %v", i, got[i], want[i])
		}
	}
}

// TestMXFP4RoundTrip: weights MXFP4 holds (each block's values an E2M1 value times one power of
// two, from 2⁻¹²⁷ to 2¹²⁵) pack and unpack to the same bits; a value it cannot hold is refused.
func TestMXFP4RoundTrip(t *testing.T) {
	src := make([]float32, 4*BlockSize)
	for i := range src {
		exp := []int{-127, -3, 0, 125}[i/BlockSize]
		src[i] = e2m1[(i*7)%16] * float32(math.Ldexp(1, exp))
	}
	codes, scales := make([]byte, MXFP4RowCodes(len(src))), make([]byte, MXFP4RowScales(len(src)))
	if !QuantizeMXFP4(codes, scales, src) {
		t.Fatal("QuantizeMXFP4 refused values MXFP4 holds")
	}
	got := make([]float32, len(src))
	DequantizeMXFP4(got, codes, scales)
	for i := range src {
		if math.Float32bits(got[i]) != math.Float32bits(src[i]) {
			t.Fatalf("element %d: %v back as %v", i, src[i], got[i])
		}
	}
	src[5] = 0.75 // between E2M1's 0.5 and 1 at the block's scale
	if QuantizeMXFP4(codes, scales, src) {
		t.Error("QuantizeMXFP4 took 0.75 in a block whose largest magnitude is 6")
	}
}
