package cuda

import (
	"context"
	"slices"
	"sync"
	"testing"

	"tfd/engine"
	"tfd/engine/enginetest"
	"tfd/scheduler"
)

// TestSharedAndDraftedEqualSoloOnCUDA: on the GPU, replies run together in shared rounds with MTP
// and n-gram drafts equal the same requests run one at a time without drafts, token for token.
func TestSharedAndDraftedEqualSoloOnCUDA(t *testing.T) {
	m := enginetest.Load(t, openCUDA(t), "models/gopher", engine.Options{Context: 512, MaxRows: 64, Slots: 4 * 512})
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
