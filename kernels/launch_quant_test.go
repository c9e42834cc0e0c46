package kernels

import (
	"testing"

	"tfd/compute"
)

// checkQuantLaunches checks the launches of the quantized-weight kernels (TestLaunches calls it
// with its add, which checks each against its kernel and marks it launched).
func checkQuantLaunches(t *testing.T, add func(Launch) Launch) {
	for _, f := range []string{"q8_0", "q4_0", "q4_k", "q6_k", "affine_bf16", "affine_f16", "affine_f32"} {
		for _, c := range []struct {
			rows, out int
			r         string
			groups    [2]int
		}{
			{1, 5, "1", [2]int{1, 1}},
			{2, 17, "2", [2]int{2, 1}},
			{3, 32, "4", [2]int{2, 1}},
			{5, 33, "8", [2]int{3, 1}},
			{16, 4096, "16", [2]int{256, 1}},
			{33, 130, "16", [2]int{9, 3}},
		} {
			want := "qmatmul_" + f + "_" + c.r
			if l := add(QMatMulLaunch(f, c.rows, c.out)); l.Kernel != want || l.Groups != c.groups {
				t.Errorf("QMatMulLaunch(%s, %d, %d) = %+v, want %s on %v", f, c.rows, c.out, l, want, c.groups)
			}
		}
		for _, c := range []struct {
			pairs, experts, out int
			r                   string
			groups              [2]int
		}{
			{1, 8, 5, "1", [2]int{1, 8}},
			{16, 8, 17, "2", [2]int{2, 8}},
			{60, 128, 768, "1", [2]int{48, 128}},
			{30, 8, 64, "4", [2]int{4, 8}},
			{40, 8, 33, "8", [2]int{3, 8}},
			{2048, 16, 2048, "16", [2]int{128, 16}},
		} {
			want := "expert_qmatmul_" + f + "_" + c.r
			if l := add(ExpertQMatMulLaunch(f, c.pairs, c.experts, c.out)); l.Kernel != want || l.Groups != c.groups {
				t.Errorf("ExpertQMatMulLaunch(%s, %d, %d, %d) = %+v, want %s on %v", f, c.pairs, c.experts, c.out, l, want, c.groups)
			}
		}
		if l := add(QEmbedLaunch(f, 7, 300)); l.Kernel != "qembed_"+f || l.Groups != [2]int{7, 2} {
			t.Errorf("QEmbedLaunch(%s, 7, 300) = %+v", f, l)
		}
	}
	if l := add(QuantizeActLaunch(9)); l.Groups != [2]int{3, 1} {
		t.Errorf("QuantizeActLaunch(9) = %+v", l)
	}
}

// TestQuantFormatNamesKernels checks that every format QuantFormat gives names kernels that exist,
// and that a dtype without kernels is said to have none.
func TestQuantFormatNamesKernels(t *testing.T) {
	dtypes := []compute.DType{compute.Q8_0, compute.Q4_0, compute.Q4_K, compute.Q6_K}
	for _, bits := range []int{2, 3, 4, 5, 6, 8} {
		for _, scales := range []compute.DType{compute.BF16, compute.F16, compute.F32} {
			d, err := compute.Affine(bits, 64, scales)
			if err != nil {
				t.Fatal(err)
			}
			dtypes = append(dtypes, d)
		}
	}
	for _, d := range dtypes {
		f, bits, group, ok := QuantFormat(d)
		if !ok || bits == 0 || group == 0 {
			t.Errorf("QuantFormat(%v) = %q, %d, %d, %v", d, f, bits, group, ok)
			continue
		}
		for _, name := range []string{"qmatmul_" + f + "_1", "qembed_" + f} {
			if _, found := Lookup(name); !found {
				t.Errorf("QuantFormat(%v) = %q, but there is no kernel %s", d, f, name)
			}
		}
	}
	for _, d := range []compute.DType{compute.F32, compute.BF16, compute.MXFP4} {
		if f, _, _, ok := QuantFormat(d); ok {
			t.Errorf("QuantFormat(%v) = %q, want none", d, f)
		}
	}
}
