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

// TestPicksEqualArgmax checks ForwardPicks on the bundled model both ways: the cpu backend takes
// the picks (compute.Picker), and a backend without the op leaves them to the engine.
func TestPicksEqualArgmax(t *testing.T) {
	for _, c := range []struct {
		name string
		b    compute.Backend
	}{{"backend", openCPU(t)}, {"host", hostPicks{openCPU(t)}}} {
		t.Run(c.name, func(t *testing.T) {
			if _, ok := c.b.(compute.Picker); ok != (c.name == "backend") {
				t.Fatalf("the %s backend is a compute.Picker: %v", c.name, ok)
			}
			enginetest.CheckPicks(t, enginetest.Load(t, c.b, bundledDir, engine.Options{MaxRows: 24, Slots: 600}))
		})
	}
}
