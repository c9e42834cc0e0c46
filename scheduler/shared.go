package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"tfd/batch"
	"tfd/promptcache"
)

// DefaultPrefillChunk is the most prompt rows a round takes while other streams decode unless
// SharedOptions.PrefillChunk says otherwise: a quarter of the 256 rows a forward took when it was
// chosen, kept where a backend runs larger forwards for prompts alone (daemon.LargeForwardRows),
// so that a decoding reply's wait for a round stays what it was.
const DefaultPrefillChunk = 64

// SharedOptions configures a shared host.
type SharedOptions struct {
	// Layout lists the session capacities in tokens, in any order; their sum must not exceed the
	// model's KV slots.
	Layout batch.Layout
	// Grow is how many tokens beyond its prompt a new stream's session should hold; 0 means 2048.
	Grow int
	// Queue bounds the streams waiting for a session; 0 means 64.
	Queue int
	// PrefillChunk caps the prompt rows a round takes while other streams decode, so replies keep
	// moving while a long prompt fills; 0 means a quarter of the model's MaxRows, at most
	// DefaultPrefillChunk.
	PrefillChunk int
	// KeepWarm is how long after its last forward an idle host keeps ticking a model that offers
	// Warmer (a GPU); 0 turns the tick off.
	KeepWarm time.Duration
	// WarmTick is how often the idle host ticks; 0 means 500 ms. GPU drivers lower clocks (and
	// macOS reclaims GPU memory) after about a second idle; half of that keeps ahead of them.
	WarmTick time.Duration
	// CacheBlocks is how many blocks the prompt cache holds (prompt_cache.gib); a change resizes
	// it, evicting the least recently used first. Ignored without a Cache.
	CacheBlocks int
	// CacheSpill is the prompt cache's spill folder, or nil for none. A Reconfigure that hands the
	// host another one has the host close the one it replaces (when it is an io.Closer); the last
	// one is its giver's to close after Close.
	CacheSpill promptcache.Spill

	// The model's optional abilities, each nil where the model has none. They are the model's,
	// not the routing's: NewShared takes them and Reconfigure leaves them as they were.
	Drafter batch.Drafter // its MTP head: streams that ask for MTP drafts get them
	Chainer batch.Chainer // greedy chains on the device, for the lone driver
	// DraftChainer runs drafted chains on the device, for the lone driver's greedy streams that
	// draft with the MTP head alone; it needs the Drafter's model.
	DraftChainer batch.DraftChainer
	Warmer       batch.Warmer // the keep-warm tick, while KeepWarm allows
	// States says from where the model's sessions can be fed again (a hybrid model's DeltaNet
	// states, a model whose sliding layers keep rings bounded by the window): a kept prompt is
	// reused only from there, and a stream's drafts stay shallower than what a session keeps.
	States batch.Stateful
	// Cache is the model's prompt cache, or nil; its memory comes with the model, like the other
	// abilities, while its size and spill folder are routing (CacheBlocks, CacheSpill).
	Cache *promptcache.Cache
	// Report hears each error the host can work around and so does not end a stream with: a
	// failed draft (the stream decodes without one) or a failed tick. where names the kind
	// ("draft", "warm"). Nil drops them.
	Report func(where string, err error)
	// Logger, if set, gets a debug line for each handoff of a stream from the lone driver to
	// shared rounds, and the line of timings Calibrate measured.
	Logger *slog.Logger
	// Clock, a test hook, stands in for time.Now in the timings that price rounds (Calibrate's
	// included) and in when the lane last worked; nil: time.Now. Tests that count drafts set
	// it (schedulertest.StillClock) so that what pricing grants does not follow the machine's load.
	Clock func() time.Time

	// Calibrate has NewShared time forwards of 1, 2, 4 … MaxRows rows (and a step of the Drafter)
	// on free sessions before it returns, so that drafts are priced by this machine's timings from
	// the first round (see Priced). It costs a few forwards; tests of other things leave it off.
	Calibrate bool
}

// Stats is a snapshot of a host's load.
type Stats struct {
	Waiting       int          // streams submitted and not yet holding a session
	Active        int          // streams holding a session
	SessionsInUse int          // equals Active
	Sessions      int          // sessions in the layout in force
	Layout        batch.Layout // the layout in force, largest first
	// Retiring lists, largest first, the sessions of an earlier layout that running replies still
	// hold after a Reconfigure; empty once the change is complete.
	Retiring batch.Layout
	// LoneTokens and SharedTokens count the tokens generated since the host started by the lone
	// driver and by shared rounds; Handoffs, the streams the lone driver handed to shared rounds
	// because another stream needed the host.
	LoneTokens, SharedTokens, Handoffs uint64
	// Drafts counts the draft tokens fed to rounds and those that landed, by source and depth
	// since the host started.
	Drafts []DraftCount
}

// Shared is the shared host: streams hold sessions of a layout and run together in rounds, one
// batched forward each (continuous batching). A stream alone runs on the lone driver. Because the
// forward is batch-invariant and sampling is keyed by position, a reply is the same bits whether
// it ran alone or beside others. With a one-session layout it is the serial host.
type Shared struct {
	model   Model
	hostCtx context.Context    // ends when Close gives up waiting
	stopAll context.CancelFunc // cancels hostCtx
	done    chan struct{}      // closed when the lane goroutine has ended

	mu       sync.Mutex // guards closed, sends on arrivals, and the two fields below
	closed   bool
	arrivals chan *stream // Submit → lane; closed by Close
	reconfig *SharedOptions

	// wake tells a waiting lane that something may have changed: a reader took an event, a
	// request ended, the routing changed. It holds one signal; more are dropped.
	wake chan struct{}
	// fetched brings the lane the blocks read back from the prompt cache's spill folder.
	fetched chan fetchResult

	waiting  atomic.Int64     // streams submitted and not yet admitted
	byDriver [2]atomic.Uint64 // tokens generated: [0] by the lone driver, [1] by shared rounds
	handoffs atomic.Uint64
	drafts   draftCounts
	hold     atomic.Int64 // a moving average of how long a stream holds its session, a time.Duration
	queueMax atomic.Int64
	largest  atomic.Int64 // the largest session of the current layout
	keepWarm atomic.Int64 // a time.Duration
	warmTick atomic.Int64 // a time.Duration

	statsMu sync.Mutex // guards stats
	stats   Stats

	priced Priced // what Calibrate measured; set before the lane starts, then only read

	lane laneState // owned by the lane goroutine
}

// NewShared starts a shared host on m. Close stops it.
func NewShared(m Model, opts SharedOptions) (*Shared, error) {
	if err := checkLayout(opts.Layout, m); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &Shared{
		model:    m,
		hostCtx:  ctx,
		stopAll:  cancel,
		done:     make(chan struct{}),
		arrivals: make(chan *stream, 1024),
		wake:     make(chan struct{}, 1),
		fetched:  make(chan fetchResult),
	}
	context.AfterFunc(ctx, h.nudge) // a Close that gives up cancels every stream: reap them
	h.lane.init(h, opts)
	h.apply(opts)
	if opts.Calibrate {
		var err error
		if h.priced, err = h.lane.calibrate(); err != nil {
			cancel()
			return nil, err
		}
		if opts.Logger != nil {
			args := []any{"rows", h.priced.String()}
			if opts.Drafter != nil {
				args = append(args, "mtp", h.priced.MTP.Round(time.Microsecond))
			}
			opts.Logger.Info("priced rounds", args...)
		}
	}
	go h.run()
	return h, nil
}

// Priced returns what SharedOptions.Calibrate measured at start; empty when it was off.
func (h *Shared) Priced() Priced { return h.priced }

// NewSerial starts the serial host on m: opts with a layout of one session spanning the model's
// context, so one reply runs at a time and later requests wait in arrival order.
func NewSerial(m Model, opts SharedOptions) *Shared {
	opts.Layout = batch.Layout{min(m.Context(), m.Slots())}
	h, err := NewShared(m, opts)
	if err != nil {
		panic("scheduler: a one-session layout of the model's own size must fit: " + err.Error())
	}
	return h
}

func checkLayout(layout batch.Layout, m Model) error {
	if len(layout) == 0 {
		return errors.New("scheduler: the session layout is empty")
	}
	total := 0
	for _, n := range layout {
		if n <= 0 {
			return fmt.Errorf("scheduler: session capacity %d must be positive", n)
		}
		total += n
	}
	if total > m.Slots() {
		return fmt.Errorf("scheduler: the session layout %s needs %d KV slots and the model has %d: use fewer or smaller sessions", layout, total, m.Slots())
	}
	return nil
}

// nudge wakes the lane if it waits; it never blocks.
func (h *Shared) nudge() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// apply makes opts the routing for new admissions; only the lane calls it, apart from NewShared.
func (h *Shared) apply(opts SharedOptions) {
	if opts.Grow <= 0 {
		opts.Grow = 2048
	}
	if opts.Queue <= 0 {
		opts.Queue = 64
	}
	if opts.PrefillChunk <= 0 {
		opts.PrefillChunk = min(DefaultPrefillChunk, max(1, h.model.MaxRows()/4))
	}
	h.lane.pool.relayout(opts.Layout)
	h.lane.applyCache(opts)
	h.lane.grow, h.lane.prefillChunk = opts.Grow, opts.PrefillChunk
	h.queueMax.Store(int64(opts.Queue))
	h.largest.Store(int64(h.lane.pool.largest()))
	h.SetKeepWarm(opts.KeepWarm, opts.WarmTick)
	h.publishLayout()
}

// publishLayout copies the lane's layouts, in force and retiring, into Stats.
func (h *Shared) publishLayout() {
	p := &h.lane.pool
	layout := make(batch.Layout, len(p.sessions))
	for i, s := range p.sessions {
		layout[len(layout)-1-i] = s.capacity // the pool keeps them smallest first
	}
	h.statsMu.Lock()
	h.stats.Sessions, h.stats.Layout, h.stats.Retiring = len(layout), layout, p.retiringLayout()
	h.statsMu.Unlock()
}

// SetKeepWarm changes the keep-warm window and the tick's period (0: 500 ms) at once; it is safe
// for concurrent use.
func (h *Shared) SetKeepWarm(window, tick time.Duration) {
	if tick <= 0 {
		tick = 500 * time.Millisecond
	}
	h.keepWarm.Store(int64(window))
	h.warmTick.Store(int64(tick))
}

// Reconfigure swaps the routing: new admissions use the new layout at once, in whatever part of
// it no running reply holds, while streams already admitted finish in their sessions of the old
// one (Stats lists those as Retiring until they end).
func (h *Shared) Reconfigure(opts SharedOptions) error {
	if err := checkLayout(opts.Layout, h.model); err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return ErrClosed
	}
	h.reconfig = &opts
	h.nudge()
	return nil
}

// countActive adds delta to the streams holding sessions; the lane calls it as a stream takes a
// session and as it gives it up.
func (h *Shared) countActive(delta int) {
	h.statsMu.Lock()
	h.stats.Active += delta
	h.stats.SessionsInUse += delta
	h.statsMu.Unlock()
}

// Stats returns a snapshot of the host's load; it is safe for concurrent use.
func (h *Shared) Stats() Stats {
	h.statsMu.Lock()
	defer h.statsMu.Unlock()
	s := h.stats
	s.Waiting = int(h.waiting.Load())
	s.Layout, s.Retiring = slices.Clone(s.Layout), slices.Clone(s.Retiring)
	s.LoneTokens, s.SharedTokens, s.Handoffs = h.byDriver[0].Load(), h.byDriver[1].Load(), h.handoffs.Load()
	s.Drafts = h.drafts.snapshot()
	return s
}

// noteHold folds how long a stream held its session into the moving average that Retry-After
// estimates come from; the lane calls it as a stream ends.
func (h *Shared) noteHold(d time.Duration) {
	old := time.Duration(h.hold.Load())
	if old == 0 {
		h.hold.Store(int64(d))
		return
	}
	h.hold.Store(int64(old + (d-old)/8))
}

// queueWait estimates how long the queue ahead of a new request takes to drain: each of the
// layout's sessions frees once per average hold, and each frees a place for one waiting stream.
// Before any stream has ended, a hold is taken to be a second.
func (h *Shared) queueWait() time.Duration {
	hold := max(time.Duration(h.hold.Load()), time.Second)
	h.statsMu.Lock()
	sessions := max(h.stats.Sessions, 1)
	h.statsMu.Unlock()
	return time.Duration(h.waiting.Load()) * hold / time.Duration(sessions)
}

// Submit implements Host.
func (h *Shared) Submit(ctx context.Context, req Request) (<-chan Event, error) {
	if err := checkRequest(req, h.model, int(h.largest.Load())); err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, ErrClosed
	}
	if h.waiting.Load() >= h.queueMax.Load() || len(h.arrivals) == cap(h.arrivals) {
		return nil, &QueueFullError{RetryAfter: h.queueWait()}
	}
	st := newStream(ctx, req, h.nudge)
	h.arrivals <- st // there is room: only Submit sends, under h.mu
	h.waiting.Add(1)
	return st.out, nil
}

// Close implements Host.
func (h *Shared) Close(ctx context.Context) error {
	h.mu.Lock()
	if !h.closed {
		h.closed = true
		close(h.arrivals)
	}
	h.mu.Unlock()
	select {
	case <-h.done:
		return nil
	case <-ctx.Done():
	}
	h.stopAll()
	<-h.done
	return ctx.Err()
}

// checkRequest refuses what no session could run.
func checkRequest(req Request, m Model, largest int) error {
	limit := min(m.Context(), largest)
	switch {
	case len(req.Prompt) == 0:
		return errors.New("scheduler: empty prompt")
	case req.MaxTokens <= 0:
		return fmt.Errorf("scheduler: max tokens must be positive, got %d", req.MaxTokens)
	case len(req.Prompt) >= limit:
		return &PromptTooLongError{Prompt: len(req.Prompt), Context: limit}
	}
	for _, t := range req.Prompt {
		if t < 0 || int(t) >= m.Vocab() {
			return fmt.Errorf("scheduler: prompt token %d outside the vocabulary of %d", t, m.Vocab())
		}
	}
	return nil
}
