package schedulertest

import (
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"tfd/batch"
	"tfd/compute"
	"tfd/daemon/config"
	"tfd/engine"
	"tfd/scheduler"
)

// loneWay is one way of drafting that BenchLone compares.
type loneWay struct {
	name   string
	drafts scheduler.Drafts
	mtp    bool // it needs the model's MTP head
}

// loneWays are drafts off (greedy chains on the device where the model runs them), n-gram copies
// only, MTP chains of depth 1, 2 and 3, and the default config's drafts (MTP chains up to
// drafts.mtp_max and n-gram copies, configs/tfd.toml).
func loneWays() []loneWay {
	d := config.Default().Drafts
	def := scheduler.Drafts{MTP: d.MTPMax}
	if d.NGram {
		def.NGram = d.NGramMax
	}
	return []loneWay{
		{"off", scheduler.Drafts{}, false},
		{"ngram", scheduler.Drafts{NGram: d.NGramMax}, false},
		{"mtp1", scheduler.Drafts{MTP: 1}, true},
		{"mtp2", scheduler.Drafts{MTP: 2}, true},
		{"mtp3", scheduler.Drafts{MTP: 3}, true},
		{"default", def, true},
	}
}

// loneTally is what the runs of one prompt, layout and way add up to.
type loneTally struct {
	took                              time.Duration // from each reply's first token to its last
	tokens, forwards, drafted, landed int           // tokens after the first, and what made them
}

// BenchLone is the lone stream's benchmark (issue 13): one greedy reply of 512 tokens alone on a
// host, on three kinds of prompt (code to continue, prose to continue, and an edit: a passage to
// repeat with a change), under two layouts: one session (`sessions.parallel = 1`) and the layout
// the memory plan's auto gives on this machine with the default config, and in each way of
// drafting (loneWays; those of the MTP head only where the model has one). Every run has a host
// of its own, made as the daemon makes one (MaxRows 256, calibrated at start; but without a
// prompt cache, which a fresh prompt of a lone stream would not hit) and closed after
// it, so the runs share no state but the model; in each iteration every prompt, way and layout
// runs once, interleaved, so a busy machine slows them alike. The model folder dir (relative to
// the repository root, or absolute) is loaded once, with the auto plan's context and slots.
//
// It prints a table per prompt, layout and way: tok/s from the reply's first token to its last (the
// prompt's prefill left out), acc% (the drafts that landed), len (the mean drafts landed per
// decoding forward, so 1 + len tokens a forward) and fwd (decoding forwards, a chain's steps
// included). Its metrics are two ratios of tok/s, each a geometric mean: auto/parallel1 over
// every prompt and way, and default/off on code over the layouts.
//
// TFD_BENCH_PROMPTS and TFD_BENCH_WAYS, when set, name the prompts and ways to run (comma
// separated: code,prose,edit; off,ngram,mtp1,mtp2,mtp3,default), so that a large model's run fits
// in a call; the first named prompt and way then stand for code and off in the ratio.
func BenchLone(b *testing.B, cb compute.Backend, dir string) {
	src := engine.Source{Dir: absDir(b, dir)}
	auto, err := autoPlan(src, cb)
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	m, err := engine.Load(context.Background(), src, cb, engine.Options{Context: auto.Context, MaxRows: auto.MaxRows, Slots: auto.Slots()})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	b.Logf("%s on %s, loaded in %v; auto: %s sessions (%s)", dir, cb.Name(), time.Since(start).Round(time.Millisecond),
		auto.Layout, strings.Join(auto.Notes, "; "))
	layouts := []struct {
		name   string
		layout batch.Layout
	}{{"parallel1", batch.Layout{auto.Context}}, {"auto", auto.Layout}}
	var ways []loneWay
	for _, w := range loneWays() {
		if (!w.mtp || m.MTP() != nil) && named("TFD_BENCH_WAYS", w.name) {
			ways = append(ways, w)
		}
	}
	var prompts []lonePrompt
	for _, p := range lonePrompts(m) {
		if named("TFD_BENCH_PROMPTS", p.name) {
			prompts = append(prompts, p)
		}
	}
	if len(ways) == 0 || len(prompts) == 0 {
		b.Fatal("TFD_BENCH_WAYS or TFD_BENCH_PROMPTS names none of the ways or prompts")
	}
	c := &counted{Model: m, chainer: m.Chains()}
	tallies := make([]loneTally, len(prompts)*len(layouts)*len(ways))
	tally := func(p, l, w int) *loneTally { return &tallies[(p*len(layouts)+l)*len(ways)+w] }
	run := func(prompt []int32, layout batch.Layout, drafts scheduler.Drafts, tokens int, t *loneTally) loneTally {
		opts := Equip(m, scheduler.SharedOptions{Layout: layout, Calibrate: true})
		opts.Chainer = c.chainerOrNil()
		opts.DraftChainer = c.draftChainerOrNil(opts.DraftChainer)
		h, err := scheduler.NewShared(c, opts)
		if err != nil {
			b.Fatal(err)
		}
		defer h.Close(context.Background())
		c.forwards = 0
		events, err := h.Submit(context.Background(), scheduler.Request{Prompt: prompt, MaxTokens: tokens, Drafts: drafts})
		if err != nil {
			b.Fatal(err)
		}
		var first time.Time
		var this loneTally
		n := 0
		for ev := range events {
			switch {
			case ev.Done && ev.Reason != scheduler.FinishLength:
				b.Fatalf("a reply ended %s after %d tokens: %v", ev.Reason, n, ev.Err)
			case ev.Done:
				this = loneTally{time.Since(first), n - 1, c.forwards, ev.Drafted, ev.Accepted}
			case n == 0:
				first = time.Now()
				n++
			default:
				n++
			}
		}
		t.took, t.tokens, t.forwards = t.took+this.took, t.tokens+this.tokens, t.forwards+this.forwards
		t.drafted, t.landed = t.drafted+this.drafted, t.landed+this.landed
		return this
	}
	// A short run of every way on each layout first, from a short prompt: what only a first call
	// pays (kernel loads, graph captures) stays out of the figures.
	var warm loneTally
	for _, l := range layouts {
		for _, w := range ways {
			run(prompts[0].tokens[:min(32, len(prompts[0].tokens))], l.layout, w.drafts, 16, &warm)
		}
	}
	b.ResetTimer()
	for range b.N {
		for p, prompt := range prompts {
			for w, way := range ways {
				for l, layout := range layouts {
					r := run(prompt.tokens, layout.layout, way.drafts, 512, tally(p, l, w))
					// Each run as it ends, so that a run cut short keeps what it measured.
					fmt.Printf("%s %s %s %s: %.0f tok/s, %d of %d drafts landed, %d forwards\n",
						b.Name(), prompt.name, layout.name, way.name, r.rate(), r.landed, r.drafted, r.forwards)
				}
			}
		}
	}
	b.StopTimer()
	var table strings.Builder
	tw := tabwriter.NewWriter(&table, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "prompt\tlayout\tway\ttok/s\tacc%\tlen\tfwd\t")
	for p, prompt := range prompts {
		for l, layout := range layouts {
			for w, way := range ways {
				t := tally(p, l, w)
				acc, length := "-", "-"
				if t.drafted > 0 {
					acc = fmt.Sprintf("%.0f", 100*float64(t.landed)/float64(t.drafted))
					length = fmt.Sprintf("%.2f", float64(t.landed)/float64(max(t.forwards, 1)))
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%.0f\t%s\t%s\t%d\t\n", prompt.name, layout.name, way.name, t.rate(), acc, length, t.forwards/b.N)
			}
		}
	}
	tw.Flush()
	// The table goes to standard output: a benchmark's log is cut at ten lines.
	var lengths []string
	for _, p := range prompts {
		lengths = append(lengths, fmt.Sprintf("%d (%s)", len(p.tokens), p.name))
	}
	fmt.Printf("%s: %s on %s; prompts of %s tokens; replies of 512 tokens, %d of each\n%s",
		b.Name(), dir, cb.Name(), strings.Join(lengths, ", "), b.N, table.String())
	var autoRatio, codeRatio float64
	for p := range prompts {
		for w := range ways {
			autoRatio += math.Log(tally(p, 1, w).rate() / tally(p, 0, w).rate())
		}
	}
	for l := range layouts {
		codeRatio += math.Log(tally(0, l, len(ways)-1).rate() / tally(0, l, 0).rate())
	}
	b.ReportMetric(math.Exp(autoRatio/float64(len(prompts)*len(ways))), "auto/parallel1")
	b.ReportMetric(math.Exp(codeRatio/float64(len(layouts))), "code-"+ways[len(ways)-1].name+"/off")
	b.ReportMetric(0, "ns/op") // an iteration is every run together: its time says nothing
}

// autoPlan is the memory plan the daemon makes for src on cb with the default config (sessions
// auto), as daemon.PlanConfig makes it: that package is not imported, since it embeds the bundled
// model, which would put 34 MB into every test binary that runs this.
func autoPlan(src engine.Source, cb compute.Backend) (engine.Plan, error) {
	mcfg, info, err := engine.Inspect(src, engine.NoQuantization)
	if err != nil {
		return engine.Plan{}, err
	}
	var workingSet uint64
	if s, ok := cb.(compute.SharedMemory); ok {
		workingSet = s.WorkingSet()
	}
	cfg := config.Default()
	return engine.MakePlan(engine.PlanInput{Model: mcfg, WeightBytes: info.Bytes, DeviceMemory: cb.Memory(), WorkingSet: workingSet,
		LoadLimitGB: cfg.Memory.LoadLimitGB, MarginGB: cfg.Memory.MarginGB, Context: cfg.Model.Context, Grow: cfg.Sessions.Grow,
		PromptCacheGiB: cfg.PromptCache.GiB})
}

// named reports whether the environment variable env, a comma-separated list, names name, or is
// unset or empty.
func named(env, name string) bool {
	list := os.Getenv(env)
	return list == "" || slices.Contains(strings.Split(list, ","), name)
}

// rate returns the tally's tokens per second.
func (t loneTally) rate() float64 { return float64(t.tokens) / t.took.Seconds() }

// chainerOrNil returns c as the host's Chainer where the model runs chains, else nil, so that a
// host without chains is not handed a counted wrapper around nothing.
func (c *counted) chainerOrNil() batch.Chainer {
	if c.chainer == nil {
		return nil
	}
	return c
}
