package cpu

import (
	"testing"

	"tfd/compute/computetest"
)

// The KV moves of tfd/compute/computetest, which the GPU backends run too.

func TestKVReadWrite(t *testing.T)     { computetest.CheckKVReadWrite(t, newTest(t)) }
func TestKVLayout(t *testing.T)        { computetest.CheckKVLayout(t, newTest(t)) }
func TestCopyKVKeepsBits(t *testing.T) { computetest.CheckCopyKV(t, newTest(t)) }
func TestHalfKV(t *testing.T)          { computetest.CheckHalfKV(t, newTest(t)) }
