package scheduler

import "tfd/batch"

// The lone driver's drafted chains: a greedy stream alone that drafts with the MTP head runs its
// drafted forwards as a chain on the device (batch.DraftChainer). Each step feeds the newest token
// and the head's drafts, verifies them and drafts again there; the lane takes each step's verdict,
// a few ints, as it would take a round's verified tokens, and looks for arrivals between steps.

// draftChainDepth returns the depth of the drafted chain the lone driver may start for a, or 0
// where it runs none: the model runs no drafted chains, the stream's tokens are not the raw
// argmax (rawArgmax), its context has a copy to propose (copying), the MTP head has no drafts for
// it yet, pricing grants a round of one stream none of them, or its session has no room for one
// step. The depth is the head's drafts that pricing grants, as for a drafted forward of the
// stream alone; the chain keeps it while pricing does. Where pricing refuses even the head's
// first draft on the device, the cheapest place it drafts, the stream drops the head (headOff).
func (l *laneState) draftChainDepth(a *active) int {
	if !l.chainsDrafts(a) || a.req.Drafts.MTP <= 0 || a.headOff || len(a.mtpDrafts) == 0 || copying(a) {
		return 0
	}
	depth := l.pricedChainDepth(a)
	if depth == 0 && a.headRefused {
		a.headOff = true
	}
	if depth == 0 || !l.draftStepFits(a, 0, depth) {
		return 0
	}
	return depth
}

// chainsDrafts reports whether a's drafts from the MTP head can run as drafted chains on the
// device: the model runs them and the stream's tokens are the raw argmax.
func (l *laneState) chainsDrafts(a *active) bool {
	return l.drafts != nil && rawArgmax(a)
}

// pricedChainDepth returns how many of the MTP head's drafts for a pricing grants a step of a
// drafted chain of the stream alone, by the landing figures as they stand. It weighs the head's
// drafts alone: a chain runs only while there is no copy, and asking the n-gram index for one
// with the head's drafts after the newest token would index that token's n-grams, after which
// the index finds no earlier copy there (copying).
func (l *laneState) pricedChainDepth(a *active) int {
	spare := logitLimit(l.h.model) - 1
	k := max(l.draftRoom(a, spare), 0)
	a.drafts = append(a.drafts[:0], a.mtpDrafts[:min(len(a.mtpDrafts), k)]...)
	a.fromHead = len(a.drafts)
	l.decoding = append(l.decoding[:0], a)
	l.price(l.decoding, spare, true)
	return min(len(a.drafts), a.fromHead)
}

// copying reports whether a stream that copies n-grams has a copy to propose. Copies are proposed
// on the host from the tokens each step accepted, which a chain on the device would wait for, so
// while there is one the stream drafts a forward at a time; while there is none its drafts are
// the MTP head's alone (chainDepth), which a drafted chain makes on the device.
func copying(a *active) bool {
	return a.req.Drafts.NGram > 0 && a.ngram.copies(a.tokens)
}

// draftStepFits reports whether a step of depth drafts may follow ahead untaken steps: each step
// advances the stream by 1 to depth+1 tokens, so the step's rows, and the head's chained rows up
// to depth-1 past its last accepted one, must stay within the session and the context however
// many landed before it; the reader must have room for every token the untaken steps and this
// one could make; and the stream must still want a token after the fewest those steps make.
func (l *laneState) draftStepFits(a *active, ahead, depth int) bool {
	reach := a.fed + ahead*(depth+1) + 2*depth // its head's last chained row at reach-1, turned by RoPE as reach
	return reach < min(a.sess.capacity, l.h.model.Context()) &&
		(ahead+1)*(depth+1) <= a.room() &&
		ahead < a.req.MaxTokens-a.produced
}

// draftChain runs a greedy lone stream's drafted forwards as a chain on the device, depth drafts
// a step, as chain runs greedy steps: it keeps batch.ChainAhead steps enqueued while the stream
// has room for them, has no copy to propose, pricing has not refused depth drafts for
// chainPatience verdicts in a row (drafts that stop landing end the chain, and the driver prices
// again), and the lane is not interrupted, and takes each step's verdict as a round's verified
// tokens (takeVerdict). A newcomer waits for the step running when it arrives and at most one
// more. After a stop token or a cancelled request the rest are dropped; the slots they
// wrote are past the stream's tokens and never read. It reports whether the lane was interrupted.
func (l *laneState) draftChain(a *active, depth int) (interrupted bool) {
	row := batch.Row{Base: a.sess.base, Pos: a.fed, Token: a.tokens[a.fed], Logits: true}
	if err := l.drafts.StartDraftChain(a.live, row, a.drafts[:depth]); err != nil {
		a.endCancelledOrFailed(err)
		return false
	}
	ahead := 0   // steps enqueued whose verdicts are not taken
	refused := 0 // verdicts in a row after which pricing granted fewer than depth drafts
	for !a.done && a.live.Err() == nil {
		for !interrupted && ahead < batch.ChainAhead && l.draftStepFits(a, ahead, depth) && !copying(a) && refused < chainPatience {
			if err := l.drafts.Step(); err != nil {
				a.endCancelledOrFailed(err)
				return interrupted
			}
			ahead++
		}
		if ahead == 0 {
			break
		}
		accepted, next, err := l.drafts.Verdict()
		l.lastWork = l.now()
		ahead--
		if err != nil {
			a.endCancelledOrFailed(err)
			break
		}
		l.takeVerdict(a, depth, accepted, next)
		if l.pricedChainDepth(a) < depth {
			refused++
		} else {
			refused = 0
		}
		interrupted = interrupted || l.interrupted()
	}
	return interrupted
}

// chainPatience is how many verdicts in a row pricing must grant a drafted chain fewer drafts
// than its depth before the chain ends: a chain's depth only shrinks within a reply, so a few
// misses in a row, which move the landing figures for a step or two, must not end it.
const chainPatience = 4

// takeVerdict sends a step's accepted tokens (its landed drafts, then the target's own) as verify
// would have from the step's logits, counts its drafts, and keeps the head's next drafts as the
// stream's MTP chain, for the next step or the round it is handed to.
func (l *laneState) takeVerdict(a *active, depth int, accepted, next []int32) {
	context := l.h.model.Context()
	a.drafted += depth // before a token may end the stream, whose end reports the count
	a.host.drafts.proposed(depth, depth)
	verified, landed := 0, 0
	for i, tok := range accepted {
		running := a.accept(Event{Token: tok}, context)
		switch {
		case !running || i == depth:
			verified, landed = i, i
		case i == len(accepted)-1:
			verified, landed = i+1, i // draft i missed: tok is the target's own
		default:
			a.accepted++ // draft i landed: its row's keys and values stand
			a.host.drafts.landed(i, depth)
			continue
		}
		break
	}
	l.landing[0].note(verified, landed)
	a.mtpDrafts = append(a.mtpDrafts[:0], next...)
}
