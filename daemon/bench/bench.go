// Package bench owns `tfd bench`: it loads the configured model as the daemon does, runs greedy
// replies at several concurrencies, drafts off and on, and prints a table of the time to the
// first token, the tokens per second in all and of one reply, and the share of drafts that landed.
package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"text/tabwriter"
	"time"

	"tfd/compute"
	"tfd/daemon"
	"tfd/daemon/bench/turns"
	"tfd/daemon/config"
	"tfd/engine"
	"tfd/scheduler"
)

// Options say what `tfd bench` measures.
type Options struct {
	Streams []int // concurrent replies per scenario, e.g. 1, 4, 16
	Prompt  int   // prompt tokens per reply
	Tokens  int   // generated tokens per reply
	// Sampling is every reply's; greedy when its temperature is 0. Reply i of a scenario gets
	// seed i+1, so a run is the same replies every time.
	Sampling scheduler.Sampling
}

// benchResult is one scenario's figures.
type benchResult struct {
	streams   int
	drafts    bool
	ttft      time.Duration // mean time to a reply's first token
	aggregate float64       // generated tokens per second over the scenario's wall time
	perStream float64       // a reply's tokens per second after its first token, mean
	accepted  float64       // share of draft tokens that landed
}

// Run loads cfg's model on cfg's backend with one session per stream of the largest scenario,
// then runs each scenario twice, drafts off and on: that many replies at once (greedy, or as
// opts.Sampling says), each from a prompt of Go source. It writes one progress line per scenario
// to logger and a table to out.
func Run(ctx context.Context, cfg config.Config, opts Options, logger *slog.Logger, out io.Writer) error {
	if len(opts.Streams) == 0 || slices.Min(opts.Streams) < 1 || opts.Prompt < 1 || opts.Tokens < 1 || opts.Sampling.Temperature < 0 {
		return fmt.Errorf("bench: streams %v, prompt %d, tokens %d: want at least one stream count, and every count 1 or more", opts.Streams, opts.Prompt, opts.Tokens)
	}
	most := slices.Max(opts.Streams)
	cfg.Sessions.Layout = fmt.Sprintf("%dx%d", opts.Prompt+opts.Tokens+1, most)
	cfg.Sessions.Grow = opts.Tokens
	m, backend, plan, err := load(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer backend.Close()
	defer m.Close()
	prompt := turns.GoSource(m, opts.Prompt+most)
	// A first short run pays the one-time costs (kernel compilation, graph capture) outside the
	// figures.
	if _, err := benchScenario(ctx, m, plan.Layout, prompt, Options{Prompt: opts.Prompt, Tokens: min(8, opts.Tokens), Sampling: opts.Sampling}, 1, scheduler.Drafts{}); err != nil {
		return err
	}
	// Drafts on are the config's: MTP chains up to drafts.mtp_max and n-gram copies if on.
	on := scheduler.Drafts{MTP: cfg.Drafts.MTPMax}
	if cfg.Drafts.NGram {
		on.NGram = cfg.Drafts.NGramMax
	}
	var results []benchResult
	for _, n := range opts.Streams {
		for _, drafts := range []scheduler.Drafts{{}, on} {
			logger.Info("bench: running", "streams", n, "drafts", drafts != scheduler.Drafts{}, "prompt", opts.Prompt, "tokens", opts.Tokens)
			r, err := benchScenario(ctx, m, plan.Layout, prompt, opts, n, drafts)
			if err != nil {
				return err
			}
			results = append(results, r)
		}
	}
	return writeBench(out, m.Name(), backend.Name(), opts, results)
}

// load opens cfg's backend, plans cfg's sessions on it and loads the model with a KV pool of the
// plan's size. The caller closes the model, then the backend.
func load(ctx context.Context, cfg config.Config, logger *slog.Logger) (*engine.Model, compute.Backend, engine.Plan, error) {
	backend, err := daemon.OpenBackend(cfg.Model.Backend, logger)
	if err != nil {
		return nil, nil, engine.Plan{}, err
	}
	plan, err := daemon.PlanConfig(cfg, backend)
	if err != nil {
		backend.Close()
		return nil, nil, plan, fmt.Errorf("bench: sessions %s: %w", cfg.Sessions.Layout, err)
	}
	logger.Info("bench: loading the model", "backend", backend.Name(), "sessions", plan.LayoutString())
	m, err := engine.Load(ctx, daemon.ModelSource(cfg.Model), backend, engine.Options{Context: plan.Context, MaxRows: daemon.MaxRows, Slots: plan.Slots(), Quantize: plan.Quantize,
		KVCache: plan.KVCache, Sessions: len(plan.Layout), StateDepth: plan.StateDepth})
	if err != nil {
		backend.Close()
		return nil, nil, plan, fmt.Errorf("bench: load the model: %w", err)
	}
	return m, backend, plan, nil
}

// benchScenario runs n replies at once on a fresh host, greedy or as opts.Sampling says; each
// prompt starts i tokens into the text so that no two are the same.
func benchScenario(ctx context.Context, m *engine.Model, layout []int, prompt []int32, opts Options, n int, drafts scheduler.Drafts) (benchResult, error) {
	h, err := scheduler.NewShared(m, scheduler.SharedOptions{Layout: layout, Drafter: m.MTP(), Chainer: m.Chains(), DraftChainer: m.DraftChains(), States: m.States()})
	if err != nil {
		return benchResult{}, err
	}
	defer h.Close(context.Background())
	r := benchResult{streams: n, drafts: drafts != scheduler.Drafts{}}
	var mu sync.Mutex // guards r's sums and errs
	var errs []error
	var drafted, accepted int
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		req := scheduler.Request{Prompt: prompt[i : i+opts.Prompt], MaxTokens: opts.Tokens, Sampling: opts.Sampling}
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
			r.ttft += first.Sub(start)
			if tokens > 1 {
				r.perStream += float64(tokens-1) / last.Sub(first).Seconds()
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return r, errs[0]
	}
	r.aggregate = float64(n*opts.Tokens) / time.Since(start).Seconds()
	r.ttft /= time.Duration(n)
	r.perStream /= float64(n)
	if drafted > 0 {
		r.accepted = float64(accepted) / float64(drafted)
	}
	return r, nil
}

func writeBench(out io.Writer, model, backend string, opts Options, results []benchResult) error {
	how := "greedy replies"
	if s := opts.Sampling; !s.Greedy() {
		how = fmt.Sprintf("replies sampled at temperature %g, top_p %g, top_k %d (reply i: seed i),", s.Temperature, s.TopP, s.TopK)
	}
	fmt.Fprintf(out, "%s on %s: %s of %d tokens after %d-token prompts\n", model, backend, how, opts.Tokens, opts.Prompt)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "streams\tdrafts\tfirst token\ttok/s, all\ttok/s, a reply\tdrafts landed\t")
	for _, r := range results {
		drafts, landed := "off", "-"
		if r.drafts {
			drafts, landed = "on", fmt.Sprintf("%.0f%%", 100*r.accepted)
		}
		fmt.Fprintf(tw, "%d\t%s\t%.1f ms\t%.0f\t%.0f\t%s\t\n", r.streams, drafts,
			float64(r.ttft.Microseconds())/1000, r.aggregate, r.perStream, landed)
	}
	return tw.Flush()
}
