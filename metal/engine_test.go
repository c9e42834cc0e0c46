//go:build darwin && arm64

package metal

import (
	"testing"

	"tfd/engine/enginetest"
	"tfd/scheduler/schedulertest"
)

// The engine end to end on the GPU, against the transformers oracle of engine/testdata/oracle,
// with the checks the engine's own tests run on the CPU and tfd/cuda's run on the H200.

// TestEngineMatchesOracle: every oracle check the engine's own tests run on the CPU
// (enginetest.CheckBackend): logits within 1e-4, greedy runs and device chains equal to
// transformers', forwards batch-invariant bit for bit.
func TestEngineMatchesOracle(t *testing.T) {
	enginetest.CheckBackend(t, openMetal(t))
}

// TestBlockStoreRestoresExactly: the prompt cache's blocks saved from one session and restored
// into another give the next step there the same logits and MTP draft, bit for bit, directly and
// through the host (enginetest.CheckBlockStore).
func TestBlockStoreRestoresExactly(t *testing.T) {
	enginetest.CheckBlockStore(t, openMetal(t))
}

// TestSharedAndDraftedEqualSoloOnMetal: on the GPU, replies run together in shared rounds with
// MTP and n-gram drafts equal the same requests run one at a time without drafts, token for token.
func TestSharedAndDraftedEqualSoloOnMetal(t *testing.T) {
	schedulertest.CheckSharedAndDrafted(t, openMetal(t))
}
