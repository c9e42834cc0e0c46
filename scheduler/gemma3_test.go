package scheduler_test

import (
	"testing"

	"tfd/compute"
	_ "tfd/cpu"
	"tfd/scheduler/schedulertest"
)

// TestSharedEqualsSoloOnGemma3: on the tiny Gemma 3 checkpoint of the oracle (sliding window 8,
// shorter than the replies), replies run together in shared rounds with n-gram drafts equal the
// same requests run one at a time without drafts, token for token: each row's window is its own.
func TestSharedEqualsSoloOnGemma3(t *testing.T) {
	b, err := compute.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	schedulertest.CheckSharedEqualsSolo(t, b, "engine/testdata/oracle/gemma3")
}
