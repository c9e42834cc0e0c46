package kernels

import "testing"

// TestLaunches checks the launch table against the kernels: every kernel has a launch, each with
// the kernel's own threads, and the grids are those the bodies assume.
func TestLaunches(t *testing.T) {
	seen := map[string]bool{}
	add := func(l Launch) Launch {
		k, ok := Lookup(l.Kernel)
		if !ok || l.Threads != k.Threads {
			t.Errorf("%+v: no such kernel, or not its %d threads", l, k.Threads)
		}
		seen[l.Kernel] = true
		return l
	}
	for _, w := range []string{"bf16", "f16", "f32"} {
		for _, c := range []struct {
			rows, out int
			kernel    string
			groups    [2]int
		}{
			{1, 5, "matmul_" + w + "_1", [2]int{2, 1}},
			{2, 8, "matmul_" + w + "_2", [2]int{2, 1}},
			{3, 9, "matmul_" + w + "_4", [2]int{3, 1}},
			{5, 4, "matmul_" + w + "_8", [2]int{1, 1}},
			{16, 4, "matmul_" + w + "_16", [2]int{1, 1}},
			{33, 130, "matmul_" + w + "_16", [2]int{33, 3}},
		} {
			if l := add(MatMulLaunch(w, c.rows, c.out)); l.Kernel != c.kernel || l.Groups != c.groups {
				t.Errorf("MatMulLaunch(%s, %d, %d) = %+v, want %s on %v", w, c.rows, c.out, l, c.kernel, c.groups)
			}
		}
		if l := add(EmbedLaunch(w, 7)); l.Groups != [2]int{7, 1} {
			t.Errorf("EmbedLaunch: %+v", l)
		}
		// The row group holds an expert's average share of the pairs: decode (8 pairs among 128
		// experts) walks one pair at a time, prefill (2048 pairs) sixteen.
		for _, c := range []struct {
			pairs, experts, out int
			kernel              string
			groups              [2]int
		}{
			{8, 128, 768, "expert_matmul_" + w + "_1", [2]int{192, 128}},
			{16, 8, 5, "expert_matmul_" + w + "_2", [2]int{2, 8}},
			{20, 8, 8, "expert_matmul_" + w + "_4", [2]int{2, 8}},
			{60, 8, 8, "expert_matmul_" + w + "_8", [2]int{2, 8}},
			{96, 8, 64, "expert_matmul_" + w + "_16", [2]int{16, 8}},
			{2048, 128, 2048, "expert_matmul_" + w + "_16", [2]int{512, 128}},
		} {
			if l := add(ExpertMatMulLaunch(w, c.pairs, c.experts, c.out)); l.Kernel != c.kernel || l.Groups != c.groups {
				t.Errorf("ExpertMatMulLaunch(%s, %d, %d, %d) = %+v, want %s on %v", w, c.pairs, c.experts, c.out, l, c.kernel, c.groups)
			}
		}
	}
	for _, c := range []struct {
		l      Launch
		groups [2]int
	}{
		{GatherLaunch(3), [2]int{3, 1}},
		{RMSNormLaunch(9), [2]int{3, 1}},
		{RoPELaunch(5), [2]int{5, 1}},
		{KVWriteLaunch(6), [2]int{6, 1}},
		{AttentionLaunch(6, 8), [2]int{8, 6}},
		{SiLUMulLaunch(257), [2]int{2, 1}},
		{AddLaunch(256), [2]int{1, 1}},
		{ArgmaxNextLaunch(), [2]int{1, 1}},
		{RouteLaunch(9), [2]int{3, 1}},
		{GroupExpertsLaunch(128), [2]int{128, 1}},
		{CombineExpertsLaunch(257), [2]int{2, 1}},
		{AddLaunch(0), [2]int{0, 1}},
	} {
		if add(c.l).Groups != c.groups {
			t.Errorf("%+v: want groups %v", c.l, c.groups)
		}
	}
	for _, k := range All() {
		if !seen[k.Name] {
			t.Errorf("%s has no launch", k.Name)
		}
	}
}
