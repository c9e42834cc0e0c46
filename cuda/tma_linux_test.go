package cuda

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"tfd/batch"
	"tfd/compute/computetest"
	"tfd/engine"
	"tfd/engine/enginetest"
	"tfd/kernels"
)

// TestWGTPlan checks TFD_CUDA_WGT's settings as the backend reads them: off, a variant
// everywhere, or kernels.UsesWGT's choice; anything else is refused.
func TestWGTPlan(t *testing.T) {
	gateUp := [3]int{12288, 12288}
	dn, dp, dok := kernels.UsesWGT(256, 4096, gateUp, 132)
	for _, c := range []struct {
		mode string
		n, p int
		ok   bool
	}{{"0", 0, 0, false}, {"128:4", 128, 4, true}, {"128:1", 128, 1, true}, {"64:4", 64, 4, true}, {"64:1", 64, 1, true}, {"", dn, dp, dok}} {
		s, err := parseWGT(c.mode)
		if err != nil {
			t.Fatalf("TFD_CUDA_WGT=%q: %v", c.mode, err)
		}
		b := &backend{wgt: s, sms: 132}
		if n, p, ok := b.wgtPlan(256, 4096, gateUp); n != c.n || p != c.p || ok != c.ok {
			t.Errorf("TFD_CUDA_WGT=%q: %d, %d, %v; want %d, %d, %v", c.mode, n, p, ok, c.n, c.p, c.ok)
		}
	}
	if !dok {
		t.Errorf("gate and up at 256 rows: not the copy engine's tile")
	}
	for _, bad := range []string{"1", "256:1", "128:2", "128"} {
		if _, err := parseWGT(bad); err == nil {
			t.Errorf("TFD_CUDA_WGT=%q accepted", bad)
		}
	}
}

// TestWGTKeepsEngineBits runs the bundled model's forwards with each of the copy engine's tiles
// forced (TFD_CUDA_WGT=N:P) against the warpgroup's tile, which kernels.UsesWGT gives its short
// K, bit for bit: every matmul of a layer through the engine, o's and down's quarters folded
// into the norm where P = 1, at rows in whole tiles and ragged ones.
func TestWGTKeepsEngineBits(t *testing.T) {
	b, c := openFolding(t)
	if c.arch != "sm_90a" || !tmaAvailable() {
		t.Skip("no copy engine's tile on this GPU or driver")
	}
	m := enginetest.Load(t, b, "models/gopher", engine.Options{MaxRows: 256, Slots: 1024})
	setWGT(b, "") // kernels.UsesWGT's choice, whatever TFD_CUDA_WGT said
	if n, p, ok := c.wgtPlan(256, m.Config().Hidden, [3]int{m.Config().Intermediate}); ok {
		t.Fatalf("the bundled model's K of %d runs matmul_wgt%d_bf16_%d by default: nothing to compare against", m.Config().Hidden, p, n)
	}
	run := func(mode string) [][]float32 {
		setWGT(b, mode)
		defer setWGT(b, "")
		r := rand.New(rand.NewPCG(9, 10))
		var out [][]float32
		for i, n := range []int{64, 100, 256} {
			rows := make([]batch.Row, n)
			for p := range rows {
				rows[p] = batch.Row{Base: 256 * i, Pos: p, Token: int32(r.IntN(m.Vocab())), Logits: p%7 == 0 || p == n-1}
			}
			logits, err := m.Forward(context.Background(), rows)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, slices.Clone(logits))
		}
		return out
	}
	want := run("")
	for _, mode := range []string{"128:4", "128:1", "64:4", "64:1"} {
		got := run(mode)
		for i := range got {
			computetest.SameBits(t, fmt.Sprintf("prompt %d, TFD_CUDA_WGT=%s against the warpgroup's tile", i, mode), got[i], want[i])
		}
	}
}
