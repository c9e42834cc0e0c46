// Package turns times the prompt cache where a user meets it: the first token of a
// conversation's fourth turn, with the cache off (the whole prompt prefilled), from the cache's
// memory (after another request took the session), and from its spill folder after a restart (a
// new host with an empty memory). `tfd bench --conversation` runs it on the configured model; the
// CUDA benchmarks run it on the 8B-shaped checkpoint.
package turns

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"text/tabwriter"
	"time"

	"tfd/engine"
	"tfd/promptcache"
	"tfd/scheduler"
)

// Run plays a conversation of about tokens tokens of prompt on m, in a layout of one session
// (Session(tokens) long), and times its fourth turn's first token in each case, runs times; it
// writes a progress line per case to logger.
func Run(ctx context.Context, m *engine.Model, layout []int, tokens, runs int, logger *slog.Logger) ([]Result, error) {
	if tokens < 4*promptcache.BlockTokens {
		return nil, fmt.Errorf("bench: a conversation of %d tokens: want at least %d, four blocks of the prompt cache", tokens, 4*promptcache.BlockTokens)
	}
	spill, err := os.MkdirTemp("", "tfd-bench-spill-")
	if err != nil {
		return nil, fmt.Errorf("bench: a spill folder: %w", err)
	}
	defer os.RemoveAll(spill)
	c := &run{ctx: ctx, m: m, layout: layout, blocks: Session(tokens)/promptcache.BlockTokens + 1, spill: spill, logger: logger}
	turns := conversation(m, tokens)
	var results []Result
	for _, kind := range []struct {
		name string
		f    func([][]int32) (Result, error)
	}{{"cache off", c.off}, {"memory hit", c.memory}, {"disk hit after a restart", c.disk}} {
		logger.Info("bench: prompt cache", "case", kind.name, "runs", runs)
		var times []time.Duration
		var r Result
		for range runs {
			if r, err = kind.f(turns); err != nil {
				return nil, fmt.Errorf("bench: %s: %w", kind.name, err)
			}
			times = append(times, r.TTFT)
		}
		slices.Sort(times)
		r.Name, r.TTFT, r.Prompt = kind.name, times[len(times)/2], len(c.fourth)
		results = append(results, r)
	}
	return results, nil
}

// Session is the session a conversation of tokens tokens needs: its four turns' prompts, the
// three replies and room for the fourth.
func Session(tokens int) int { return tokens + 4*replyTokens + 256 }

// replyTokens is the length of each earlier turn's reply.
const replyTokens = 32

// Result is one case's figures.
type Result struct {
	Name   string
	TTFT   time.Duration // the median time to the fourth turn's first token
	Cached int           // prompt tokens the fourth turn did not compute
	Prompt int           // the fourth turn's prompt tokens
}

type run struct {
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
	text := GoSource(m, tokens)
	last := tokens / 16
	part := (tokens - last) / 3
	return [][]int32{text[:part], text[part : 2*part], text[2*part : 3*part], text[3*part:]}
}

// host starts a host on the bench's model, with a prompt cache when cached, spilling to the
// bench's folder.
func (c *run) host(cached bool) (*scheduler.Shared, func(), error) {
	opts := scheduler.SharedOptions{Layout: c.layout, Drafter: c.m.MTP(), Chainer: c.m.Chains(), DraftChainer: c.m.DraftChains(), States: c.m.States()}
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
func (c *run) reply(h *scheduler.Shared, prompt []int32, n int) ([]int32, time.Duration, scheduler.Event, error) {
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
func (c *run) play(h *scheduler.Shared, turns [][]int32) ([]int32, error) {
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
func (c *run) off(turns [][]int32) (Result, error) {
	if c.fourth == nil {
		h, stop, err := c.host(false)
		if err != nil {
			return Result{}, err
		}
		c.fourth, err = c.play(h, turns)
		stop()
		if err != nil {
			return Result{}, err
		}
	}
	h, stop, err := c.host(false)
	if err != nil {
		return Result{}, err
	}
	defer stop()
	_, first, end, err := c.reply(h, c.fourth, 1)
	return Result{TTFT: first, Cached: end.Cached}, err
}

// memory plays the conversation on a host with a cache, has another request take the session,
// and times the fourth turn, which the cache's memory serves.
func (c *run) memory(turns [][]int32) (Result, error) {
	h, stop, err := c.host(true)
	if err != nil {
		return Result{}, err
	}
	defer stop()
	if _, err := c.play(h, turns); err != nil {
		return Result{}, err
	}
	if _, _, _, err := c.reply(h, turns[3], 1); err != nil { // takes the one session
		return Result{}, err
	}
	_, first, end, err := c.reply(h, c.fourth, 1)
	return Result{TTFT: first, Cached: end.Cached}, err
}

// disk plays the conversation on a host with a cache, stops it (its blocks go to the spill
// folder), starts another, and times the fourth turn there, which the spill folder serves.
func (c *run) disk(turns [][]int32) (Result, error) {
	h, stop, err := c.host(true)
	if err != nil {
		return Result{}, err
	}
	_, err = c.play(h, turns)
	stop()
	if err != nil {
		return Result{}, err
	}
	h, stop, err = c.host(true)
	if err != nil {
		return Result{}, err
	}
	defer stop()
	_, first, end, err := c.reply(h, c.fourth, 1)
	return Result{TTFT: first, Cached: end.Cached}, err
}

// Write prints results as a table.
func Write(out io.Writer, model, backend string, tokens, runs int, results []Result) error {
	fmt.Fprintf(out, "%s on %s: the first token of a conversation's fourth turn (about %d tokens), median of %d\n", model, backend, tokens, runs)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "case\tfirst token\tprompt tokens\treused\t")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%.1f ms\t%d\t%d\t\n", r.Name, float64(r.TTFT.Microseconds())/1000, r.Prompt, r.Cached)
	}
	return tw.Flush()
}

// goSource is what the benches' prompts are cut from: ordinary Go, so that drafts meet the kind
// of text they meet in use.
const goSource = `// Package ring implements a fixed-size ring buffer of bytes.
package ring

import "errors"

// ErrFull is returned by Write when the buffer has no room left.
var ErrFull = errors.New("ring: buffer full")

// Buffer is a ring buffer. The zero value is an empty buffer of no capacity.
type Buffer struct {
	data       []byte
	start, len int
}

// New returns a buffer that holds up to size bytes.
func New(size int) *Buffer {
	return &Buffer{data: make([]byte, size)}
}

// Len returns the number of bytes in the buffer.
func (b *Buffer) Len() int { return b.len }

// Write appends p to the buffer, or returns ErrFull if it does not fit.
func (b *Buffer) Write(p []byte) (int, error) {
	if len(p) > len(b.data)-b.len {
		return 0, ErrFull
	}
	for i, c := range p {
		b.data[(b.start+b.len+i)%len(b.data)] = c
	}
	b.len += len(p)
	return len(p), nil
}
`

// GoSource returns n tokens of Go source, repeating the text as needed.
func GoSource(m *engine.Model, n int) []int32 {
	text := m.Tokenizer().Encode(goSource)
	out := make([]int32, 0, n)
	for len(out) < n {
		out = append(out, text[:min(len(text), n-len(out))]...)
	}
	return out
}
