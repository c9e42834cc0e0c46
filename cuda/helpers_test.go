package cuda

import (
	"errors"
	"testing"

	"tfd/compute"
	"tfd/compute/computetest"
	_ "tfd/cpu"
	"tfd/engine"
)

// openCUDA opens a cuda backend closed when the test ends, or skips the test, saying why, where
// there is none (no driver, no GPU, no NVRTC, not Linux).
func openCUDA(t testing.TB) compute.Backend {
	t.Helper()
	b, err := compute.Open("cuda")
	if errors.Is(err, compute.ErrNoDevice) {
		t.Skipf("no CUDA device here: %v", err)
	}
	if err != nil {
		// A backend that is there but fails to open is a failure, not a skip: a kernel that no
		// longer compiles or launches would otherwise pass every test here as skipped.
		t.Fatalf("the CUDA backend is here but does not open: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return b
}

// newPair returns a cuda and a cpu backend to feed the same data, closed when the test ends.
func newPair(t testing.TB) *computetest.Pair {
	t.Helper()
	g := openCUDA(t)
	c, err := compute.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return computetest.NewPair(t, g, c)
}

// daemonRows is the rows a forward of the model at src takes in the daemon on g
// (engine.ForwardRows; the daemon lets engine.DefaultMaxRows of them ask for logits), so that a
// benchmark of the daemon's work loads the model as it does.
func daemonRows(tb testing.TB, g compute.Backend, src engine.Source) int {
	tb.Helper()
	c, _, err := engine.Inspect(src, engine.NoQuantization)
	if err != nil {
		tb.Fatal(err)
	}
	return engine.ForwardRows(g, c)
}
