package scheduler_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"tfd/scheduler"
	"tfd/scheduler/schedulertest"
)

// Aggregate decode throughput of the bundled model on the CPU backend, side by side:
//
//	go test ./scheduler -run '^$' -bench . -benchtime 3x
//
// Each iteration runs `streams` greedy replies of 64 tokens at once; tok/s counts generated
// tokens over wall time, prefill included.
func BenchmarkStreams(b *testing.B) {
	for _, streams := range []int{1, 2, 4, 8} {
		b.Run(fmt.Sprintf("shared/%d", streams), func(b *testing.B) {
			m := loadBundled(b, 8*512)
			h, err := scheduler.NewShared(m, schedulertest.Equip(m, scheduler.SharedOptions{Layout: slices.Repeat([]int{512}, 8)}))
			if err != nil {
				b.Fatal(err)
			}
			defer h.Close(context.Background())
			runStreams(b, h, requests(m, streams), scheduler.Drafts{})
		})
	}
	// The same with drafts from the MTP head and n-gram copies (the daemon's default).
	for _, streams := range []int{1, 8} {
		b.Run(fmt.Sprintf("drafted/%d", streams), func(b *testing.B) {
			m := loadBundled(b, 8*512)
			h, err := scheduler.NewShared(m, schedulertest.Equip(m, scheduler.SharedOptions{Layout: slices.Repeat([]int{512}, 8)}))
			if err != nil {
				b.Fatal(err)
			}
			defer h.Close(context.Background())
			runStreams(b, h, requests(m, streams), scheduler.Drafts{MTP: 1, NGram: 4})
		})
	}
	// The lone driver (a shared host with one stream) against the serial host.
	b.Run("serial/1", func(b *testing.B) {
		m := loadBundled(b, 512)
		h := scheduler.NewSerial(m, schedulertest.Equip(m, scheduler.SharedOptions{}))
		defer h.Close(context.Background())
		runStreams(b, h, requests(m, 1), scheduler.Drafts{})
	})
}

func runStreams(b *testing.B, h scheduler.Host, reqs []scheduler.Request, drafts scheduler.Drafts) {
	for i := range reqs {
		reqs[i].MaxTokens, reqs[i].StopTokens = 64, nil
		reqs[i].Sampling = scheduler.Sampling{}
		reqs[i].Drafts = drafts
	}
	tokens := 0
	b.ResetTimer()
	for range b.N {
		var wg sync.WaitGroup
		var mu sync.Mutex
		for _, req := range reqs {
			events, err := h.Submit(context.Background(), req)
			if err != nil {
				b.Fatal(err)
			}
			wg.Go(func() {
				r := drain(events)
				mu.Lock()
				tokens += len(r.tokens)
				mu.Unlock()
			})
		}
		wg.Wait()
	}
	b.ReportMetric(float64(tokens)/b.Elapsed().Seconds(), "tok/s")
}
