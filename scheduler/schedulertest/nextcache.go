package schedulertest

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"tfd/compute"
	"tfd/engine"
	"tfd/engine/enginetest"
	"tfd/promptcache"
	"tfd/scheduler"
)

// CheckHybridPromptCache holds the prompt cache to exactness on a hybrid model (the checkpoint in
// dir, whose sessions carry DeltaNet states) on b: two conversations (one greedy, one sampled),
// each a first turn and a second whose prompt is the first's, its reply and a new question.
// The second turns reply the same tokens, with the same bits of each logprob, as a host without a
// cache gives them: resumed from the blocks in memory (a single session, which the other
// conversation took in between, so only the cache holds their prefix), and after a restart, from
// the spill folder. The cached host runs them drafted, so that rejected drafts pass block
// boundaries, and undrafted.
// The first replies cross more block boundaries than a session keeps snapshots of (MaxRows 64:
// two), so their blocks are cached only if each is offered as soon as it is fed.
func CheckHybridPromptCache(t *testing.T, b compute.Backend, dir string) {
	m := enginetest.Load(t, b, dir, engine.Options{Context: 512, MaxRows: 64, Slots: 512, Sessions: 2, StateDepth: 8})
	if !m.Config().Next.Enabled {
		t.Fatal("the model keeps no DeltaNet states: the test would prove nothing")
	}
	tok := m.Tokenizer()
	firsts := []scheduler.Request{
		{Prompt: tok.Encode(strings.Repeat("// Package delta keeps one state a layer and moves it on a token at a time. ", 12))[:150], MaxTokens: 250, Logprobs: true},
		{Prompt: tok.Encode(strings.Repeat("func (s *State) Step(k, v []float32) {\n\tfor i := range s.m {\n", 12))[:170], MaxTokens: 220, Logprobs: true,
			Sampling: scheduler.Sampling{Temperature: 0.8, TopP: 0.95, Seed: 31}},
	}
	serial := scheduler.NewSerial(m, Equip(m, scheduler.SharedOptions{}))
	wantFirst := runEach(t, serial, firsts)
	seconds := make([]scheduler.Request, len(firsts))
	for i, r := range firsts {
		seconds[i] = r
		seconds[i].Prompt = append(append(slices.Clone(r.Prompt), wantFirst[i].tokens...), tok.Encode("\n// and the next turn asks again\n")...)
		seconds[i].Sampling.Seed++
		seconds[i].MaxTokens = 60
	}
	want := runEach(t, serial, seconds)
	serial.Close(t.Context())

	check := func(t *testing.T, pass string, reqs []scheduler.Request, got, want []result, restored bool) {
		t.Helper()
		for i := range reqs {
			if !slices.Equal(got[i].tokens, want[i].tokens) || !slices.Equal(got[i].logprobs, want[i].logprobs) || got[i].end.Reason != want[i].end.Reason {
				t.Errorf("%s, conversation %d: %v (%s, %v)\nwithout a cache: %v (%s)", pass, i, got[i].tokens, got[i].end.Reason, got[i].end.Err, want[i].tokens, want[i].end.Reason)
			}
			// The first turn fed its prompt and its reply but the last token.
			fed := len(firsts[i].Prompt) + len(wantFirst[i].tokens) - 1
			if whole := fed / promptcache.BlockTokens * promptcache.BlockTokens; restored && got[i].end.Cached < whole-1 {
				t.Errorf("%s, conversation %d reused %d prompt tokens, want the %d of the first turn's whole blocks less one", pass, i, got[i].end.Cached, whole)
			}
		}
	}
	// Drafted, and undrafted (a forward a token on the lone driver): each offers its blocks as it
	// feeds them.
	for _, drafts := range []scheduler.Drafts{{MTP: 3, NGram: 4}, {}} {
		t.Run(fmt.Sprintf("%+v", drafts), func(t *testing.T) {
			for i := range firsts {
				firsts[i].Drafts, seconds[i].Drafts = drafts, drafts
			}
			checkHybridCached(t, m, firsts, seconds, check, wantFirst, want)
		})
	}
}

// checkHybridCached runs CheckHybridPromptCache's cached passes: the first turns, the second
// turns from the cache's memory, and after a restart from its spill folder.
func checkHybridCached(t *testing.T, m *engine.Model, firsts, seconds []scheduler.Request,
	check func(t *testing.T, pass string, reqs []scheduler.Request, got, want []result, restored bool), wantFirst, want []result) {
	spill := t.TempDir()
	opts := Equip(m, scheduler.SharedOptions{Layout: []int{512}})
	h, c, _, stop := StartCached(t, m, opts, 16, spill)
	check(t, "first turns", firsts, runEach(t, h, firsts), wantFirst, false)
	check(t, "second turns from memory", seconds, runEach(t, h, seconds), want, true)
	if st := c.Stats(); st.TokensReused == 0 || st.Errors != 0 {
		t.Errorf("the cache restored nothing, or failed: %+v", st)
	}
	stop()

	h, c, disk, stop := StartCached(t, m, opts, 16, spill)
	defer stop()
	check(t, "second turns after a restart", seconds, runEach(t, h, seconds), want, true)
	if st := disk.Stats(); st.Reads == 0 || c.Stats().Errors != 0 {
		t.Errorf("after a restart nothing was read from the spill folder, or the cache failed: %+v (cache %+v)", st, c.Stats())
	}
}
