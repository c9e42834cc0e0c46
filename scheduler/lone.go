package scheduler

import (
	"tfd/batch"
)

// The lone driver: a stream alone on a shared host runs without rounds.

// rawArgmax reports whether a stream's tokens are the raw argmax of its logits: it is greedy
// without logprobs, constraint or penalties, so a chain on the device may choose its tokens.
func rawArgmax(a *active) bool {
	return a.req.Sampling.Greedy() && !a.req.Logprobs && a.constrained == nil && !a.req.Sampling.Penalties.Active()
}

// chainRoom returns how many more tokens a greedy chain may make for a lone stream: 0 unless the
// model runs chains and the stream takes the raw argmax without drafts, else as many as its
// session, the context, its token limit and its reader's room allow.
func (l *laneState) chainRoom(a *active) int {
	if l.chainer == nil || l.drafted(a) || !rawArgmax(a) {
		return 0
	}
	return min(a.sess.capacity-a.fed, l.h.model.Context()-len(a.tokens)+1, a.req.MaxTokens-a.produced, a.room())
}

// chain runs a greedy lone stream as a chain on the device (batch.Chainer), one forward a step,
// and takes each step's token as if it had come from its own forward. It keeps batch.ChainAhead
// steps enqueued, so that the device starts each step the moment the one before ends while the
// lane takes that one's token; it stops enqueueing as soon as the stream has no room for more or
// the lane is interrupted (an arrival, a reconfiguration). So a newcomer waits for the step
// running when it arrives and at most one more. The tokens of steps already enqueued are the
// stream's next tokens whatever arrived, so they are taken; after a stop token or a cancelled
// request the rest are dropped, and the KV slots they wrote are never read. It reports whether
// the lane was interrupted.
func (l *laneState) chain(a *active) (interrupted bool) {
	row := batch.Row{Base: a.sess.base, Pos: a.fed, Token: a.tokens[a.fed], Logits: true}
	if err := l.chainer.StartChain(a.live, row); err != nil {
		a.endCancelledOrFailed(err)
		return false
	}
	context := l.h.model.Context()
	ahead := 0 // steps enqueued whose tokens are not taken
	for !a.done && a.live.Err() == nil {
		for !interrupted && ahead < batch.ChainAhead && l.chainRoom(a) > ahead {
			if err := l.chainer.Step(); err != nil {
				a.endCancelledOrFailed(err)
				return interrupted
			}
			ahead++
		}
		if ahead == 0 {
			break
		}
		tok, err := l.chainer.Token()
		l.lastWork = l.now()
		ahead--
		if err != nil {
			a.endCancelledOrFailed(err)
			break
		}
		a.accept(Event{Token: tok}, context)
		interrupted = interrupted || l.interrupted()
	}
	return interrupted
}

// lone reports whether a, the only stream holding a session, can take the lone driver's path: it
// is decoding, its reader has room and its session has room. Prefill, migration and a slow reader
// take the general path of rounds.
func (l *laneState) lone(a *active) bool {
	return a.decoding() && !a.needsRoom() && a.canEmit()
}

// drafted reports whether a stream has drafts to propose now: an MTP chain from a model that has
// a head (unless the head stopped for it, headOff), or n-gram copies while its context has one to
// propose. A greedy stream that copies runs undrafted chains on the device while it has none,
// whose forwards read back a token where a drafted forward reads back every row's logits.
func (l *laneState) drafted(a *active) bool {
	return a.req.Drafts.MTP > 0 && l.drafter != nil && !a.headOff || copying(a)
}

// driveLone runs a stream that is alone on the host without building rounds: token by token, by
// a greedy chain on the device, by a drafted chain on the device (draftChain), or a drafted
// forward at a time (loneDrafted). Between forwards it returns to the lane whenever the lane has
// something else to do (an arrival, a waiting request that ended, a reconfiguration) or the
// stream leaves the lone path; the stream then goes on in shared rounds with the same state, so
// its future tokens are the same.
func (l *laneState) driveLone(a *active) {
	row := make([]batch.Row, 1)
	vocab, context := l.h.model.Vocab(), l.h.model.Context()
	a.lone = true
	for !a.done && a.live.Err() == nil && l.lone(a) && !l.interrupted() {
		if l.drafted(a) {
			if depth := l.draftChainDepth(a); depth > 0 {
				if l.draftChain(a, depth) {
					return
				}
				continue
			}
			l.loneDrafted(a)
			continue
		}
		if l.chainRoom(a) > 0 {
			if l.chain(a) {
				return
			}
			continue
		}
		row[0] = batch.Row{Base: a.sess.base, Pos: a.fed, Token: a.tokens[a.fed], Logits: true}
		logits, err := l.h.model.Forward(a.live, row)
		l.lastWork = l.now()
		if err != nil {
			a.endCancelledOrFailed(err)
			return
		}
		a.step(&l.smp, logits[:vocab], context)
		// A hybrid model's block carries the DeltaNet state at its end, which its session keeps
		// only for its newest positions: offered now, as a round offers, not only at the end.
		l.offerFed(a)
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
	spare := logitLimit(l.h.model) - 1
	l.propose(a, spare)
	if a.constrained != nil {
		a.drafts = a.constrained.cut(a.drafts, a.req.StopTokens)
	}
	l.decoding = append(l.decoding[:0], a)
	l.price(l.decoding, spare, false)
	if a.headRefused && a.granted == 0 && !l.chainsDrafts(a) {
		// The head's first draft does not pay for this stream alone (a sampled stream on a GPU,
		// whose head call waits for the device and whose picks run here): stop feeding the head
		// too, whose steps would cost every forward for nothing, and draft only by copies, or
		// not at all. A stream whose head drafts on the device is judged there (draftChainDepth).
		a.headOff = true
	}
	picked := l.picksAlone(a)
	l.rows = append(l.rows[:0], batch.Row{Base: a.sess.base, Pos: a.fed, Token: a.tokens[a.fed], Logits: !picked, Pick: picked})
	l.addDrafts(a, picked)
	// One share, as a round would hold it, so that conclude verifies and drafts as for a round.
	l.shares = append(l.shares[:0], share{a: a, first: a.fed, row: 0, n: 1, logits: 0, picked: picked})
	start := l.now()
	logits, tokens, err := l.forward(a.live)
	l.lastWork = l.now()
	if err != nil {
		a.endCancelledOrFailed(err)
		return
	}
	l.pricer.observe(len(l.rows), l.lastWork.Sub(start))
	l.conclude(logits, tokens)
}
