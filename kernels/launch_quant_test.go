package kernels

import "testing"

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
		if l := add(QEmbedLaunch(f, 7, 300)); l.Kernel != "qembed_"+f || l.Groups != [2]int{7, 2} {
			t.Errorf("QEmbedLaunch(%s, 7, 300) = %+v", f, l)
		}
	}
	if l := add(QuantizeActLaunch(9)); l.Groups != [2]int{3, 1} {
		t.Errorf("QuantizeActLaunch(9) = %+v", l)
	}
}
