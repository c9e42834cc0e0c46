package scheduler_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"tfd/compute"
	"tfd/engine"
	"tfd/promptcache"
	"tfd/scheduler"
	"tfd/scheduler/schedulertest"
)

// These tests hold the prompt cache to its promise on the bundled model: a reply whose prompt was
// restored from the cache is the same bits as on a host with no cache, and a restored prompt
// feeds only what the cache did not hold.

// cacheHost starts a host of sessions of 512 tokens on m with a prompt cache of blocks blocks.
func cacheHost(t *testing.T, m *engine.Model, sessions, blocks int) (*scheduler.Shared, *promptcache.Cache) {
	t.Helper()
	store, err := m.NewBlockStore(blocks, promptcache.BlockTokens)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.Close)
	c := promptcache.New(store, promptcache.Options{Identity: m.Identity()})
	opts := schedulertest.Equip(m, scheduler.SharedOptions{Layout: slices.Repeat([]int{512}, sessions), Cache: c, CacheBlocks: blocks})
	h, err := scheduler.NewShared(m, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	return h, c
}

// systemPrompt is a prompt start that many requests share, longer than two blocks.
func systemPrompt(t *testing.T, m *engine.Model) []int32 {
	t.Helper()
	text := "<|im_start|>system\nYou are a careful Go programmer. Answer with code that compiles, " +
		"uses the standard library, handles every error and explains itself in short comments. " +
		"Prefer clear names to clever ones, small functions to long ones, and tests that can fail.<|im_end|>\n"
	p := m.Tokenizer().Encode(strings.Repeat(text, 3))
	if len(p) < 2*promptcache.BlockTokens+5 {
		t.Fatalf("the system prompt has %d tokens, too few for the tests", len(p))
	}
	return p
}

// TestCachedEqualsFresh runs varied requests that share a system prompt on a host with a cache,
// twice each, and checks every reply against a host with none: the second runs restore their
// prompts from the cache (more than the session they land in holds) and reply the same bits,
// greedy and sampled, drafts on.
func TestCachedEqualsFresh(t *testing.T) {
	m := loadBundled(t, 2*512+32*promptcache.BlockTokens)
	sys := systemPrompt(t, m)
	reqs := requests(m, 6)
	for i := range reqs {
		reqs[i].Prompt = append(slices.Clone(sys), reqs[i].Prompt...)
		reqs[i].Drafts = scheduler.Drafts{MTP: 3, NGram: 4}
	}
	want := solo(t, m, reqs)

	h, c := cacheHost(t, m, 2, 32)
	for round := range 2 {
		for i, req := range reqs {
			events, err := h.Submit(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			got := drain(events)
			sameReply(t, fmt.Sprintf("round %d request %d", round, i), got, want[i])
			// Every request after the first finds the system prompt's blocks; in the second round
			// each finds its own whole prompt's.
			switch whole := len(req.Prompt) / promptcache.BlockTokens * promptcache.BlockTokens; {
			case round == 1 && got.end.Cached < whole-1:
				t.Errorf("round 1 request %d reused %d prompt tokens, want at least %d", i, got.end.Cached, whole-1)
			case (round == 1 || i > 0) && got.end.Cached < 2*promptcache.BlockTokens-1:
				t.Errorf("round %d request %d reused %d prompt tokens: the system prompt's blocks were not found", round, i, got.end.Cached)
			}
		}
	}
	// Where a session still held more of a prompt than the cache, the session served it; the
	// second round's first four requests find their sessions taken by the last two of the first.
	if st := c.Stats(); st.Hits < 4 || st.TokensReused == 0 {
		t.Errorf("cache stats %+v: want at least 4 hits", st)
	}
}

// TestConversationsShareTheSystemPrompt runs eight conversations of three turns that share one
// system prompt, interleaved over two sessions: all eight of a turn are submitted at once, so
// they queue for the two sessions and no conversation finds its last turn in the session it
// left. The first conversation's first turn runs alone first and warms the system prompt. Every
// other first turn reuses the system prompt's blocks, every later turn its conversation's
// prefix, and every reply equals the one a host without the cache gives.
func TestConversationsShareTheSystemPrompt(t *testing.T) {
	m := loadBundled(t, 2*512+64*promptcache.BlockTokens)
	tok := m.Tokenizer()
	sys := systemPrompt(t, m)
	const convs, turns = 8, 3
	user := func(c, turn int) []int32 {
		return tok.Encode(fmt.Sprintf("<|im_start|>user\nQuestion %d of conversation %d: write func F%d%d.<|im_end|>\n<|im_start|>assistant\n", turn, c, c, turn))
	}
	request := func(c int, prompt []int32) scheduler.Request {
		req := scheduler.Request{Prompt: prompt, MaxTokens: 20, Drafts: scheduler.Drafts{MTP: 3, NGram: 4}}
		if c%2 == 1 {
			req.Sampling = scheduler.Sampling{Temperature: 0.8, TopK: 40, Seed: uint64(c)}
		}
		return req
	}
	h, _ := cacheHost(t, m, 2, 64)
	prompts := make([][]int32, convs)
	for c := range prompts {
		prompts[c] = append(slices.Clone(sys), user(c, 0)...)
	}
	warm := drain(submitAll(t, h, []scheduler.Request{request(0, prompts[0])}, request(0, nil).Drafts)[0])
	for turn := range turns {
		reqs := make([]scheduler.Request, convs)
		for c := range reqs {
			reqs[c] = request(c, prompts[c])
		}
		var got []reply
		if turn == 0 {
			rest := drainAll(submitAll(t, h, reqs[1:], reqs[0].Drafts))
			got = append([]reply{warm}, rest...)
		} else {
			got = drainAll(submitAll(t, h, reqs, reqs[0].Drafts))
		}
		want := solo(t, m, reqs)
		for c := range convs {
			name := fmt.Sprintf("conversation %d turn %d", c, turn)
			sameReply(t, name, got[c], want[c])
			least := 2*promptcache.BlockTokens - 1 // the system prompt's whole blocks
			if turn > 0 {
				least = (len(prompts[c])-len(user(c, turn))-1)/promptcache.BlockTokens*promptcache.BlockTokens - 1
			}
			if (turn > 0 || c > 0) && got[c].end.Cached < least {
				t.Errorf("%s reused %d prompt tokens, want at least %d", name, got[c].end.Cached, least)
			}
			prompts[c] = append(append(slices.Clone(reqs[c].Prompt), got[c].tokens...), user(c, turn+1)...)
		}
	}
}

// TestPromptCacheOnCPU: replies restored from the cache's memory and, after a restart, from its
// spill folder equal the replies of a host without a cache (the check every backend runs).
func TestPromptCacheOnCPU(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the bundled model; skipped with -short")
	}
	b, err := compute.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	schedulertest.CheckPromptCache(t, b)
}

// TestBadSpillFilesAreMisses: after a restart, a spill file with a flipped byte and one cut short
// are misses, each dropped (deleted and counted), and the replies are still those of a host without
// a cache; the blocks before them are still reused.
func TestBadSpillFilesAreMisses(t *testing.T) {
	m := loadBundled(t, 512+16*promptcache.BlockTokens)
	req := requests(m, 2)[1] // sampled
	req.Prompt = append(systemPrompt(t, m), req.Prompt...)
	want := solo(t, m, []scheduler.Request{req})[0]
	dir := t.TempDir()
	start := func() (*scheduler.Shared, *promptcache.Disk, func()) {
		h, _, disk, stop := schedulertest.StartCached(t, m, schedulertest.Equip(m, scheduler.SharedOptions{Layout: []int{512}}), 16, dir)
		return h, disk, stop
	}
	h, _, stop := start()
	drain(submitAll(t, h, []scheduler.Request{req}, scheduler.Drafts{MTP: 3, NGram: 4})[0])
	stop()

	keys := promptcache.Keys(m.Identity(), req.Prompt)
	files, _ := filepath.Glob(filepath.Join(dir, "*"+keys[1].String()+".tfdkv"))
	cut, _ := filepath.Glob(filepath.Join(dir, "*"+keys[2].String()+".tfdkv"))
	if len(files) != 1 || len(cut) != 1 {
		t.Fatalf("spill files of blocks 1 and 2: %v %v", files, cut)
	}
	data, _ := os.ReadFile(files[0])
	data[len(data)/2] ^= 1
	must(t, os.WriteFile(files[0], data, 0o640))
	must(t, os.Truncate(cut[0], 1000))

	h, disk, stop := start()
	defer stop()
	got := drain(submitAll(t, h, []scheduler.Request{req}, scheduler.Drafts{MTP: 3, NGram: 4})[0])
	sameReply(t, "after a restart with bad spill files", got, want)
	// Block 0 comes back from disk; block 1 is corrupt, so the read stops there.
	if got.end.Cached != promptcache.BlockTokens-1 {
		t.Errorf("reused %d prompt tokens, want the first block's %d", got.end.Cached, promptcache.BlockTokens-1)
	}
	if st := disk.Stats(); st.Dropped != 1 {
		t.Errorf("disk stats %+v: want the corrupt file dropped", st)
	}
	if _, err := os.Stat(files[0]); !os.IsNotExist(err) {
		t.Errorf("the corrupt file is still there: %v", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
