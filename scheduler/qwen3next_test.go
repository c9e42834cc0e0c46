package scheduler_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"tfd/compute"
	_ "tfd/cpu"
	"tfd/engine"
	"tfd/engine/enginetest"
	"tfd/scheduler"
	"tfd/scheduler/schedulertest"
)

// The scheduler on a hybrid model: the tiny Qwen3-Next checkpoint of the oracle (three gated
// DeltaNet layers, one gated attention layer, an MTP head), whose sessions carry DeltaNet states
// that follow their positions.

// TestSharedEqualsSoloOnQwen3Next: replies run together in shared rounds with MTP and n-gram
// drafts, their prompts fed in other chunks beside the others' decoding rows, equal the same
// requests run one at a time without drafts, token for token.
func TestSharedEqualsSoloOnQwen3Next(t *testing.T) {
	b, err := compute.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	schedulertest.CheckSharedEqualsSolo(t, b, "engine/testdata/oracle/qwen3next")
}

// TestSharedEqualsSoloOnQwen3NextQ8_0: the same on llama.cpp's Q8_0 file of the fixture, whose
// experts' gate and up stacks are Q8_0: rows that share a forward share their quantized experts,
// and no reply changes for it.
func TestSharedEqualsSoloOnQwen3NextQ8_0(t *testing.T) {
	b, err := compute.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	schedulertest.CheckSharedEqualsSolo(t, b, "engine/testdata/qwen3next-gguf/qwen3next-q8_0.gguf")
}

// loadNext loads the Qwen3-Next fixture with a KV pool of slots and sessions keeping depth
// positions' states.
func loadNext(t *testing.T, slots, depth int) *engine.Model {
	t.Helper()
	b, err := compute.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return enginetest.Load(t, b, "engine/testdata/oracle/qwen3next", engine.Options{Context: 512, MaxRows: 64, Slots: slots, StateDepth: depth})
}

// TestQwen3NextDraftsKeepTheStates: with sessions keeping only 2 positions' states, the MTP
// head's chains of 3 are cut to 1 draft a round (a rejection still leaves the newest token's
// state; a deeper one would not), and replies drafted by the MTP head and n-gram copies, their
// drafts rejected (the fixture's MTP head is random), equal their undrafted selves, in shared
// rounds and alone on the lone driver.
func TestQwen3NextDraftsKeepTheStates(t *testing.T) {
	m := loadNext(t, 4*512, 2)
	reqs := requests(m, 4)
	for i := range reqs {
		reqs[i].MaxTokens, reqs[i].StopTokens = 48, nil
	}
	want := solo(t, m, reqs)
	h, err := scheduler.NewShared(m, schedulertest.Equip(m, scheduler.SharedOptions{Layout: slices.Repeat([]int{512}, 4)}))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	drafts := scheduler.Drafts{MTP: 3, NGram: 4}
	got := drainAll(submitAll(t, h, reqs, drafts))
	alone := drainAll(submitAll(t, h, reqs[:1], drafts))
	drafted, accepted := 0, 0
	for i, r := range append(got, alone...) {
		sameReply(t, fmt.Sprintf("stream %d", i), r, want[i%len(want)])
		drafted, accepted = drafted+r.end.Drafted, accepted+r.end.Accepted
	}
	t.Logf("%d drafts proposed, %d accepted", drafted, accepted)
	if accepted == drafted {
		t.Errorf("%d of %d drafts landed: the test needs rejected drafts", accepted, drafted)
	}
}

// TestQwen3NextMigratedAndNextTurn: streams that outgrow small sessions move to larger ones with
// their states, and a chat's next turn reuses the session's kept prompt from the state kept after
// its last reply token but one; every reply equals its solo self.
func TestQwen3NextMigratedAndNextTurn(t *testing.T) {
	m := loadNext(t, 2*40+512+256, 0)
	reqs := requests(m, 3)
	for i := range reqs {
		reqs[i].MaxTokens, reqs[i].StopTokens = 60, nil // past the small sessions
	}
	want := solo(t, m, reqs)
	h, err := scheduler.NewShared(m, schedulertest.Equip(m, scheduler.SharedOptions{Layout: []int{40, 40, 512, 256}, Grow: 4}))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	got := drainAll(submitAll(t, h, reqs, scheduler.Drafts{MTP: 2, NGram: 2}))
	for i := range got {
		sameReply(t, fmt.Sprintf("migrated stream %d", i), got[i], want[i])
	}

	first := reqs[1] // sampled
	r1 := drainAll(submitAll(t, h, []scheduler.Request{first}, scheduler.Drafts{}))[0]
	next := first
	next.Prompt = append(append(slices.Clone(first.Prompt), r1.tokens...), m.Tokenizer().Encode("\n// next turn\n")...)
	next.Sampling.Seed++
	r2 := drainAll(submitAll(t, h, []scheduler.Request{next}, scheduler.Drafts{}))[0]
	if want := len(first.Prompt) + len(r1.tokens) - 2; r2.end.Cached != want {
		t.Errorf("the next turn reused %d prompt tokens, want %d", r2.end.Cached, want)
	}
	sameReply(t, "the next turn", r2, solo(t, m, []scheduler.Request{next})[0])
}

// TestQwen3NextPromptCache: a conversation's second turn resumed from the prompt cache, from
// memory and from the spill folder after a restart, equals it run without a cache, token for token
// and bit for bit in each logprob.
func TestQwen3NextPromptCache(t *testing.T) {
	b, err := compute.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	schedulertest.CheckHybridPromptCache(t, b, "engine/testdata/oracle/qwen3next")
}
