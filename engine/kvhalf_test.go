package engine_test

import (
	"testing"

	"tfd/engine/enginetest"
)

// TestHalfKV serves the oracle checkpoints with F16 keys and values on the cpu backend
// (enginetest.CheckHalfKV): logits near transformers', forwards batch-invariant bit for bit,
// picks, drafted chains and the model's identity.
func TestHalfKV(t *testing.T) { enginetest.CheckHalfKV(t, openCPU(t)) }
