package schedulertest

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"tfd/compute"
	"tfd/engine"
	"tfd/engine/enginetest"
	"tfd/promptcache"
	"tfd/scheduler"
)

// CheckPromptCache holds the prompt cache to exactness on the bundled model on b: four requests
// that share a system prompt (two greedy, two sampled, drafts on) reply the same tokens, with the
// same bits of each token's logprob, on a host
// without a cache, on a host with one (a first pass that fills it, then a second that restores
// each whole prompt from memory), and after a restart: the first host closed (its blocks written
// to the spill folder) and a new one, with an empty memory, reading them back from disk.
func CheckPromptCache(t *testing.T, b compute.Backend) {
	m := enginetest.Load(t, b, "models/gopher", engine.Options{Context: 512, MaxRows: 64, Slots: 2 * 512})
	sys := m.Tokenizer().Encode(strings.Repeat("// Package cache keeps what was computed so that it need not be computed again. ", 8))
	tails := []string{"package main\n\nfunc main() {\n", "// Reverse returns", "func (b *Buffer) Write(p []byte) (n int, err error) {\n\t", "type Reader interface {\n"}
	reqs := make([]scheduler.Request, len(tails))
	for i, tail := range tails {
		// Each tail is longer than a block, so that each prompt has a whole block of its own that
		// only the cache, not a session another request held, can give back.
		reqs[i] = scheduler.Request{Prompt: append(slices.Clone(sys), m.Tokenizer().Encode(strings.Repeat(tail, 8))...), MaxTokens: 40,
			Drafts: scheduler.Drafts{MTP: 3, NGram: 4}, Logprobs: true}
		if i%2 == 1 {
			reqs[i].Sampling = scheduler.Sampling{Temperature: 0.8, TopP: 0.95, Seed: uint64(11 + i)}
		}
	}
	layout := scheduler.SharedOptions{Layout: []int{512, 512}}
	fresh, err := scheduler.NewShared(m, Equip(m, layout))
	if err != nil {
		t.Fatal(err)
	}
	want := runEach(t, fresh, reqs)
	fresh.Close(context.Background())

	dir := t.TempDir()
	start := func() (*scheduler.Shared, *promptcache.Cache, *promptcache.Disk, func()) {
		return StartCached(t, m, Equip(m, layout), 16, dir)
	}
	check := func(pass string, got []result, restored bool) {
		t.Helper()
		for i := range reqs {
			if !slices.Equal(got[i].tokens, want[i].tokens) || !slices.Equal(got[i].logprobs, want[i].logprobs) || got[i].end.Reason != want[i].end.Reason {
				t.Errorf("%s, request %d: %v (%s)\nwithout a cache: %v (%s)", pass, i, got[i].tokens, got[i].end.Reason, want[i].tokens, want[i].end.Reason)
			}
			whole := len(reqs[i].Prompt) / promptcache.BlockTokens * promptcache.BlockTokens
			if restored && got[i].end.Cached < whole-1 {
				t.Errorf("%s, request %d reused %d prompt tokens, want the %d of its whole blocks less one", pass, i, got[i].end.Cached, whole)
			}
		}
	}

	h, c, _, stop := start()
	check("first pass", runEach(t, h, reqs), false)
	check("memory hits", runEach(t, h, reqs), true)
	if st := c.Stats(); st.TokensReused == 0 {
		t.Errorf("the cache restored nothing: %+v", st)
	}
	stop()

	h, c, disk, stop := start()
	defer stop()
	check("after a restart", runEach(t, h, reqs), true)
	if st := disk.Stats(); st.Reads == 0 {
		t.Errorf("after a restart nothing was read from the spill folder: %+v (cache %+v)", st, c.Stats())
	}
}

// StartCached starts a host on m with opts and a prompt cache of blocks blocks that spills to
// dir. stop closes the host (its blocks go to the spill folder), then the folder (they reach the
// disk), then the store; a test that starts another host on dir calls it first.
func StartCached(t testing.TB, m *engine.Model, opts scheduler.SharedOptions, blocks int, dir string) (h *scheduler.Shared, c *promptcache.Cache, disk *promptcache.Disk, stop func()) {
	t.Helper()
	store, err := m.NewBlockStore(blocks, promptcache.BlockTokens)
	if err != nil {
		t.Fatal(err)
	}
	disk, err = promptcache.OpenDisk(promptcache.DiskOptions{Dir: dir, Limit: 1 << 30, Identity: m.Identity()})
	if err != nil {
		t.Fatal(err)
	}
	c = promptcache.New(store, promptcache.Options{Identity: m.Identity(), Spill: disk})
	opts.Cache, opts.CacheBlocks, opts.CacheSpill = c, blocks, disk
	if h, err = scheduler.NewShared(m, opts); err != nil {
		t.Fatal(err)
	}
	stop = func() {
		h.Close(context.Background())
		if err := disk.Close(); err != nil {
			t.Error(err)
		}
		store.Close()
	}
	return h, c, disk, stop
}

type result struct {
	tokens   []int32
	logprobs []uint32 // the bits of each token's logprob: a restore that is off by an ulp shows
	end      scheduler.Event
}

// runEach runs reqs one after another on h.
func runEach(t *testing.T, h scheduler.Host, reqs []scheduler.Request) []result {
	t.Helper()
	out := make([]result, len(reqs))
	for i, req := range reqs {
		events, err := h.Submit(context.Background(), req)
		if err != nil {
			t.Fatal(fmt.Errorf("request %d: %w", i, err))
		}
		for ev := range events {
			if ev.Done {
				out[i].end = ev
			} else {
				out[i].tokens = append(out[i].tokens, ev.Token)
				out[i].logprobs = append(out[i].logprobs, math.Float32bits(ev.Logprob))
			}
		}
	}
	return out
}
