package engine_test

import (
	"testing"

	"tfd/compute"
	"tfd/engine"
	"tfd/engine/enginetest"
)

// hostPicks is a backend without compute.Picker: the engine takes the picks from the logits it
// reads back.
type hostPicks struct{ compute.Backend }

// TestHostPicksEqualArgmax checks ForwardPicks on a backend that takes no picks (CheckBackend's
// picks run on the cpu backend, which does).
func TestHostPicksEqualArgmax(t *testing.T) {
	var b compute.Backend = hostPicks{openCPU(t)}
	if _, ok := b.(compute.Picker); ok {
		t.Fatal("the wrapped backend is a compute.Picker")
	}
	enginetest.CheckPicks(t, enginetest.Load(t, b, bundledDir, engine.Options{MaxRows: 24, Slots: 600}))
}
