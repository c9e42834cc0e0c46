package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"text/tabwriter"
	"time"

	"tfd/daemon"
	"tfd/daemon/config"
	"tfd/engine"
	"tfd/promptcache"
	"tfd/scheduler"
)

// The prompt cache's case: the time to the first token of a conversation's fourth turn, the cache
// off, the conversation in the cache's memory, and in its spill folder after a restart.

// replyTokens is the length of each earlier turn's reply.
const replyTokens = 32

// cacheRuns is how many times each case is timed; the table gives the median.
const cacheRuns = 3

// RunCache loads cfg's model with one session as long as a conversation of about tokens tokens
// and a prompt cache that holds it, plays the conversation's first three turns, and times the
// first token of the fourth: on a host without a cache (so the whole prompt is prefilled), after
// another request took the session (so the cache's memory serves it), and after a restart (a new
// host and an empty memory; the spill folder, written as the first host stopped, serves it).
func RunCache(ctx context.Context, cfg config.Config, tokens int, logger *slog.Logger, out io.Writer) error {
	if tokens < 4*promptcache.BlockTokens {
		return fmt.Errorf("bench: a conversation of %d tokens: want at least %d, four blocks of the prompt cache", tokens, 4*promptcache.BlockTokens)
	}
	session := tokens + 4*replyTokens + 256
	cfg.Sessions.Layout, cfg.Sessions.Grow = fmt.Sprint(session), replyTokens
	backend, err := daemon.OpenBackend(cfg.Model.Backend, logger)
	if err != nil {
		return err
	}
	defer backend.Close()
	plan, err := daemon.PlanConfig(cfg, backend)
	if err != nil {
		return fmt.Errorf("bench: one session of %d tokens: %w", session, err)
	}
	logger.Info("bench: loading the model", "backend", backend.Name(), "session", session)
	m, err := engine.Load(ctx, daemon.ModelSource(cfg.Model), backend, engine.Options{Context: plan.Context, MaxRows: daemon.MaxRows, Slots: plan.Slots()})
	if err != nil {
		return fmt.Errorf("bench: load the model: %w", err)
	}
	defer m.Close()
	spill, err := os.MkdirTemp("", "tfd-bench-spill-")
	if err != nil {
		return fmt.Errorf("bench: a spill folder: %w", err)
	}
	defer os.RemoveAll(spill)
	c := &cacheBench{ctx: ctx, m: m, layout: plan.Layout, blocks: session/promptcache.BlockTokens + 1, spill: spill, logger: logger}
	turns := conversation(m, tokens)
	var results []cacheResult
	for _, run := range []struct {
		name string
		f    func([][]int32) (cacheResult, error)
	}{{"cache off", c.off}, {"memory hit", c.memory}, {"disk hit after a restart", c.disk}} {
		logger.Info("bench: prompt cache", "case", run.name, "runs", cacheRuns)
		var times []time.Duration
		var r cacheResult
		for range cacheRuns {
			if r, err = run.f(turns); err != nil {
				return fmt.Errorf("bench: %s: %w", run.name, err)
			}
			times = append(times, r.ttft)
		}
		slices.Sort(times)
		r.name, r.ttft, r.prompt = run.name, times[len(times)/2], len(c.fourth)
		results = append(results, r)
	}
	return writeCacheBench(out, m.Name(), backend.Name(), tokens, results)
}

// cacheResult is one case's figures.
type cacheResult struct {
	name   string
	ttft   time.Duration // the median time to the fourth turn's first token
	cached int           // prompt tokens the fourth turn did not compute
	prompt int
}

type cacheBench struct {
	ctx    context.Context
	m      *engine.Model
	layout []int
	blocks int
	spill  string
	logger *slog.Logger
	// fourth is the fourth turn's prompt once the first three turns ran (their replies are the
	// model's, the same bits on every host).
	fourth []int32
}

// conversation cuts about tokens tokens of Go source into the user parts of four turns.
func conversation(m *engine.Model, tokens int) [][]int32 {
	text := benchPrompt(m, tokens)
	last := tokens / 16
	part := (tokens - last) / 3
	return [][]int32{text[:part], text[part : 2*part], text[2*part : 3*part], text[3*part:]}
}

// host starts a host on the bench's model, with a prompt cache when cached, spilling to the
// bench's folder.
func (c *cacheBench) host(cached bool) (*scheduler.Shared, func(), error) {
	opts := scheduler.SharedOptions{Layout: c.layout, Drafter: c.m.MTP(), Chainer: c.m.Chains()}
	if !cached {
		h, err := scheduler.NewShared(c.m, opts)
		return h, func() { h.Close(context.Background()) }, err
	}
	store, err := c.m.NewBlockStore(c.blocks, promptcache.BlockTokens)
	if err != nil {
		return nil, nil, err
	}
	disk, err := promptcache.OpenDisk(promptcache.DiskOptions{Dir: c.spill, Limit: 64 << 30, Identity: c.m.Identity(), Logger: c.logger})
	if err != nil {
		store.Close()
		return nil, nil, err
	}
	opts.Cache = promptcache.New(store, promptcache.Options{Identity: c.m.Identity(), Spill: disk})
	opts.CacheBlocks, opts.CacheSpill = c.blocks, disk
	h, err := scheduler.NewShared(c.m, opts)
	if err != nil {
		disk.Close()
		store.Close()
		return nil, nil, err
	}
	return h, func() {
		h.Close(context.Background()) // the lane hands the blocks to the spill folder
		disk.Close()
		store.Close()
	}, nil
}

// reply runs one greedy request and returns its tokens, the time to its first and its end event.
func (c *cacheBench) reply(h *scheduler.Shared, prompt []int32, n int) ([]int32, time.Duration, scheduler.Event, error) {
	start := time.Now()
	events, err := h.Submit(c.ctx, scheduler.Request{Prompt: prompt, MaxTokens: n})
	if err != nil {
		return nil, 0, scheduler.Event{}, err
	}
	var out []int32
	var first time.Duration
	var end scheduler.Event
	for ev := range events {
		if ev.Done {
			end = ev
			continue
		}
		if out = append(out, ev.Token); len(out) == 1 {
			first = time.Since(start)
		}
	}
	if end.Reason != scheduler.FinishLength {
		return nil, 0, end, fmt.Errorf("a reply ended %s: %v", end.Reason, end.Err)
	}
	return out, first, end, nil
}

// play runs the first three turns on h and returns the fourth turn's prompt.
func (c *cacheBench) play(h *scheduler.Shared, turns [][]int32) ([]int32, error) {
	var prompt []int32
	for _, user := range turns[:3] {
		prompt = append(prompt, user...)
		reply, _, _, err := c.reply(h, prompt, replyTokens)
		if err != nil {
			return nil, err
		}
		prompt = append(prompt, reply...)
	}
	return append(prompt, turns[3]...), nil
}

// off times the fourth turn on a fresh host without a cache: its session holds nothing.
func (c *cacheBench) off(turns [][]int32) (cacheResult, error) {
	if c.fourth == nil {
		h, stop, err := c.host(false)
		if err != nil {
			return cacheResult{}, err
		}
		c.fourth, err = c.play(h, turns)
		stop()
		if err != nil {
			return cacheResult{}, err
		}
	}
	h, stop, err := c.host(false)
	if err != nil {
		return cacheResult{}, err
	}
	defer stop()
	_, first, end, err := c.reply(h, c.fourth, 1)
	return cacheResult{ttft: first, cached: end.Cached}, err
}

// memory plays the conversation on a host with a cache, has another request take the session,
// and times the fourth turn, which the cache's memory serves.
func (c *cacheBench) memory(turns [][]int32) (cacheResult, error) {
	h, stop, err := c.host(true)
	if err != nil {
		return cacheResult{}, err
	}
	defer stop()
	if _, err := c.play(h, turns); err != nil {
		return cacheResult{}, err
	}
	if _, _, _, err := c.reply(h, turns[3], 1); err != nil { // takes the one session
		return cacheResult{}, err
	}
	_, first, end, err := c.reply(h, c.fourth, 1)
	return cacheResult{ttft: first, cached: end.Cached}, err
}

// disk plays the conversation on a host with a cache, stops it (its blocks go to the spill
// folder), starts another, and times the fourth turn there, which the spill folder serves.
func (c *cacheBench) disk(turns [][]int32) (cacheResult, error) {
	h, stop, err := c.host(true)
	if err != nil {
		return cacheResult{}, err
	}
	_, err = c.play(h, turns)
	stop()
	if err != nil {
		return cacheResult{}, err
	}
	h, stop, err = c.host(true)
	if err != nil {
		return cacheResult{}, err
	}
	defer stop()
	_, first, end, err := c.reply(h, c.fourth, 1)
	return cacheResult{ttft: first, cached: end.Cached}, err
}

func writeCacheBench(out io.Writer, model, backend string, tokens int, results []cacheResult) error {
	fmt.Fprintf(out, "%s on %s: the first token of a conversation's fourth turn (about %d tokens), median of %d\n", model, backend, tokens, cacheRuns)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "case\tfirst token\tprompt tokens\treused\t")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%.1f ms\t%d\t%d\t\n", r.name, float64(r.ttft.Microseconds())/1000, r.prompt, r.cached)
	}
	return tw.Flush()
}
