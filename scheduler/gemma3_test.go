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

// TestWindowRingsOnGemma3: the Gemma 3 checkpoint's sliding layers keep rings of 71 positions
// (MaxRows 64, window 8); replies moved between sessions, drafted, and resumed from the prompt
// cache equal the same requests alone (schedulertest.CheckWindowRings).
func TestWindowRingsOnGemma3(t *testing.T) {
	b, err := compute.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	schedulertest.CheckWindowRings(t, b, "engine/testdata/oracle/gemma3")
}
