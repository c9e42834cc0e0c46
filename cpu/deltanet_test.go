package cpu

import (
	"testing"

	"tfd/compute/computetest"
)

// TestDeltaNetPairCheck runs computetest.CheckDeltaNet with the cpu backend on both sides: the
// check's premise (each side agrees with itself, bit for bit where it demands bits) on the
// backend it compares GPUs with.
func TestDeltaNetPairCheck(t *testing.T) {
	a, b := newBackend(), newBackend()
	t.Cleanup(func() { a.Close(); b.Close() })
	computetest.CheckDeltaNet(t, computetest.NewPair(t, a, b))
}
