//go:build darwin && arm64

package metal

import (
	"testing"

	"tfd/engine"
	"tfd/engine/enginetest"
	"tfd/scheduler/schedulertest"
)

// The engine end to end on the GPU, against the transformers oracle of engine/testdata/oracle,
// with the checks the engine's own tests run on the CPU and tfd/cuda's run on the H200.

// TestEngineLogitsMatchOracle: every prompt position's logits within 1e-4 of the row's largest
// logit, the CPU backend's own bound. gopher's weights are BF16 on disk; the oracle upcast them
// to F32, which is exactly what the kernels do as they load them.
func TestEngineLogitsMatchOracle(t *testing.T) {
	b := openMetal(t)
	for _, name := range enginetest.Models {
		t.Run(name, func(t *testing.T) {
			o := enginetest.Read(t, name)
			m := enginetest.Load(t, b, o.Model, engine.Options{MaxRows: 64})
			t.Logf("%s: worst max|Δlogit| / max|logit| over all positions: %.3g", name, enginetest.CheckLogits(t, m, o))
		})
	}
}

// TestEngineGreedyMatchesOracle: 64-token greedy continuations equal transformers'.
func TestEngineGreedyMatchesOracle(t *testing.T) {
	b := openMetal(t)
	for _, name := range enginetest.Models {
		t.Run(name, func(t *testing.T) {
			o := enginetest.Read(t, name)
			enginetest.CheckGreedy(t, enginetest.Load(t, b, o.Model, engine.Options{MaxRows: 64}), o)
		})
	}
}

// TestEngineGreedyChainMatchesOracle: greedy chains on the device (argmax_next, I32 chains)
// give transformers' tokens.
func TestEngineGreedyChainMatchesOracle(t *testing.T) {
	b := openMetal(t)
	for _, name := range enginetest.Models {
		t.Run(name, func(t *testing.T) {
			o := enginetest.Read(t, name)
			enginetest.CheckChain(t, enginetest.Load(t, b, o.Model, engine.Options{MaxRows: 64}), o)
		})
	}
}

// TestEngineForwardIsBatchInvariant: forwards that mix sessions and positions give each row the
// bits it gets alone.
func TestEngineForwardIsBatchInvariant(t *testing.T) {
	b := openMetal(t)
	for _, name := range []string{"qwen2", "gopher"} {
		t.Run(name, func(t *testing.T) {
			o := enginetest.Read(t, name)
			enginetest.CheckBatchInvariance(t, enginetest.Load(t, b, o.Model, engine.Options{MaxRows: 48, Slots: 600}))
		})
	}
}

// TestSharedAndDraftedEqualSoloOnMetal: on the GPU, replies run together in shared rounds with
// MTP and n-gram drafts equal the same requests run one at a time without drafts, token for token.
func TestSharedAndDraftedEqualSoloOnMetal(t *testing.T) {
	schedulertest.CheckSharedAndDrafted(t, openMetal(t))
}
