package metal

import (
	"strings"
	"testing"

	"tfd/kernels"
)

// TestLaunchedKeepsWhatMetalDispatches checks launched against the launches that the Metal
// backend's ops ask of tfd/kernels (ops_darwin.go and its neighbours), for shapes that take each
// of their branches, and that every prefix it leaves out still names a kernel.
func TestLaunchedKeepsWhatMetalDispatches(t *testing.T) {
	// At 64 rows a block merges its row's splits itself; at one row the combine runs.
	many, one := kernels.AttentionSplitLaunch(64, 32, 128, kernels.KVF32), kernels.AttentionSplitLaunch(1, 32, 128, kernels.KVF16)
	qk, ok := kernels.QKRopeWriteLaunch(4, 32, 8, 128, 64, kernels.KVF32)
	if !ok {
		t.Fatal("QKRopeWriteLaunch(4, 32, 8, 128, 64, f32): none")
	}
	for _, l := range []kernels.Launch{
		kernels.EmbedLaunch("bf16", 4, 4096), kernels.GatherLaunch(4, 4096),
		kernels.RMSNormLaunch(4, 4096), kernels.RMSNormLaunch(4, 64),
		kernels.MatMulsLaunch(1, [3]int{4096}), kernels.MatMulsLaunch(20, [3]int{4096}), kernels.MatMulsLaunch(256, [3]int{4096}),
		kernels.MatMulLanesLaunch("f16", 4, 4096), kernels.RoPELaunch(4, 32, 64), kernels.KVWriteLaunch(4, 1024, kernels.KVF32),
		qk, many.Split, one.Split, one.Combine,
		kernels.SiLUMulLaunch(4096), kernels.AddLaunch(4096), kernels.ArgmaxRowsLaunch(4), kernels.ArgmaxNextLaunch(),
	} {
		if l.Kernel == "" || !launched(l.Kernel) {
			t.Errorf("launched(%q) = false; the Metal backend dispatches it", l.Kernel)
		}
	}
	for _, p := range cudaOnly() {
		n := 0
		for _, k := range kernels.All() {
			if strings.HasPrefix(k.Name, p) {
				n++
			}
		}
		if n == 0 {
			t.Errorf("cudaOnly's %q names no kernel of tfd/kernels", p)
		}
	}
	for _, name := range []string{"matmul_wgt4_bf16_128", "matmul_wg1_bf16_64", "attention_tile_128_f32", "mma_split_wg"} {
		if launched(name) {
			t.Errorf("launched(%q) = true; only the CUDA backend launches it", name)
		}
	}
}
