// Package replies times concurrent replies on a loaded model as the daemon serves them: for each
// of several concurrencies, that many replies at once on a fresh shared host, drafts off and on,
// and a table of the time to the first token, the tokens per second in all and of one reply, and
// the share of drafts that landed. It is `tfd bench` without the daemon's loading, so that a test
// binary (the CUDA backend's, on the GPU machine) can run it on a model it loaded itself.
package replies

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"text/tabwriter"
	"time"

	"tfd/daemon/bench/turns"
	"tfd/engine"
	"tfd/scheduler"
)

// Options say what is measured.
type Options struct {
	Streams []int // concurrent replies per scenario, e.g. 1, 4, 16
	Prompt  int   // prompt tokens per reply
	Tokens  int   // generated tokens per reply
	// Sampling is every reply's; greedy when its temperature is 0. Reply i of a scenario gets
	// seed i+1, so a run is the same replies every time.
	Sampling scheduler.Sampling
}

// Check says what is wrong with o, before anything is loaded for it.
func (o Options) Check() error {
	if len(o.Streams) == 0 || slices.Min(o.Streams) < 1 || o.Prompt < 1 || o.Tokens < 1 || o.Sampling.Temperature < 0 {
		return fmt.Errorf("bench: streams %v, prompt %d, tokens %d: want at least one stream count, and every count 1 or more", o.Streams, o.Prompt, o.Tokens)
	}
	return nil
}

// Layout is the sessions a run of o needs: one per stream of the largest scenario, each as long
// as a prompt and its reply.
func (o Options) Layout() []int {
	return slices.Repeat([]int{o.Prompt + o.Tokens + 1}, slices.Max(o.Streams))
}

// Result is one scenario's figures.
type Result struct {
	Streams   int
	Drafts    bool
	TTFT      time.Duration // mean time to a reply's first token
	Aggregate float64       // generated tokens per second over the scenario's wall time
	PerStream float64       // a reply's tokens per second after its first token, mean
	Accepted  float64       // share of draft tokens that landed
}

// Run runs each scenario of o on m, whose KV pool holds layout's sessions (at least o.Layout()),
// twice: drafts off, then as on says (MTP chains and n-gram copies; the config's). Each prompt is
// Go source, starting i tokens into the text for reply i so that no two are the same. A first
// short run pays the one-time costs (kernel compilation, graph capture) outside the figures.
// progress, if not nil, is told of each scenario before it runs.
func Run(ctx context.Context, m *engine.Model, layout []int, o Options, on scheduler.Drafts, progress func(streams int, drafts bool)) ([]Result, error) {
	if err := o.Check(); err != nil {
		return nil, err
	}
	prompt := turns.GoSource(m, o.Prompt+slices.Max(o.Streams))
	warm := o
	warm.Tokens = min(8, o.Tokens)
	if _, err := scenario(ctx, m, layout, prompt, warm, 1, scheduler.Drafts{}); err != nil {
		return nil, err
	}
	var results []Result
	for _, n := range o.Streams {
		for _, drafts := range []scheduler.Drafts{{}, on} {
			if progress != nil {
				progress(n, drafts != scheduler.Drafts{})
			}
			r, err := scenario(ctx, m, layout, prompt, o, n, drafts)
			if err != nil {
				return nil, err
			}
			results = append(results, r)
		}
	}
	return results, nil
}

// scenario runs n replies at once on a fresh host.
func scenario(ctx context.Context, m *engine.Model, layout []int, prompt []int32, o Options, n int, drafts scheduler.Drafts) (Result, error) {
	h, err := scheduler.NewShared(m, scheduler.SharedOptions{Layout: layout, Drafter: m.MTP(), Chainer: m.Chains(), DraftChainer: m.DraftChains(), States: m.States()})
	if err != nil {
		return Result{}, err
	}
	defer h.Close(context.Background())
	r := Result{Streams: n, Drafts: drafts != scheduler.Drafts{}}
	var mu sync.Mutex // guards r's sums, errs, drafted and accepted
	var errs []error
	var drafted, accepted int
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		req := scheduler.Request{Prompt: prompt[i : i+o.Prompt], MaxTokens: o.Tokens, Sampling: o.Sampling}
		req.Sampling.Seed = uint64(i + 1)
		req.Drafts = drafts
		events, err := h.Submit(ctx, req)
		if err != nil {
			return r, fmt.Errorf("bench: %w", err)
		}
		wg.Go(func() {
			var first, last time.Time
			tokens := 0
			for ev := range events {
				switch {
				case ev.Done && ev.Reason != scheduler.FinishLength:
					mu.Lock()
					errs = append(errs, fmt.Errorf("bench: a reply ended %s: %v", ev.Reason, ev.Err))
					mu.Unlock()
				case ev.Done:
					mu.Lock()
					drafted, accepted = drafted+ev.Drafted, accepted+ev.Accepted
					mu.Unlock()
				default:
					if tokens++; first.IsZero() {
						first = time.Now()
					}
					last = time.Now()
				}
			}
			mu.Lock()
			defer mu.Unlock()
			r.TTFT += first.Sub(start)
			if tokens > 1 {
				r.PerStream += float64(tokens-1) / last.Sub(first).Seconds()
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return r, errs[0]
	}
	r.Aggregate = float64(n*o.Tokens) / time.Since(start).Seconds()
	r.TTFT /= time.Duration(n)
	r.PerStream /= float64(n)
	if drafted > 0 {
		r.Accepted = float64(accepted) / float64(drafted)
	}
	return r, nil
}

// Write prints results as a table headed by what was run: model on backend, greedy or sampled.
func Write(out io.Writer, model, backend string, o Options, results []Result) error {
	how := "greedy replies"
	if s := o.Sampling; !s.Greedy() {
		how = fmt.Sprintf("replies sampled at temperature %g, top_p %g, top_k %d (reply i: seed i),", s.Temperature, s.TopP, s.TopK)
	}
	fmt.Fprintf(out, "%s on %s: %s of %d tokens after %d-token prompts\n", model, backend, how, o.Tokens, o.Prompt)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "streams\tdrafts\tfirst token\ttok/s, all\ttok/s, a reply\tdrafts landed\t")
	for _, r := range results {
		drafts, landed := "off", "-"
		if r.Drafts {
			drafts, landed = "on", fmt.Sprintf("%.0f%%", 100*r.Accepted)
		}
		fmt.Fprintf(tw, "%d\t%s\t%.1f ms\t%.0f\t%.0f\t%s\t\n", r.Streams, drafts,
			float64(r.TTFT.Microseconds())/1000, r.Aggregate, r.PerStream, landed)
	}
	return tw.Flush()
}
