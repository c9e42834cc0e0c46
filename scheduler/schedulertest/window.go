package schedulertest

import (
	"slices"
	"strings"
	"testing"

	"tfd/compute"
	"tfd/engine"
	"tfd/engine/enginetest"
	"tfd/promptcache"
	"tfd/scheduler"
)

// CheckWindowRings holds a model whose sliding layers keep rings bounded by the window (the
// model folder dir, whose window is far shorter than its replies) to exactness on b: four
// requests that share a first block (two greedy, two sampled, n-gram drafts on) reply the same
// tokens, with the same bits of each token's logprob, as each alone and undrafted on the serial
// host, on a host whose small sessions make every reply move to a larger one midway (the ring
// moves with it), and again there with the prompt cache restoring the shared block into the
// session's ring, where the sessions' own kept prompts reach back further than their rings.
func CheckWindowRings(t *testing.T, b compute.Backend, dir string) {
	m := enginetest.Load(t, b, dir, engine.Options{Context: 512, MaxRows: 64, Slots: 2*96 + 512, Sessions: 3})
	if m.States() == nil {
		t.Fatal("the model keeps every position: the test would prove nothing")
	}
	tok := m.Tokenizer()
	sys := tok.Encode(strings.Repeat("// Package ring keeps the newest keys of each session in a ring. ", 16))[:promptcache.BlockTokens]
	tails := []string{"package main\n", "// Reverse", "func (b *Buffer)", "type Reader"}
	reqs := make([]scheduler.Request, len(tails))
	for i, tail := range tails {
		// A prompt of one block and a few tokens: the ring still holds the block when the prompt
		// is fed, so the cache can keep it.
		reqs[i] = scheduler.Request{Prompt: append(slices.Clone(sys), tok.Encode(tail)...), MaxTokens: 60, Logprobs: true}
		if i%2 == 1 {
			reqs[i].Sampling = scheduler.Sampling{Temperature: 0.8, TopP: 0.95, Seed: uint64(21 + i)}
		}
	}
	serial := scheduler.NewSerial(m, Equip(m, scheduler.SharedOptions{}))
	want := runEach(t, serial, reqs)
	serial.Close(t.Context())

	for i := range reqs {
		reqs[i].Drafts = scheduler.Drafts{NGram: 4}
		// Prompt and growth fit a session of 96, the reply does not: each stream starts in one
		// of those and moves to the 512 midway, or ends with an error.
		if len(reqs[i].Prompt)+8 > 96 || len(reqs[i].Prompt)+reqs[i].MaxTokens <= 96 {
			t.Fatalf("request %d: a prompt of %d tokens does not start in a session of 96 and move", i, len(reqs[i].Prompt))
		}
	}
	check := func(pass string, got []result, restored bool) {
		t.Helper()
		for i := range reqs {
			if !slices.Equal(got[i].tokens, want[i].tokens) || !slices.Equal(got[i].logprobs, want[i].logprobs) || got[i].end.Reason != want[i].end.Reason {
				t.Errorf("%s, request %d: %v (%s, %v)\nalone: %v (%s)", pass, i, got[i].tokens, got[i].end.Reason, got[i].end.Err, want[i].tokens, want[i].end.Reason)
			}
			if restored && got[i].end.Cached < promptcache.BlockTokens-1 {
				t.Errorf("%s, request %d reused %d prompt tokens, want the shared block's less one", pass, i, got[i].end.Cached)
			}
		}
	}
	opts := Equip(m, scheduler.SharedOptions{Layout: []int{96, 96, 512}, Grow: 8})
	h, c, _, stop := StartCached(t, m, opts, 4, t.TempDir())
	defer stop()
	check("moved", runEach(t, h, reqs), false)
	check("restored", runEach(t, h, reqs), true)
	if st := c.Stats(); st.TokensReused == 0 || st.Errors != 0 {
		t.Errorf("the cache restored nothing, or failed: %+v", st)
	}
}
