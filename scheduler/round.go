package scheduler

import (
	"fmt"
	"time"

	"tfd/batch"
)

// round runs one batched forward over every ready stream: each decoding stream feeds its newest
// token, and prefilling streams feed chunks of their prompts with what is left of the round. It
// reports false when no stream could move: none was ready and none moved or ended.
func (l *laneState) round() bool {
	ended := l.migrate()
	l.plan()
	if len(l.rows) == 0 {
		return ended
	}
	start := time.Now()
	logits, err := l.h.model.Forward(l.h.hostCtx, l.rows)
	if err != nil {
		l.lastWork = time.Now()
		for _, s := range l.shares {
			s.a.endCancelledOrFailed(err)
		}
		return true
	}
	l.conclude(logits)
	l.lastWork = time.Now()
	l.pricer.observe(len(l.rows), l.lastWork.Sub(start))
	return true
}

// plan builds the round's rows. Decoding streams come first, one row each, so they move every
// round, with the drafts that pay for their rows (price); prompts share the rest, capped at
// prefillChunk rows while anyone decodes.
func (l *laneState) plan() {
	l.rows, l.shares, l.logitRows = l.rows[:0], l.shares[:0], 0
	budget := l.h.model.MaxRows()
	decoding := l.decoding[:0]
	for _, a := range l.active {
		if budget > 0 && a.ready() && a.decoding() {
			decoding = append(decoding, a)
			budget--
		}
	}
	l.decoding = decoding
	for _, a := range decoding {
		l.propose(a, budget)
		if a.constrained != nil {
			a.drafts = a.constrained.cut(a.drafts, a.req.StopTokens)
		}
	}
	l.price(decoding, budget)
	for _, a := range decoding {
		l.add(a, 1)
		budget -= len(a.drafts)
	}
	if len(l.rows) > 0 {
		budget = min(budget, l.prefillChunk)
	}
	for _, a := range l.active {
		if budget > 0 && a.ready() && !a.decoding() {
			n := min(budget, len(a.tokens)-a.fed, a.sess.capacity-a.fed)
			a.drafts = a.drafts[:0] // drafts follow a decoding stream's newest token only
			l.add(a, n)
			budget -= n
		}
	}
}

// propose sets a decoding stream's drafts for this round: at most spare rows, and no more than
// its session, the context, its token limit and its reader's room allow.
func (l *laneState) propose(a *active, spare int) {
	a.drafts, a.fromHead = a.drafts[:0], 0
	if a.req.Drafts.max() <= 0 {
		return
	}
	k := min(a.req.Drafts.max(), spare,
		a.sess.capacity-len(a.tokens), // rows at positions up to len(tokens)-1+k
		l.h.model.Context()-len(a.tokens),
		a.req.MaxTokens-a.produced-1, // the target's own token comes on top
		a.room()-1)
	if a.mtpDraft < 0 || k <= 0 {
		a.drafts = a.ngram.propose(a.drafts, a.tokens, nil, min(k, a.req.Drafts.NGram))
		return
	}
	// The MTP head's token first, then what copying says follows it.
	a.mtpSeq[0] = a.mtpDraft
	a.copied = a.ngram.propose(a.copied, a.tokens, a.mtpSeq[:], min(k-1, a.req.Drafts.NGram))
	a.drafts, a.fromHead = append(append(a.drafts[:0], a.mtpDraft), a.copied...), 1
}

// add puts rows for the next n unfed tokens of a, then its drafts, into the round; the row of its
// newest token and each draft's row ask for logits.
func (l *laneState) add(a *active, n int) {
	if a.lone {
		l.handOff(a)
	}
	s := share{a: a, first: a.fed, row: len(l.rows), n: n, logits: -1}
	for pos := a.fed; pos < a.fed+n; pos++ {
		newest := pos == len(a.tokens)-1
		if newest {
			s.logits = l.logitRows
			l.logitRows += 1 + len(a.drafts)
		}
		l.rows = append(l.rows, batch.Row{Base: a.sess.base, Pos: pos, Token: a.tokens[pos], Logits: newest})
	}
	if s.logits >= 0 {
		for i, tok := range a.drafts {
			l.rows = append(l.rows, batch.Row{Base: a.sess.base, Pos: len(a.tokens) + i, Token: tok, Logits: true})
		}
	}
	l.shares = append(l.shares, s)
}

// conclude advances each stream of the round and samples for those whose newest token was fed.
func (l *laneState) conclude(logits []float32) {
	vocab, context := l.h.model.Vocab(), l.h.model.Context()
	for _, s := range l.shares {
		if s.logits < 0 {
			s.a.feed(s.n) // a prompt chunk short of the newest token
			continue
		}
		s.a.feed(s.n - 1) // the rows before the newest; verify accepts what follows them
		l.landing.note(s.a.verify(&l.smp, logits[s.logits*vocab:], vocab, context))
	}
	if l.drafter != nil {
		l.draftMTP()
	}
}

// draftMTP runs the model's MTP head after a round, for the streams that draft: one row for each
// position the round confirmed (so the head's own keys and values follow the stream), and for
// the last of them, draft logits for the token after the newest. The draft is the keyed pick at
// that position, so a sampled stream drafts the token its own draw would most likely make.
func (l *laneState) draftMTP() {
	l.draftRows, l.drafting = l.draftRows[:0], l.drafting[:0]
	for _, s := range l.shares {
		a := s.a
		a.mtpDraft = -1
		if a.done || !a.req.Drafts.MTP {
			continue
		}
		for t := s.first; t < a.fed; t++ {
			newest := t == a.fed-1 && a.decoding() && t+2 < l.h.model.Context()
			l.draftRows = append(l.draftRows, batch.DraftRow{Base: a.sess.base, Pos: t, Token: a.tokens[t+1], Source: s.row + t - s.first, Logits: newest})
			if newest {
				l.drafting = append(l.drafting, a)
			}
		}
	}
	if len(l.draftRows) == 0 {
		return
	}
	logits, err := l.drafter.Draft(l.h.hostCtx, l.draftRows)
	if err != nil {
		l.report("draft", err) // a draft is only a guess: without one the streams decode one token a round
		return
	}
	vocab := l.h.model.Vocab()
	for i, a := range l.drafting {
		a.mtpDraft = l.smp.pick(a.penalised(logits[i*vocab:(i+1)*vocab]), a.req.Sampling, len(a.tokens))
	}
}

// migrate moves each stream that has filled its session to a larger free one: its keys and
// values are copied bit for bit, so its reply continues as if it had never moved. A stream with
// no larger free session waits; one that already holds the largest ends with an error. It reports
// whether a stream ended.
func (l *laneState) migrate() (ended bool) {
	for _, a := range l.active {
		if a.done || !a.needsRoom() {
			continue
		}
		from := a.sess
		if from.capacity >= l.pool.largest() {
			a.end(Event{Done: true, Reason: FinishError, Err: outgrown(len(a.tokens), l.pool.largest())})
			ended = true
			continue
		}
		to := l.pool.smallestFree(min(len(a.tokens)+l.grow, l.pool.largest()))
		if to == nil || to.capacity <= from.capacity {
			if to = l.pool.smallestFree(from.capacity + 1); to == nil {
				continue // waits for a larger session to free up
			}
		}
		if err := l.h.model.MoveKV(to.base, from.base, a.fed); err != nil {
			a.endCancelledOrFailed(err)
			ended = true
			continue
		}
		from.holder, from.kept, to.holder, a.sess = nil, a.tokens[:a.fed], a, to
	}
	return ended || l.breakRoomCycle()
}

// breakRoomCycle ends the newest stream when every stream is waiting for a larger session: that
// happens only during a layout change, when retiring streams each need a session of the new
// layout that overlaps another one's, and none of them would ever move. It reports whether it
// ended one.
func (l *laneState) breakRoomCycle() bool {
	var newest *active
	for _, a := range l.active {
		if a.done {
			continue
		}
		if !a.needsRoom() {
			return false
		}
		newest = a
	}
	if newest == nil {
		return false
	}
	newest.end(Event{Done: true, Reason: FinishError, Err: fmt.Errorf("scheduler: the reply reached %d tokens during a change of sessions.layout, and every session of the new layout that could hold it overlaps one that a running reply still holds: the tokens sent stand; retry", len(newest.tokens))})
	return true
}

// chainLength returns how many tokens a greedy chain may make for a lone stream: 0 unless the
// model runs chains and the stream is greedy without logprobs or constraint (a chain on the
// device cannot mask), else as many as its session, the context, its token limit and its
// reader's room allow, up to the model's most.
func (l *laneState) chainLength(a *active) int {
	if l.chainer == nil || !a.req.Sampling.Greedy() || a.req.Logprobs || a.constrained != nil {
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
	l.lastWork = time.Now()
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
// is decoding without drafts, its reader has room and its session has room. Prefill, drafts,
// migration and a slow reader take the general path of rounds.
func (l *laneState) lone(a *active) bool {
	return a.decoding() && !a.needsRoom() && a.canEmit() && a.req.Drafts.max() == 0
}

// driveLone runs a stream that is alone on the host, token by token without building rounds. It
// returns to the lane whenever the lane has something else to do (an arrival, a waiting request
// that ended, a reconfiguration) or the stream leaves the lone path; the stream then goes on in
// shared rounds with the same state, so its future tokens are the same.
func (l *laneState) driveLone(a *active) {
	row := make([]batch.Row, 1)
	vocab, context := l.h.model.Vocab(), l.h.model.Context()
	a.lone = true
	for !a.done && a.live.Err() == nil && l.lone(a) && !l.interrupted() {
		row[0] = batch.Row{Base: a.sess.base, Pos: a.fed, Token: a.tokens[a.fed], Logits: true}
		if n := l.chainLength(a); n > 1 {
			l.chain(a, row[0], n)
			continue
		}
		logits, err := l.h.model.Forward(a.live, row)
		l.lastWork = time.Now()
		if err != nil {
			a.endCancelledOrFailed(err)
			return
		}
		a.step(&l.smp, logits[:vocab], context)
	}
}

// handOff moves a stream from the lone driver to shared rounds. When another stream is why (not
// a prefill, a migration or drafts of its own), it counts the handoff and says so at debug level,
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
