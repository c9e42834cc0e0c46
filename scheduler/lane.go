package scheduler

import (
	"log/slog"
	"slices"
	"time"

	"tfd/batch"
	"tfd/promptcache"
)

// laneState is everything the lane goroutine owns: the sessions, the streams and the round being
// built. Nothing else reads or writes it.
type laneState struct {
	h            *Shared
	pool         sessionPool
	grow         int
	prefillChunk int
	waiting      []*stream // admitted in arrival order
	active       []*active
	closed       bool // arrivals has been closed: finish what is here, then stop
	smp          sampler
	smps         []*sampler // prepick's, one a goroutine
	jobs         []pickJob  // prepick's rows
	ahead        []int32    // prepick's picks, by logits row
	aheadLP      []Event    // their log-probabilities, by logits row, for the streams that ask

	// The round being built, reused from round to round.
	rows      []batch.Row
	shares    []share
	logitRows int // rows of the round that ask for logits
	pickRows  int // rows of the round that ask for their picks

	warmer   batch.Warmer     // the model's keep-warm tick, or nil
	lastWork time.Time        // when the lane last ran a forward
	now      func() time.Time // the clock that times forwards: time.Now but in tests

	picker  batch.Picker       // the model's picks, or nil: greedy picks from the logits
	chainer batch.Chainer      // the model's greedy chains, or nil
	drafts  batch.DraftChainer // the model's drafted chains, or nil
	pricer  pricer             // what a round of r rows takes, timed at start and refined by the rounds run
	landing [2]landing         // how often drafts land at each depth, for greedy streams and sampled ones (picks)
	costs   hostCosts          // what the host spends on a draft beyond its row, timed as rounds run
	// headShare is what a step of the MTP head reads against a forward of one row (the drafter's
	// batch.StepSharer), or 0 where it does not say.
	headShare float64
	decoding  []*active // this round's decoding streams, while plan builds it
	depth     []int     // their draft depths, while price weighs them
	gain      []float64 // the chance that each one's next draft lands

	reportTo func(where string, err error) // SharedOptions.Report, or nil
	logger   *slog.Logger                  // SharedOptions.Logger, or nil

	cache *promptcache.Cache // the model's prompt cache, or nil

	states batch.Stateful // where the model's sessions can be fed again from, or nil: anywhere

	drafter   batch.Drafter    // the model's MTP head, or nil
	draftRows []batch.DraftRow // the MTP rows after a round
	drafting  []*active        // the streams whose MTP rows ask for logits, in order
}

// share is one stream's part of a round: n rows from its first unfed token (position first, row
// index row of the round), and the index of the row after its newest token among the round's
// logits rows, or among its picks where picked, or -1; ahead: its picks were made ahead (prepick).
type share struct {
	a          *active
	first, row int
	n          int
	logits     int
	picked     bool
	ahead      bool
}

func (l *laneState) init(h *Shared, opts SharedOptions) {
	l.h = h
	l.drafter, l.chainer, l.warmer, l.reportTo, l.logger = opts.Drafter, opts.Chainer, opts.Warmer, opts.Report, opts.Logger
	l.picker, _ = h.model.(batch.Picker)
	l.cache, l.states = opts.Cache, opts.States
	if l.states != nil {
		l.pool.resumable = l.states.Resumable
	}
	if l.drafter != nil {
		l.drafts = opts.DraftChainer
	}
	if s, ok := l.drafter.(batch.StepSharer); ok {
		l.headShare = s.StepShare()
	}
	l.now = opts.Clock
	if l.now == nil {
		l.now = time.Now
	}
}

// report passes an error the lane works around to SharedOptions.Report.
func (l *laneState) report(where string, err error) {
	if err != nil && l.reportTo != nil && l.h.hostCtx.Err() == nil {
		l.reportTo(where, err)
	}
}

// run is the lane. Each turn takes in arrivals, applies a new routing, ends cancelled streams,
// admits waiting ones, and then does one piece of work: the lone driver for a stream that is
// alone, or one shared round. When nothing can move (no stream, or every reader behind and no
// session free) it waits for something that changes that: an arrival, a reader taking an event,
// a request ending, a reconfiguration, or the keep-warm tick. It never polls.
func (h *Shared) run() {
	defer close(h.done)
	l := &h.lane
	for {
		l.collect()
		l.reconfigure()
		l.reap()
		l.admit()
		// After reap: a stream the lone driver left cancelled (a Close that gave up on it) ends
		// there, and a closed lane with nothing left must stop rather than wait for a wake.
		if l.closed && len(l.active) == 0 && len(l.waiting) == 0 {
			if l.cache != nil {
				l.cache.Flush(l.h.hostCtx) // a restart starts warm; a Close that gives up cuts it short
			}
			return
		}
		if !l.work() {
			l.wait()
		}
		l.compact()
	}
}

// collect moves the arrivals already sent into the waiting list, without blocking.
func (l *laneState) collect() {
	for !l.closed {
		select {
		case st, ok := <-l.h.arrivals:
			l.receive(st, ok)
		case r := <-l.h.fetched:
			l.placeFetched(r)
		default:
			return
		}
	}
}

func (l *laneState) receive(st *stream, ok bool) {
	if !ok {
		l.closed = true
		return
	}
	l.waiting = append(l.waiting, st)
}

// work runs the lone driver or a shared round; it reports false when no stream could move, so
// the lane may wait.
func (l *laneState) work() bool {
	if len(l.active) == 1 && l.lone(l.active[0]) {
		l.driveLone(l.active[0])
		return true
	}
	return len(l.active) > 0 && l.round()
}

// wait blocks until the lane may have something to do. Idle within the keep-warm window after
// the last forward, it wakes every WarmTick to run the model's warm tick, so the first token
// after a pause does not wait for the GPU to come back up.
func (l *laneState) wait() {
	arrivals := l.h.arrivals
	if l.closed {
		arrivals = nil // closed: receiving would not block
	}
	var tick <-chan time.Time
	every, keep := time.Duration(l.h.warmTick.Load()), time.Duration(l.h.keepWarm.Load())
	if l.warmer != nil && len(l.active) == 0 && time.Until(l.lastWork.Add(keep)) >= every {
		timer := time.NewTimer(every) // the next tick falls within the window
		defer timer.Stop()
		tick = timer.C
	}
	select {
	case st, ok := <-arrivals:
		l.receive(st, ok)
	case <-l.h.wake:
	case r := <-l.h.fetched:
		l.placeFetched(r)
	case <-tick:
		l.report("warm", l.warmer.Warm()) // a failed tick costs the next request its warm start
	}
}

// interrupted reports, without blocking, whether something arrived that the lone driver must
// hand back to the lane for: a new stream, a waiting request that ended, a reconfiguration.
func (l *laneState) interrupted() bool {
	select {
	case <-l.h.wake:
		return true
	case r := <-l.h.fetched:
		l.placeFetched(r)
		return true
	default:
	}
	if l.closed {
		return false
	}
	select {
	case st, ok := <-l.h.arrivals:
		l.receive(st, ok)
		return true
	default:
		return false
	}
}

// reconfigure puts a new routing in force: new admissions use its layout at once, in whatever of
// it is free, while running replies finish in their sessions of the old one.
func (l *laneState) reconfigure() {
	h := l.h
	h.mu.Lock()
	opts := h.reconfig
	h.reconfig = nil
	h.mu.Unlock()
	if opts != nil {
		h.apply(*opts)
	}
	if l.pool.prune() {
		h.publishLayout()
	}
}

// admit gives waiting streams sessions, in arrival order: each takes the available session that
// holds its prompt plus grow tokens (or the largest there is) and already holds the longest start
// of its prompt, else the smallest, and the prompt cache's blocks of its prompt are copied in. A
// stream that finds no session waits, and so do those behind it; one whose blocks are being read
// back from the spill folder waits without holding up the others. Waiting streams whose request
// has ended are dropped.
func (l *laneState) admit() {
	l.waiting = slices.DeleteFunc(l.waiting, func(st *stream) bool {
		if st.ctx.Err() == nil && l.h.hostCtx.Err() == nil {
			return false
		}
		l.unpin(st)
		l.h.waiting.Add(-1)
		st.finish(Event{Done: true, Reason: FinishCancelled})
		return true
	})
	for i := 0; i < len(l.waiting); {
		st := l.waiting[i]
		if len(st.req.Prompt) >= l.pool.largest() {
			// The layout shrank under a queued request (Reconfigure): it can never run now.
			l.refuse(i, &PromptTooLongError{Prompt: len(st.req.Prompt), Context: l.pool.largest()})
			continue
		}
		m, ready := l.cacheMatch(st)
		if !ready {
			i++
			continue
		}
		need := min(len(st.req.Prompt)+l.grow, l.pool.largest())
		sess, kept := l.pool.bestFree(need, st.req.Prompt, m.Memory*promptcache.BlockTokens-1)
		if sess == nil {
			return
		}
		kept = l.restore(m, sess, kept)
		l.unpin(st)
		l.active = append(l.active, newActive(st, sess, l.h, kept))
		l.waiting = slices.Delete(l.waiting, i, i+1)
		l.h.waiting.Add(-1)
	}
}

// refuse ends the i-th waiting stream with err.
func (l *laneState) refuse(i int, err error) {
	st := l.waiting[i]
	l.unpin(st)
	l.waiting = slices.Delete(l.waiting, i, i+1)
	l.h.waiting.Add(-1)
	st.finish(Event{Done: true, Reason: FinishError, Err: err})
}

// reap ends the streams whose request has ended (client gone, deadline, host closing), freeing
// their sessions before admission.
func (l *laneState) reap() {
	for _, a := range l.active {
		if a.live.Err() != nil {
			a.end(Event{Done: true, Reason: FinishCancelled})
		}
	}
	l.compact()
}

// compact drops ended streams from the active list.
func (l *laneState) compact() {
	l.active = slices.DeleteFunc(l.active, func(a *active) bool { return a.done })
}
