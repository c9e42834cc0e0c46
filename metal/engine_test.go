//go:build darwin && arm64

package metal

import (
	"testing"

	"tfd/compute"
	"tfd/engine"
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

// TestLongForwardsKeepBits: the bundled model's whole context as one forward of 2,048 rows gives
// every position the bits that forwards of 256 and of 700 rows give it
// (enginetest.CheckForwardSizes), as tfd/cuda's test checks on the H200.
func TestLongForwardsKeepBits(t *testing.T) {
	m := enginetest.Load(t, openMetal(t), "models/gopher", engine.Options{MaxRows: 2048, Slots: 2048})
	enginetest.CheckForwardSizes(t, m, 2048, []int{256, 2048, 700})
}

// TestHalfKVEngine: the oracle checkpoints with F16 keys and values (sessions.kv_cache = "f16";
// enginetest.CheckHalfKV): logits near transformers', forwards batch-invariant bit for bit, picks,
// drafted chains and the model's identity.
func TestHalfKVEngine(t *testing.T) { enginetest.CheckHalfKV(t, openMetal(t)) }

// TestQuantizedEngineMatchesCPU: the bundled model quantized at load (q8, q4) and as GGUF Q8_0,
// Q4_0, Q4_K and Q6_K files runs on the GPU: the Q8_0 and Q4_0 files give the folder's bits,
// forwards are batch-invariant bit for bit, logits are near the cpu backend's and the greedy runs
// are compared with its (enginetest.CheckQuantized).
func TestQuantizedEngineMatchesCPU(t *testing.T) {
	cpu, err := compute.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cpu.Close() })
	enginetest.CheckQuantized(t, openMetal(t), cpu)
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
