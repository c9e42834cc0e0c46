package cuda

import (
	"fmt"
	"testing"

	"tfd/compute/computetest"
	"tfd/engine"
	"tfd/engine/enginetest"
)

// TestQKRoPEWriteEqualsOps checks QKRoPEWrite, qk_rope_write_H, against the five ops it stands
// for on the GPU, bit for bit (computetest.CheckQKRoPEWrite).
func TestQKRoPEWriteEqualsOps(t *testing.T) { computetest.CheckQKRoPEWrite(t, openCUDA(t)) }

// TestQKRoPEWriteKeepsEngineBits runs TestGraphsKeepBits' script on the bundled model (heads of
// 64: QKRoPEWrite fuses its norms, RoPE and KV writes) with the fused launch and with the ops one
// by one, and demands the same logits bit for bit.
func TestQKRoPEWriteKeepsEngineBits(t *testing.T) {
	b := openCUDA(t)
	defer setQKRoPE(b, true)
	m := enginetest.Load(t, b, "models/gopher", engine.Options{MaxRows: 32, Slots: 512})
	scriptKeepsBits(t, m, func(on bool) { setQKRoPE(b, on) })
}

// scriptKeepsBits runs graphScript with a setting off (set(false)), then on, and demands the same
// logits bit for bit.
func scriptKeepsBits(t *testing.T, m *engine.Model, set func(on bool)) {
	t.Helper()
	set(false)
	want := graphScript(t, m)
	set(true)
	got := graphScript(t, m)
	if len(got) != len(want) {
		t.Fatalf("%d forwards with the setting on, %d off", len(got), len(want))
	}
	for i := range got {
		computetest.SameBits(t, fmt.Sprintf("forward %d", i), got[i], want[i])
	}
}
