// Package schedulertest holds the scheduler's checks and benchmarks that run on a real model and
// backend: the abilities a host is given, concurrent and drafted replies against solo ones, and
// a lone stream's drafting. The scheduler's tests run them on the CPU backend, cuda's and metal's
// on their GPUs. It lives with the scheduler, not the engine, so the engine's rooms import
// nothing of the scheduler.
package schedulertest

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"tfd/compute"
	"tfd/engine"
	"tfd/engine/enginetest"
	"tfd/scheduler"
)

// Equip gives a host's options the model's abilities (its MTP head, greedy and drafted chains,
// warm tick and where its sessions can be fed again from), as the daemon does, so that a test's
// host drafts and chains where the model can.
func Equip(m *engine.Model, opts scheduler.SharedOptions) scheduler.SharedOptions {
	opts.Drafter, opts.Chainer, opts.DraftChainer, opts.Warmer, opts.States = m.MTP(), m.Chains(), m.DraftChains(), m, m.States()
	return opts
}

// CheckSharedAndDrafted runs four replies (two greedy, two sampled with seeds) on the bundled
// model on b, once one at a time on the serial host without drafts and once together on a shared
// host with MTP chains of 3 and n-gram drafts, and demands the same tokens: the scheduler's exactness on a
// backend. The shared host prices rounds on a still clock, so that it drafts whatever the
// machine's load, and every reply must have had drafts land.
func CheckSharedAndDrafted(t *testing.T, b compute.Backend) {
	m := enginetest.Load(t, b, "models/gopher", engine.Options{Context: 512, MaxRows: 64, Slots: 4 * 512})
	checkShared(t, m, scheduler.Drafts{MTP: 3, NGram: 4}, true)
}

// CheckSharedEqualsSolo is CheckSharedAndDrafted for the model folder dir (relative to the
// repository root), whose tokenizer reads the four Go prompts: the shared host drafts by n-gram
// copies, and by its MTP head where it has one.
func CheckSharedEqualsSolo(t *testing.T, b compute.Backend, dir string) {
	m := enginetest.Load(t, b, dir, engine.Options{Context: 512, MaxRows: 64, Slots: 4 * 512})
	drafts := scheduler.Drafts{NGram: 4}
	if m.MTP() != nil {
		drafts.MTP = 3
	}
	checkShared(t, m, drafts, false)
}

// checkShared runs the four replies on m alone and undrafted, then together with drafts, and
// demands the same tokens; with mustLand, also that each reply had drafts land (a model that
// predicts its own text, as the bundled one does; the tiny random checkpoints' drafts may all miss).
func checkShared(t *testing.T, m *engine.Model, drafts scheduler.Drafts, mustLand bool) {
	texts := []string{"package main\n\nimport \"fmt\"\n\nfunc main() {\n", "// Reverse returns", "func (b *Buffer) Write(p []byte) (n int, err error) {\n\t", "type Reader interface {\n"}
	var reqs []scheduler.Request
	for i, text := range texts {
		req := scheduler.Request{Prompt: m.Tokenizer().Encode(text), MaxTokens: 64}
		if i%2 == 1 {
			req.Sampling = scheduler.Sampling{Temperature: 0.8, TopP: 0.95, Seed: uint64(7 + i)}
		}
		reqs = append(reqs, req)
	}
	landed := make([]int, len(reqs))
	run := func(h scheduler.Host, drafts scheduler.Drafts, together bool) [][]int32 {
		out := make([][]int32, len(reqs))
		var wg sync.WaitGroup
		for i, req := range reqs {
			req.Drafts = drafts
			events, err := h.Submit(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			read := func() {
				for ev := range events {
					if !ev.Done {
						out[i] = append(out[i], ev.Token)
					}
					landed[i] = ev.Accepted // the end's count
				}
			}
			if together {
				wg.Go(read)
			} else {
				read()
			}
		}
		wg.Wait()
		return out
	}
	serial := scheduler.NewSerial(m, Equip(m, scheduler.SharedOptions{}))
	want := run(serial, scheduler.Drafts{}, false)
	for i, r := range want {
		if len(r) != reqs[i].MaxTokens {
			t.Fatalf("request %d alone: %d tokens, want %d (no stop tokens)", i, len(r), reqs[i].MaxTokens)
		}
	}
	serial.Close(context.Background())
	shared, err := scheduler.NewShared(m, Equip(m, scheduler.SharedOptions{Layout: []int{512, 512, 512, 512}, Clock: StillClock()}))
	if err != nil {
		t.Fatal(err)
	}
	defer shared.Close(context.Background())
	got := run(shared, drafts, true)
	for i := range reqs {
		if !slices.Equal(got[i], want[i]) {
			t.Errorf("request %d: shared and drafted %v\nsolo and undrafted %v", i, got[i], want[i])
		}
		if mustLand && landed[i] == 0 {
			t.Errorf("request %d: no draft landed in its shared and drafted run", i)
		}
	}
}

// StillClock returns a clock that stands still, for SharedOptions.Clock (and the daemon's
// RunOptions.Clock): every forward then seems to take no time, rows cost nothing that pricing
// can see, and each decoding stream is granted every draft it proposes, whatever the machine's
// load. A test that counts drafts counts the same ones on a busy machine as on an idle one.
func StillClock() func() time.Time {
	at := time.Now()
	return func() time.Time { return at }
}
