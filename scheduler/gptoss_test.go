package scheduler_test

import (
	"testing"

	"tfd/compute"
	_ "tfd/cpu"
	"tfd/scheduler/schedulertest"
)

// TestSharedEqualsSoloOnGptOss: on the tiny GPT-OSS checkpoint of the oracle (sliding window 8
// every other layer, sinks, 8 experts top-2), replies run together in shared rounds with n-gram
// drafts equal the same requests run one at a time without drafts, token for token, in its
// unpacked form and as MXFP4.
func TestSharedEqualsSoloOnGptOss(t *testing.T) {
	b, err := compute.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	for _, dir := range []string{"engine/testdata/oracle/gptoss", "engine/testdata/oracle/gptoss-mxfp4"} {
		t.Run(dir, func(t *testing.T) { schedulertest.CheckSharedEqualsSolo(t, b, dir) })
	}
}

// TestWindowRingsOnGptOss: the GPT-OSS checkpoint's sliding layers (window 8, every other layer,
// with sinks) keep rings; replies moved between sessions, drafted, and resumed from the prompt
// cache equal the same requests alone (schedulertest.CheckWindowRings).
func TestWindowRingsOnGptOss(t *testing.T) {
	b, err := compute.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	schedulertest.CheckWindowRings(t, b, "engine/testdata/oracle/gptoss")
}
