package schedulertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"tfd/batch"
	"tfd/compute"
	"tfd/engine"
	"tfd/engine/enginetest"
	"tfd/scheduler"
)

// BenchLoneDrafts runs one stream alone (the lone driver) making 512 tokens of the bundled model
// on backend b, greedy and sampled, under each way of drafting: off, n-gram copies, MTP chains of
// depth 1, 2 and 3, and the default config's (MTP chains up to 3 and copies). The ways are interleaved within each iteration, so a busy machine slows them
// alike. Per way it reports tok/s (prefill included), acc% (drafts that landed) and tok/fwd
// (tokens per decoding forward of the target: 1 plus the mean accepted length; a greedy chain
// counts each of its forwards).
func BenchLoneDrafts(b *testing.B, cb compute.Backend) {
	ways := []struct {
		name   string
		drafts scheduler.Drafts
	}{
		{"off", scheduler.Drafts{}},
		{"ngram", scheduler.Drafts{NGram: 4}},
		{"mtp1", scheduler.Drafts{MTP: 1}},
		{"mtp2", scheduler.Drafts{MTP: 2}},
		{"mtp3", scheduler.Drafts{MTP: 3}},
		{"default", scheduler.Drafts{MTP: 3, NGram: 4}}, // configs/tfd.toml's drafts
	}
	m := enginetest.Load(b, cb, "models/gopher", engine.Options{Context: 1024, MaxRows: 64, Slots: 1024})
	for _, sampled := range []bool{false, true} {
		b.Run(map[bool]string{false: "greedy", true: "sampled"}[sampled], func(b *testing.B) {
			c := &counted{Model: m}
			// Calibrated at start as the daemon's hosts are: what only a first call pays (a head
			// step's first launch) stays out of the timings that price the drafts.
			opts := Equip(m, scheduler.SharedOptions{Layout: []int{1024}, Calibrate: true})
			if opts.Chainer != nil {
				c.chainer = opts.Chainer
				opts.Chainer = c
			}
			opts.DraftChainer = c.draftChainerOrNil(opts.DraftChainer)
			h, err := scheduler.NewShared(c, opts)
			if err != nil {
				b.Fatal(err)
			}
			defer h.Close(context.Background())
			fmt.Printf("%s: priced rounds %s, a step of the head %v\n", b.Name(), h.Priced(), h.Priced().MTP)
			req := scheduler.Request{
				Prompt:    m.Tokenizer().Encode("<|im_start|>user\nWrite a function that sums a slice.<|im_end|>\n<|im_start|>assistant\n"),
				MaxTokens: 512,
			}
			if sampled {
				req.Sampling = scheduler.Sampling{Temperature: 0.7, TopK: 40, Seed: 7}
			}
			type total struct {
				took                              time.Duration
				tokens, forwards, drafted, landed int
			}
			totals := make([]total, len(ways))
			b.ResetTimer()
			for range b.N {
				for i, w := range ways {
					req.Drafts = w.drafts
					c.forwards = 0
					start := time.Now()
					events, err := h.Submit(context.Background(), req)
					if err != nil {
						b.Fatal(err)
					}
					t := &totals[i]
					for ev := range events {
						if ev.Done {
							t.drafted, t.landed = t.drafted+ev.Drafted, t.landed+ev.Accepted
							continue
						}
						t.tokens++
					}
					t.took += time.Since(start)
					t.forwards += c.forwards
				}
			}
			for i, w := range ways {
				t := totals[i]
				b.ReportMetric(float64(t.tokens)/t.took.Seconds(), w.name+"-tok/s")
				b.ReportMetric(float64(t.tokens)/float64(max(t.forwards, 1)), w.name+"-tok/fwd")
				if t.drafted > 0 {
					b.ReportMetric(100*float64(t.landed)/float64(t.drafted), w.name+"-acc%")
				}
			}
			b.ReportMetric(0, "ns/op") // an iteration is all the ways together: its time says nothing
		})
	}
}

// counted passes forwards and greedy chains to the model, counting the decoding forwards (each
// chain step enqueued is one); the forward that ends the prompt makes the first token besides.
type counted struct {
	*engine.Model
	chainer  batch.Chainer
	forwards int
}

func (c *counted) Forward(ctx context.Context, rows []batch.Row) ([]float32, error) {
	logits, _, err := c.ForwardPicks(ctx, rows)
	return logits, err
}

func (c *counted) ForwardPicks(ctx context.Context, rows []batch.Row) ([]float32, []int32, error) {
	if rows[0].Logits || rows[0].Pick { // a decoding forward: its first row is the newest token; a prompt's is not
		c.forwards++
	}
	return c.Model.ForwardPicks(ctx, rows)
}

func (c *counted) StartChain(ctx context.Context, row batch.Row) error {
	return c.chainer.StartChain(ctx, row)
}

func (c *counted) Step() error {
	c.forwards++
	return c.chainer.Step()
}

func (c *counted) Token() (int32, error) { return c.chainer.Token() }

// countedDrafts passes drafted chains to the model, counting each step enqueued as one of c's
// decoding forwards.
type countedDrafts struct {
	batch.DraftChainer
	c *counted
}

func (d countedDrafts) Step() error {
	d.c.forwards++
	return d.DraftChainer.Step()
}

// draftChainerOrNil returns drafts counted by c, or nil where the model runs none.
func (c *counted) draftChainerOrNil(drafts batch.DraftChainer) batch.DraftChainer {
	if drafts == nil {
		return nil
	}
	return countedDrafts{drafts, c}
}
