package scheduler_test

import (
	"testing"

	"tfd/compute"
	_ "tfd/cpu"
	"tfd/scheduler/schedulertest"
)

// TestSharedEqualsSoloOnMoE: on the tiny Qwen3-MoE checkpoint of the oracle, replies run together
// in shared rounds with n-gram drafts equal the same requests run one at a time without drafts,
// token for token: rows that share a forward share its experts, and no reply changes for it.
func TestSharedEqualsSoloOnMoE(t *testing.T) {
	b, err := compute.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	schedulertest.CheckSharedEqualsSolo(t, b, "engine/testdata/oracle/qwen3moe")
}
