package cuda

import (
	"testing"

	"tfd/engine/enginetest"
)

// The engine end to end on the GPU, against the transformers oracle of engine/testdata/oracle,
// with the checks the engine's own tests run on the CPU.

// TestEngineMatchesOracle: every oracle check the engine's own tests run on the CPU
// (enginetest.CheckBackend): logits within 1e-4, greedy runs and device chains equal to
// transformers', forwards batch-invariant bit for bit.
func TestEngineMatchesOracle(t *testing.T) {
	enginetest.CheckBackend(t, openCUDA(t))
}

// TestBlockStoreRestoresExactly: the prompt cache's blocks saved from one session and restored
// into another give the next step there the same logits and MTP draft, bit for bit, directly and
// through the host (enginetest.CheckBlockStore).
func TestBlockStoreRestoresExactly(t *testing.T) {
	enginetest.CheckBlockStore(t, openCUDA(t))
}
