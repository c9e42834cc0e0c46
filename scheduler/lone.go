package scheduler

import (
	"tfd/batch"
)

// The lone driver: a stream alone on a shared host runs without rounds.

// chainLength returns how many tokens a greedy chain may make for a lone stream: 0 unless the
// model runs chains and the stream is greedy without logprobs or constraint (a chain on the
// device cannot mask), else as many as its session, the context, its token limit and its
// reader's room allow, up to the model's most.
func (l *laneState) chainLength(a *active) int {
	if l.chainer == nil || l.drafted(a) || !a.req.Sampling.Greedy() || a.req.Logprobs || a.constrained != nil {
		return 0
	}
	if a.req.Sampling.Penalties.Active() {
		return 0 // a chain on the device takes the raw argmax; penalties change it
	}
	return min(l.chainer.MaxChainLen(), a.sess.capacity-a.fed, l.h.model.Context()-len(a.tokens)+1,
		a.req.MaxTokens-a.produced, a.room())
}

// chain runs a greedy chain of n tokens from row on the device and takes its tokens one by one,
// as if each had come from its own forward; tokens after one that ends the stream are dropped.
func (l *laneState) chain(a *active, row batch.Row, n int) {
	tokens, err := l.chainer.GreedyChain(a.live, row, n)
	l.lastWork = l.now()
	if err != nil {
		a.endCancelledOrFailed(err)
		return
	}
	context := l.h.model.Context()
	for _, tok := range tokens {
		if !a.accept(Event{Token: tok}, context) {
			return
		}
	}
}

// lone reports whether a, the only stream holding a session, can take the lone driver's path: it
// is decoding, its reader has room and its session has room. Prefill, migration and a slow reader
// take the general path of rounds.
func (l *laneState) lone(a *active) bool {
	return a.decoding() && !a.needsRoom() && a.canEmit()
}

// drafted reports whether a stream has drafts to propose: n-gram copies, or an MTP chain from a
// model that has a head.
func (l *laneState) drafted(a *active) bool {
	return a.req.Drafts.NGram > 0 || a.req.Drafts.MTP > 0 && l.drafter != nil
}

// driveLone runs a stream that is alone on the host without building rounds: token by token, by
// greedy chains on the device, or a drafted forward at a time (loneDrafted). Between forwards it
// returns to the lane whenever the lane has something else to do (an arrival, a waiting request
// that ended, a reconfiguration) or the stream leaves the lone path; the stream then goes on in
// shared rounds with the same state, so its future tokens are the same.
func (l *laneState) driveLone(a *active) {
	row := make([]batch.Row, 1)
	vocab, context := l.h.model.Vocab(), l.h.model.Context()
	a.lone = true
	for !a.done && a.live.Err() == nil && l.lone(a) && !l.interrupted() {
		if l.drafted(a) {
			l.loneDrafted(a)
			continue
		}
		row[0] = batch.Row{Base: a.sess.base, Pos: a.fed, Token: a.tokens[a.fed], Logits: true}
		if n := l.chainLength(a); n > 1 {
			l.chain(a, row[0], n)
			continue
		}
		logits, err := l.h.model.Forward(a.live, row)
		l.lastWork = l.now()
		if err != nil {
			a.endCancelledOrFailed(err)
			return
		}
		a.step(&l.smp, logits[:vocab], context)
	}
}

// handOff moves a stream from the lone driver to shared rounds. When another stream is why (not
// a migration or a slow reader), it counts the handoff and says so at debug level,
// with the stream's position.
func (l *laneState) handOff(a *active) {
	a.lone = false
	if len(l.active) < 2 {
		return
	}
	l.h.handoffs.Add(1)
	if l.logger != nil {
		l.logger.Debug("lone driver hands a stream to shared rounds", "position", len(a.tokens), "streams", len(l.active))
	}
}

// loneDrafted runs one drafted forward for a lone stream: its newest token, then the drafts it
// proposes (the MTP head's chain from the last forward, then n-gram copies) as deep as pricing
// finds they pay for a round of one stream, verified as a round verifies them, and the MTP head
// run over the positions that stood, for the next forward's chain. It skips what a shared round
// does for many streams (planning over every active stream, prompt chunks, migration).
func (l *laneState) loneDrafted(a *active) {
	spare := l.h.model.MaxRows() - 1
	l.propose(a, spare)
	if a.constrained != nil {
		a.drafts = a.constrained.cut(a.drafts, a.req.StopTokens)
	}
	l.decoding = append(l.decoding[:0], a)
	l.price(l.decoding, spare)
	l.rows = append(l.rows[:0], batch.Row{Base: a.sess.base, Pos: a.fed, Token: a.tokens[a.fed], Logits: true})
	for i, tok := range a.drafts {
		l.rows = append(l.rows, batch.Row{Base: a.sess.base, Pos: len(a.tokens) + i, Token: tok, Logits: true})
	}
	// One share, as a round would hold it, so that conclude verifies and drafts as for a round.
	l.shares = append(l.shares[:0], share{a: a, first: a.fed, row: 0, n: 1, logits: 0})
	start := l.now()
	logits, err := l.h.model.Forward(a.live, l.rows)
	l.lastWork = l.now()
	if err != nil {
		a.endCancelledOrFailed(err)
		return
	}
	l.pricer.observe(len(l.rows), l.lastWork.Sub(start))
	l.conclude(logits)
}
