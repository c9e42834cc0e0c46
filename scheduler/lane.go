package scheduler

import (
	"slices"
	"time"
)

// laneState is everything the lane goroutine owns: the sessions, the streams and the round being
// built. Nothing else reads or writes it.
type laneState struct {
	h            *Shared
	pool         *sessionPool
	grow         int
	prefillChunk int
	waiting      []*stream // admitted in arrival order
	active       []*active
	closed       bool // arrivals has been closed: finish what is here, then stop
	smp          sampler

	// The round being built, reused from round to round.
	rows      []Row
	shares    []share
	logitRows int // rows of the round that ask for logits

	warmer   Warmer    // the model's keep-warm tick, or nil
	lastWork time.Time // when the lane last ran a forward

	chainer  Chainer   // the model's greedy chains, or nil
	pricer   pricer    // what a round of r rows takes, learnt from the rounds run
	landing  landing   // how often drafts land at each depth
	decoding []*active // this round's decoding streams, while plan builds it
	depth    []int     // their draft depths, while price weighs them
	gain     []float64 // the chance that each one's next draft lands

	drafter   Drafter    // the model's MTP head, or nil
	draftRows []DraftRow // the MTP rows after a round
	drafting  []*active  // the streams whose MTP rows ask for logits, in order
}

// share is one stream's part of a round: n rows from its first unfed token (position first, row
// index row of the round), and the index of its logits row among the round's logits, or -1.
type share struct {
	a          *active
	first, row int
	n          int
	logits     int
}

func (l *laneState) init(h *Shared) {
	l.h = h
	if d, ok := h.model.(Drafter); ok && d.HasMTP() {
		l.drafter = d
	}
	l.warmer, _ = h.model.(Warmer)
	if c, ok := h.model.(Chainer); ok && c.CanChain() {
		l.chainer = c
	}
}

// run is the lane: admit, then either drive a lone stream or run a shared round, until the host is
// closed and every stream has ended.
func (h *Shared) run() {
	defer close(h.done)
	l := &h.lane
	for l.collect() {
		l.reconfigure()
		l.admit()
		l.reap()
		switch {
		case len(l.active) == 1 && len(l.waiting) == 0:
			l.driveLone(l.active[0])
		case len(l.active) > 0:
			l.round()
		}
		l.compact()
	}
}

// collect moves arrivals into the waiting list. It blocks while there is nothing to do, and
// reports false once the host is closed and no stream is left.
func (l *laneState) collect() bool {
	for !l.closed && len(l.active) == 0 && len(l.waiting) == 0 {
		st, ok := l.waitIdle()
		l.receive(st, ok)
		if l.h.pendingReconfig() {
			return true
		}
	}
	for !l.closed {
		select {
		case st, ok := <-l.h.arrivals:
			l.receive(st, ok)
			continue
		default:
		}
		break
	}
	return !l.closed || len(l.active) > 0 || len(l.waiting) > 0
}

func (l *laneState) receive(st *stream, ok bool) {
	switch {
	case !ok:
		l.closed = true
	case st != nil: // nil only wakes the lane for a reconfiguration
		l.waiting = append(l.waiting, st)
	}
}

// waitIdle waits for the next arrival. Within the keep-warm window after the last forward, it
// wakes every WarmTick to run the model's warm tick, so the first token after a pause does not
// wait for the GPU to come back up.
func (l *laneState) waitIdle() (*stream, bool) {
	for {
		keep := time.Duration(l.h.keepWarm.Load())
		if l.warmer == nil || keep <= 0 || time.Since(l.lastWork) > keep {
			st, ok := <-l.h.arrivals
			return st, ok
		}
		timer := time.NewTimer(time.Duration(l.h.warmTick.Load()))
		select {
		case st, ok := <-l.h.arrivals:
			timer.Stop()
			return st, ok
		case <-timer.C:
			l.warmer.Warm() // a failed tick only costs the next request its warm start
		}
	}
}

// arrived reports, without blocking, whether a new stream is waiting; the lone driver asks
// between tokens.
func (l *laneState) arrived() bool {
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

func (h *Shared) pendingReconfig() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.reconfig != nil
}

// reconfigure applies a new routing once no stream holds a session of the old one.
func (l *laneState) reconfigure() {
	h := l.h
	h.mu.Lock()
	opts := h.reconfig
	if opts == nil || l.pool.inUse() > 0 {
		h.mu.Unlock()
		return
	}
	h.reconfig = nil
	h.mu.Unlock()
	h.apply(*opts)
}

// admit gives waiting streams sessions, in arrival order: each takes the smallest free session
// that holds its prompt plus grow tokens (or the largest there is). A stream that finds none
// waits, and so do those behind it. Waiting streams whose request has ended are dropped.
func (l *laneState) admit() {
	l.waiting = slices.DeleteFunc(l.waiting, func(st *stream) bool {
		if st.ctx.Err() == nil && l.h.hostCtx.Err() == nil {
			return false
		}
		l.h.waiting.Add(-1)
		st.events <- Event{Done: true, Reason: FinishCancelled}
		close(st.events)
		return true
	})
	if l.h.pendingReconfig() {
		return // new admissions wait for the new layout
	}
	for len(l.waiting) > 0 {
		st := l.waiting[0]
		if len(st.req.Prompt) >= l.pool.largest() {
			// The layout shrank under a queued request (Reconfigure): it can never run now.
			l.refuse(st, &PromptTooLongError{Prompt: len(st.req.Prompt), Context: l.pool.largest()})
			continue
		}
		need := min(len(st.req.Prompt)+l.grow, l.pool.largest())
		sess, kept := l.pool.bestFree(need, st.req.Prompt)
		if sess == nil {
			return
		}
		a := newActive(st, sess, l.h)
		a.fed, a.cached = kept, kept
		l.active = append(l.active, a)
		l.waiting = l.waiting[1:]
		l.h.waiting.Add(-1)
	}
}

func (l *laneState) refuse(st *stream, err error) {
	l.waiting = l.waiting[1:]
	l.h.waiting.Add(-1)
	st.events <- Event{Done: true, Reason: FinishError, Err: err}
	close(st.events)
}

// reap ends the streams whose request has ended (client gone, deadline, host closing), freeing
// their sessions for this round.
func (l *laneState) reap() {
	for _, a := range l.active {
		if a.ctx.Err() != nil {
			a.end(Event{Done: true, Reason: FinishCancelled})
		}
	}
}

// compact drops ended streams from the active list.
func (l *laneState) compact() {
	l.active = slices.DeleteFunc(l.active, func(a *active) bool { return a.done })
}

// idle waits a moment when no stream could take part in a round (readers behind, sessions to
// free), waking early for an arrival.
func (l *laneState) idle() {
	if l.closed {
		time.Sleep(time.Millisecond)
		return
	}
	select {
	case st, ok := <-l.h.arrivals:
		l.receive(st, ok)
	case <-time.After(time.Millisecond):
	}
}
