package scheduler

import (
	"context"
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
	start := l.now()
	logits, tokens, err := l.forward(l.h.hostCtx)
	// The forward alone prices rows: the host's picks and the head's calls after it are hostCosts.
	took := l.now().Sub(start)
	if err != nil {
		l.lastWork = l.now()
		for _, s := range l.shares {
			s.a.endCancelledOrFailed(err)
		}
		return true
	}
	l.conclude(logits, tokens)
	l.lastWork = l.now()
	l.pricer.observe(len(l.rows), took)
	return true
}

// forward runs the round's rows: through the model's picks where it takes them.
func (l *laneState) forward(ctx context.Context) ([]float32, []int32, error) {
	if l.picker != nil {
		return l.picker.ForwardPicks(ctx, l.rows)
	}
	logits, err := l.h.model.Forward(ctx, l.rows)
	return logits, nil, err
}

// picksAlone reports whether the rows after a's newest token ask the model for their picks
// instead of their logits: a's tokens are the raw argmax, and the model takes picks.
func (l *laneState) picksAlone(a *active) bool { return l.picker != nil && rawArgmax(a) }

// plan builds the round's rows. Decoding streams come first, one row each, so they move every
// round, with the drafts that pay for their rows (price): all of them ask for logits or picks, so
// they take at most the model's logitLimit rows. Prompts share the rest of MaxRows, capped at
// prefillChunk rows while anyone decodes; a prompt whose newest token would need a logits row
// past logitLimit stops one token short of it, which the next round feeds.
func (l *laneState) plan() {
	l.rows, l.shares, l.logitRows, l.pickRows = l.rows[:0], l.shares[:0], 0, 0
	limit := logitLimit(l.h.model)
	budget := limit
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
	l.price(decoding, budget, false)
	for _, a := range decoding {
		l.add(a, 1)
		budget -= len(a.drafts)
	}
	budget = l.h.model.MaxRows() - len(l.rows)
	if len(l.rows) > 0 {
		budget = min(budget, l.prefillChunk)
	}
	logitsLeft := limit - l.logitRows - l.pickRows
	for _, a := range l.active {
		if budget > 0 && a.ready() && !a.decoding() {
			n := min(budget, len(a.tokens)-a.fed, a.sess.capacity-a.fed)
			if n > 0 && a.fed+n == len(a.tokens) { // its newest token's row asks for logits
				if logitsLeft > 0 {
					logitsLeft--
				} else if n--; n == 0 {
					continue
				}
			}
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
	k := l.draftRoom(a, spare)
	// The MTP head's chain first, then what copying says follows it.
	chain := a.mtpDrafts[:min(len(a.mtpDrafts), max(k, 0))]
	a.copied = a.ngram.propose(a.copied, a.tokens, chain, min(k-len(chain), a.req.Drafts.NGram))
	a.drafts, a.fromHead = append(append(a.drafts[:0], chain...), a.copied...), len(chain)
}

// draftRoom returns how many drafts a may propose this round: at most its drafts' limit and
// spare rows, and no more than its session, the context, its token limit and its reader's room
// allow (it may be 0 or less).
func (l *laneState) draftRoom(a *active, spare int) int {
	k := min(a.req.Drafts.max(), spare,
		a.sess.capacity-len(a.tokens), // rows at positions up to len(tokens)-1+k
		l.h.model.Context()-len(a.tokens),
		a.req.MaxTokens-a.produced-1, // the target's own token comes on top
		a.room()-1)
	if l.states != nil {
		// The newest token's state must outlive a rejection of every draft after it.
		k = min(k, l.states.StateDepth()-1)
	}
	return k
}

// add puts rows for the next n unfed tokens of a, then its drafts, into the round; the row of its
// newest token and each draft's row ask for logits, or for their picks (picksAlone).
func (l *laneState) add(a *active, n int) {
	if a.lone {
		l.handOff(a)
	}
	s := share{a: a, first: a.fed, row: len(l.rows), n: n, logits: -1, picked: l.picksAlone(a)}
	for pos := a.fed; pos < a.fed+n; pos++ {
		newest := pos == len(a.tokens)-1
		if newest {
			s.logits = l.take(s.picked, 1+len(a.drafts))
		}
		l.rows = append(l.rows, batch.Row{Base: a.sess.base, Pos: pos, Token: a.tokens[pos], Logits: newest && !s.picked, Pick: newest && s.picked})
	}
	if s.logits >= 0 {
		l.addDrafts(a, s.picked)
	}
	l.shares = append(l.shares, s)
}

// take counts n rows of the round that ask for their picks (picked) or their logits, and returns
// the index of the first among those.
func (l *laneState) take(picked bool, n int) int {
	count := &l.logitRows
	if picked {
		count = &l.pickRows
	}
	*count += n
	return *count - n
}

// addDrafts puts a row for each of a's drafts into the round, asking for its pick or its logits.
func (l *laneState) addDrafts(a *active, picked bool) {
	for i, tok := range a.drafts {
		l.rows = append(l.rows, batch.Row{Base: a.sess.base, Pos: len(a.tokens) + i, Token: tok, Logits: !picked, Pick: picked})
	}
}

// conclude advances each stream of the round and samples for those whose newest token was fed,
// from its logits rows or, picked, its tokens among the model's picks.
func (l *laneState) conclude(logits []float32, tokens []int32) {
	vocab, context := l.h.model.Vocab(), l.h.model.Context()
	perRow := l.prepick(logits, vocab)
	for _, s := range l.shares {
		if s.logits < 0 {
			s.a.feed(s.n) // a prompt chunk short of the newest token
			l.offerFed(s.a)
			continue
		}
		s.a.feed(s.n - 1) // the rows before the newest; verify accepts what follows them
		start := l.now()
		var verified, landed int
		switch {
		case s.picked:
			verified, landed = s.a.verify(&l.smp, nil, tokens[s.logits:], nil, vocab, context)
		case s.ahead:
			var lps []Event
			if s.a.req.Logprobs {
				lps = l.aheadLP[s.logits:]
			}
			verified, landed = s.a.verify(&l.smp, nil, l.ahead[s.logits:], lps, vocab, context)
		default:
			verified, landed = s.a.verify(&l.smp, logits[s.logits*vocab:], nil, nil, vocab, context)
		}
		if s.ahead {
			note(&l.costs.pick[picks(s.a)], perRow)
		} else {
			note(&l.costs.pick[picks(s.a)], l.now().Sub(start)/time.Duration(verified+1))
		}
		l.landing[picks(s.a)].note(verified, landed)
		l.offerFed(s.a)
	}
	if l.drafter != nil {
		l.draftMTP()
	}
}

// draftMTP runs the model's MTP head after a round, for the streams that draft: one row for each
// position the round confirmed (so the head's own keys and values follow the stream), and for
// the last of them, draft logits for the token after the newest. Then it chains: each stream's
// draft goes back into the head, with the head's own output, for the token after that, up to the
// stream's MTP depth, one call per depth for all the streams still chaining. A draft is the keyed
// pick at its position, so a sampled stream drafts the tokens its own draws would most likely make.
func (l *laneState) draftMTP() {
	l.draftRows, l.drafting = l.draftRows[:0], l.drafting[:0]
	for _, s := range l.shares {
		a := s.a
		a.mtpDrafts = a.mtpDrafts[:0]
		if a.done || a.req.Drafts.MTP <= 0 || a.headOff {
			continue
		}
		for t := s.first; t < a.fed; t++ {
			newest := t == a.fed-1 && l.chainDepth(a) > 0
			l.draftRows = append(l.draftRows, batch.DraftRow{Base: a.sess.base, Pos: t, Token: a.tokens[t+1], Source: s.row + t - s.first, Logits: newest})
			if newest {
				l.drafting = append(l.drafting, a)
			}
		}
	}
	for len(l.draftRows) > 0 {
		start := l.now()
		logits, err := l.drafter.Draft(l.h.hostCtx, l.draftRows)
		if err != nil {
			l.report("draft", err) // a draft is only a guess: without one the streams decode one token a round
			return
		}
		if len(l.drafting) > 0 { // a call that asks for no logits does not wait for the device
			note(&l.costs.head, l.now().Sub(start))
		}
		vocab := l.h.model.Vocab()
		ahead := l.predraft(logits, vocab)
		l.draftRows = l.draftRows[:0]
		chaining := l.drafting[:0] // filtered in place: entry i is read before it is overwritten
		for i, a := range l.drafting {
			pos := len(a.tokens) + len(a.mtpDrafts) // the position this draft would take
			var tok int32
			if ahead {
				tok = l.ahead[i]
			} else {
				tok = l.smp.pick(a.penalised(logits[i*vocab:(i+1)*vocab]), a.req.Sampling, pos)
			}
			a.mtpDrafts = append(a.mtpDrafts, tok)
			if len(a.mtpDrafts) < l.chainDepth(a) {
				// The head at pos-1 reads the draft at pos and its own output behind logits row i.
				l.draftRows = append(l.draftRows, batch.DraftRow{Base: a.sess.base, Pos: pos - 1, Token: tok, Source: i, Logits: true, Chained: true})
				chaining = append(chaining, a)
			}
		}
		l.drafting = chaining
	}
}

// chainDepth returns how many tokens the MTP head may draft for a after its newest: its MTP
// depth, as far as the stream may use them (its token limit, its reader's room), its session holds
// the head's keys and values (a draft for position p writes them at p-2) and the context reaches,
// and as deep as paceHead allows: one deeper than pricing granted last time, or no deeper while
// the head's next draft did not pay. A step of the chain costs a call of the head, a good part of
// a forward on a small model, for a draft pricing would drop; the one more lets the grant grow back. A stream that copies (n-gram drafts on) chains none while its context has a
// copy to propose: there a copy lands about as often as the head's guess and costs no step of the
// head (those steps ran a lone stream of the bundled model with MTP and copies at 54 to 70% of the
// speed of copies alone, on the H200). The head is kept for what copying cannot guess, and still
// fed every position, so its keys and values follow the stream.
func (l *laneState) chainDepth(a *active) int {
	if !a.decoding() || a.req.Drafts.NGram > 0 && a.ngram.copies(a.tokens) {
		return 0
	}
	n := len(a.tokens)
	return max(0, min(a.req.Drafts.MTP, a.headCap, a.req.MaxTokens-a.produced-1, a.room()-1,
		a.sess.capacity-n+2, l.h.model.Context()-n))
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
