package cpu

import (
	"testing"

	"tfd/compute/computetest"
)

// The KV moves of tfd/compute/computetest, which the GPU backends run too.

func TestKVReadWrite(t *testing.T)     { computetest.CheckKVReadWrite(t, newTest(t)) }
func TestKVLayout(t *testing.T)        { computetest.CheckKVLayout(t, newTest(t)) }
func TestCopyKVKeepsBits(t *testing.T) { computetest.CheckCopyKV(t, newTest(t)) }

// TestHalfKV runs computetest.CheckHalfKV with every kind of kernel: pure Go, assembly, and
// assembly as on a CPU without F16C, where attention widens an F16 pool's blocks rather than read
// them as stored.
func TestHalfKV(t *testing.T) {
	forWeightKernels(t, func(t *testing.T) { computetest.CheckHalfKV(t, newTest(t)) })
}
