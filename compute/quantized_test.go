package compute

import (
	"errors"
	"strings"
	"testing"

	"tfd/quant"
)

func TestAffineDTypes(t *testing.T) {
	seen := map[DType]bool{}
	for _, bits := range []int{2, 3, 4, 5, 6, 8} {
		for _, gs := range []int{32, 64, 128} {
			for _, sc := range []DType{F32, F16, BF16} {
				d, err := Affine(bits, gs, sc)
				if err != nil {
					t.Fatalf("Affine(%d, %d, %v): %v", bits, gs, sc, err)
				}
				f, scales, ok := d.AffineParams()
				if !ok || f.Bits != bits || f.GroupSize != gs || scales != sc || !d.Quantized() || seen[d] {
					t.Fatalf("Affine(%d, %d, %v) = %v: params %+v %v %v, quantized %v, seen before %v", bits, gs, sc, d, f, scales, ok, d.Quantized(), seen[d])
				}
				seen[d] = true
			}
		}
	}
	for _, bad := range []struct {
		bits, gs int
		sc       DType
	}{{7, 64, BF16}, {4, 16, BF16}, {4, 64, I32}, {1, 64, F16}, {9, 32, F16}} {
		if d, err := Affine(bad.bits, bad.gs, bad.sc); err == nil {
			t.Errorf("Affine(%d, %d, %v) = %v, want an error", bad.bits, bad.gs, bad.sc, d)
		}
	}
	for _, d := range []DType{F32, F16, BF16, I32, Q8_0, Q4_0, Q4_K, Q6_K} {
		if _, _, ok := d.AffineParams(); ok {
			t.Errorf("%v has affine parameters", d)
		}
	}
	d, _ := Affine(4, 64, BF16)
	if d.String() != "AFFINE4_G64_BF16" || Q8_0.String() != "Q8_0" || Q4_0.String() != "Q4_0" {
		t.Errorf("names: %v %v %v", d, Q8_0, Q4_0)
	}
	if Q4_K.String() != "Q4_K" || Q6_K.String() != "Q6_K" || !Q4_K.Quantized() || !Q6_K.Quantized() {
		t.Errorf("K-quants: %v %v, quantized %v %v", Q4_K, Q6_K, Q4_K.Quantized(), Q6_K.Quantized())
	}
}

func TestQuantizedBytes(t *testing.T) {
	a4, _ := Affine(4, 64, BF16)
	a6, _ := Affine(6, 32, F16)
	cases := []struct {
		d     DType
		shape []int
		want  int
		err   string
	}{
		{Q8_0, []int{3, 64}, 3 * 2 * quant.Q8_0BlockBytes, ""},
		{Q4_0, []int{2, 3, 32}, 6 * quant.Q4_0BlockBytes, ""},
		{a4, []int{2, 128}, 2 * (64 + 2*2*2), ""},
		{a6, []int{1, 64}, 48 + 2*2*2, ""},
		{Q4_K, []int{3, 512}, 3 * 2 * quant.Q4_KBlockBytes, ""},
		{Q6_K, []int{2, 256}, 2 * quant.Q6_KBlockBytes, ""},
		{Q4_K, []int{2, 384}, 0, "multiple of 256"},
		{Q8_0, []int{2, 48}, 0, "multiple of 32"},
		{a4, []int{2, 96}, 0, "multiple of 64"},
		{Q4_0, []int{64}, 0, "matrices"},
		{BF16, []int{3, 5}, 30, ""},
		{DType(99), []int{1}, 0, "unknown dtype"},
	}
	for _, c := range cases {
		got, err := c.d.Bytes(c.shape)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%v %v: error %v, want one saying %q", c.d, c.shape, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%v %v: %d bytes, %v; want %d", c.d, c.shape, got, err, c.want)
		}
	}
	if _, err := CheckUpload(Q8_0, []int{1, 32}, make([]byte, 33)); err == nil || errors.Is(err, ErrNoQuantizedKernels) {
		t.Errorf("CheckUpload of a short Q8_0 tensor: %v", err)
	}
}
