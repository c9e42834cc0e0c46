package scheduler

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"tfd/batch"
)

// flatModel stands in for a model of Qwen's vocabulary whose forwards cost nothing: every logits
// row is the same random one, so a round's time is the host's, its picks most of it.
type flatModel struct {
	row, logits []float32
	slots       int
}

func (m *flatModel) Forward(_ context.Context, rows []batch.Row) ([]float32, error) {
	m.logits = m.logits[:0]
	for _, r := range rows {
		if r.Logits {
			m.logits = append(m.logits, m.row...)
		}
	}
	return m.logits, nil
}

func (m *flatModel) Vocab() int               { return len(m.row) }
func (m *flatModel) MaxRows() int             { return 64 }
func (m *flatModel) Slots() int               { return m.slots }
func (m *flatModel) Context() int             { return m.slots }
func (m *flatModel) MoveKV(_, _, _ int) error { return nil }

// BenchmarkSampledRounds is the host's side of sampled serving: n streams of 16 tokens each over
// a vocabulary of 151,936, sampled with temperature alone, with top_p, and as Qwen2.5's
// generation_config samples by default (top_k 20, top_p 0.8 and a repetition penalty of 1.05),
// and with top_k 40 and log-probabilities (five alternatives a token), on a model whose forwards
// cost nothing. tok/s counts the tokens made.
func BenchmarkSampledRounds(b *testing.B) {
	r := rand.New(rand.NewPCG(7, 8))
	row := make([]float32, 151936)
	for i := range row {
		row[i] = float32(r.NormFloat64() * 3)
	}
	for _, set := range []struct {
		name     string
		s        Sampling
		logprobs bool
	}{{"temperature", Sampling{Temperature: 0.7}, false}, {"top_p", Sampling{Temperature: 0.7, TopP: 0.9}, false},
		{"qwen2.5", Sampling{Temperature: 0.7, TopK: 20, TopP: 0.8, Penalties: Penalties{Repetition: 1.05}}, false},
		{"top_k,logprobs", Sampling{Temperature: 0.7, TopK: 40}, true}} {
		for _, streams := range []int{1, 8, 32} {
			b.Run(fmt.Sprintf("%s/%d", set.name, streams), func(b *testing.B) {
				m := &flatModel{row: row, slots: 32 * 64}
				layout := make(batch.Layout, 32)
				for i := range layout {
					layout[i] = 64
				}
				h, err := NewShared(m, SharedOptions{Layout: layout, Grow: 16})
				if err != nil {
					b.Fatal(err)
				}
				defer h.Close(context.Background())
				tokens := 0
				for i := range b.N {
					var wg sync.WaitGroup
					var mu sync.Mutex
					for s := range streams {
						req := Request{Prompt: []int32{1, 2, 3}, MaxTokens: 16, Sampling: set.s, Logprobs: set.logprobs, TopLogprobs: 5}
						req.Sampling.Seed = uint64(i*streams + s + 1)
						events, err := h.Submit(context.Background(), req)
						if err != nil {
							b.Fatal(err)
						}
						wg.Go(func() {
							n := 0
							for ev := range events {
								if !ev.Done {
									n++
								}
							}
							mu.Lock()
							tokens += n
							mu.Unlock()
						})
					}
					wg.Wait()
				}
				b.ReportMetric(float64(tokens)/b.Elapsed().Seconds(), "tok/s")
			})
		}
	}
}
