//go:build darwin && arm64

package metal

import (
	"context"
	"slices"
	"sync"
	"testing"

	"tfd/engine"
	"tfd/engine/enginetest"
	"tfd/scheduler"
)

// The engine end to end on the GPU, against the transformers oracle of engine/testdata/oracle,
// with the checks the engine's own tests run on the CPU and tfd/cuda's run on the H200.

// TestEngineLogitsMatchOracle: every prompt position's logits within 1e-4 of the row's largest
// logit, the CPU backend's own bound. gopher's weights are BF16 on disk; the oracle upcast them
// to F32, which is exactly what the kernels do as they load them.
func TestEngineLogitsMatchOracle(t *testing.T) {
	b := openMetal(t)
	for _, name := range enginetest.Models {
		t.Run(name, func(t *testing.T) {
			o := enginetest.Read(t, name)
			m := enginetest.Load(t, b, o.Model, engine.Options{MaxRows: 64})
			t.Logf("%s: worst max|Δlogit| / max|logit| over all positions: %.3g", name, enginetest.CheckLogits(t, m, o))
		})
	}
}

// TestEngineGreedyMatchesOracle: 64-token greedy continuations equal transformers'.
func TestEngineGreedyMatchesOracle(t *testing.T) {
	b := openMetal(t)
	for _, name := range enginetest.Models {
		t.Run(name, func(t *testing.T) {
			o := enginetest.Read(t, name)
			enginetest.CheckGreedy(t, enginetest.Load(t, b, o.Model, engine.Options{MaxRows: 64}), o)
		})
	}
}

// TestEngineGreedyChainMatchesOracle: greedy chains on the device (argmax_next, I32 chains)
// give transformers' tokens.
func TestEngineGreedyChainMatchesOracle(t *testing.T) {
	b := openMetal(t)
	for _, name := range enginetest.Models {
		t.Run(name, func(t *testing.T) {
			o := enginetest.Read(t, name)
			enginetest.CheckChain(t, enginetest.Load(t, b, o.Model, engine.Options{MaxRows: 64}), o)
		})
	}
}

// TestEngineForwardIsBatchInvariant: forwards that mix sessions and positions give each row the
// bits it gets alone.
func TestEngineForwardIsBatchInvariant(t *testing.T) {
	b := openMetal(t)
	for _, name := range []string{"qwen2", "gopher"} {
		t.Run(name, func(t *testing.T) {
			o := enginetest.Read(t, name)
			enginetest.CheckBatchInvariance(t, enginetest.Load(t, b, o.Model, engine.Options{MaxRows: 48, Slots: 600}))
		})
	}
}

// TestSharedAndDraftedEqualSoloOnMetal: on the GPU, replies run together in shared rounds with MTP
// and n-gram drafts equal the same requests run one at a time without drafts, token for token.
func TestSharedAndDraftedEqualSoloOnMetal(t *testing.T) {
	m := enginetest.Load(t, openMetal(t), "models/gopher", engine.Options{Context: 512, MaxRows: 64, Slots: 4 * 512})
	texts := []string{"package main\n\nimport \"fmt\"\n\nfunc main() {\n", "// Reverse returns", "func (b *Buffer) Write(p []byte) (n int, err error) {\n\t", "type Reader interface {\n"}
	var reqs []scheduler.Request
	for i, text := range texts {
		req := scheduler.Request{Prompt: m.Tokenizer().Encode(text), MaxTokens: 64}
		if i%2 == 1 {
			req.Sampling = scheduler.Sampling{Temperature: 0.8, TopP: 0.95, Seed: uint64(7 + i)}
		}
		reqs = append(reqs, req)
	}
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
	serial := scheduler.NewSerial(m, enginetest.Equip(m, scheduler.SharedOptions{}))
	want := run(serial, scheduler.Drafts{}, false)
	serial.Close(context.Background())
	shared, err := scheduler.NewShared(m, enginetest.Equip(m, scheduler.SharedOptions{Layout: []int{512, 512, 512, 512}}))
	if err != nil {
		t.Fatal(err)
	}
	defer shared.Close(context.Background())
	got := run(shared, scheduler.Drafts{MTP: true, NGram: 4}, true)
	for i := range reqs {
		if !slices.Equal(got[i], want[i]) {
			t.Errorf("request %d: shared and drafted %v\nsolo and undrafted %v", i, got[i], want[i])
		}
	}
}
