package scheduler

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// active is a stream that holds a session: its sequence so far and how much of it the model has
// seen. Only the lane goroutine touches it.
type active struct {
	*stream
	host     *Shared
	live     context.Context // the request's context (stream.ctx), also ended when the host gives up on Close
	cancel   context.CancelFunc
	stopHost func() bool // detaches live from the host's context
	sess     *session
	tokens   []int32 // the prompt, then the generated tokens
	fed      int     // tokens whose keys and values are in the session; moved only by feed
	produced int
	done     bool

	ngram     ngramIndex
	mtpDrafts []int32 // the MTP head's chain of guesses for the tokens after the newest
	copied    []int32 // the n-gram index's proposal after mtpDrafts, reused from round to round
	drafts    []int32 // this round's proposals, fed after the newest token
	fromHead  int     // how many of drafts, from the first, the MTP head made; the rest are copies
	granted   int     // how many drafts pricing granted its last forward
	drafted   int
	accepted  int
	cached    int // prompt tokens whose keys and values the session held or the prompt cache restored
	offered   int // the whole blocks it fed that it offered to the prompt cache
	pen       penaltyState
	admitted  time.Time
	lone      bool // its newest forward ran on the lone driver

	// How deep the MTP head may chain next (paceHead), and after a refusal the priced rounds it
	// waits before it tries one deeper and how long it waited last.
	headCap, headWait, headBackoff int
	headRefused                    bool // pricing refused the head's next draft in its last priced round
	// headOff: the head's first draft did not pay for this stream alone on the lone driver, so the
	// head is neither fed nor asked for drafts for the rest of its reply (loneDrafted).
	headOff bool

	constrained *constrained // the request's Constraint and where it stands, or nil
}

// newActive makes st the holder of sess, counted in h's Stats until it ends. The session still
// holds the keys and values of the prompt's first kept tokens.
func newActive(st *stream, sess *session, h *Shared, kept int) *active {
	live, cancel := context.WithCancel(st.ctx)
	a := &active{
		stream:   st,
		host:     h,
		live:     live,
		fed:      kept,
		cached:   kept,
		cancel:   cancel,
		stopHost: context.AfterFunc(h.hostCtx, cancel),
		sess:     sess,
		admitted: time.Now(),
		granted:  maxDepth, // nothing priced yet: the MTP head may chain as deep as asked
		headCap:  maxDepth,
		tokens:   append(make([]int32, 0, len(st.req.Prompt)+min(st.req.MaxTokens, 4096)), st.req.Prompt...),
	}
	if st.req.Constraint != nil {
		a.constrained = newConstrained(st.req.Constraint, h.model.Vocab())
	}
	sess.holder = a
	h.countActive(+1)
	return a
}

// decoding reports whether only the newest token is left to feed: the stream makes one token a
// round. Before that it is prefilling its prompt.
func (a *active) decoding() bool { return a.fed == len(a.tokens)-1 }

// canEmit reports whether the reader has left room for another token and the terminal event.
func (a *active) canEmit() bool { return a.room() >= 1 }

// room returns how many tokens the stream may send before its reader must catch up, keeping a
// slot for the terminal event.
func (a *active) room() int { return cap(a.events) - len(a.events) - 1 }

// needsRoom reports whether the stream has filled its session and must move to a larger one
// before it can feed another token.
func (a *active) needsRoom() bool { return a.fed == a.sess.capacity && a.fed < len(a.tokens) }

// ready reports whether the stream can take part in the next forward.
func (a *active) ready() bool { return !a.done && a.canEmit() && !a.needsRoom() }

// step takes the logits that follow the stream's newest token, picks the next token and sends
// it; it reports the token and whether the stream goes on. It ends the stream on a stop token, at
// its token limit, or at the end of the context.
func (a *active) step(smp *sampler, logits []float32, context int) (int32, bool) {
	allowed := a.penalised(logits)
	if a.constrained != nil {
		var ok bool
		var end Event
		if allowed, ok, end = a.constrained.apply(allowed, a.req.StopTokens); !ok {
			a.end(end)
			return -1, false
		}
	}
	tok := smp.pick(allowed, a.req.Sampling, len(a.tokens))
	ev := Event{Token: tok}
	if a.req.Logprobs {
		ev.Logprob, ev.Top = smp.logprobs(logits, tok, a.req.TopLogprobs)
	}
	return tok, a.accept(ev, context)
}

// accept makes ev's token the stream's next token and sends ev; it reports whether the stream
// goes on. It ends the stream on a stop token, at its token limit, or at the end of the context.
func (a *active) accept(ev Event, context int) bool {
	a.feed(1) // the token ev follows was fed: its keys and values stand
	tok := ev.Token
	if slices.Contains(a.req.StopTokens, tok) {
		a.end(Event{Done: true, Reason: FinishStop, StopToken: tok})
		return false
	}
	a.events <- ev // the room was checked when the stream joined the forward
	if a.lone {
		a.host.byDriver[0].Add(1)
	} else {
		a.host.byDriver[1].Add(1)
	}
	a.tokens = append(a.tokens, tok)
	if a.constrained != nil {
		a.constrained.advance(tok)
	}
	a.produced++
	if a.produced == a.req.MaxTokens || len(a.tokens) >= context {
		a.end(Event{Done: true, Reason: FinishLength})
		return false
	}
	return true
}

// verify runs after a forward that fed the newest token and then the drafts: row i of logits, or
// picks[i] where the pick was made already (picks not nil: by the model, or ahead by prepick, with
// its log-probabilities in lps[i] where the stream asked for them), follows draft i-1. It picks the
// target's token after each row and keeps going while the target's pick equals the draft just fed,
// so the reply is the one it would be without drafts; the first mismatch is replaced by the
// target's own token.
//
// It returns how many drafts were verified and how many of those landed: all verified drafts but
// a missed last one land.
func (a *active) verify(smp *sampler, logits []float32, picks []int32, lps []Event, vocab, context int) (verified, landed int) {
	a.drafted += len(a.drafts)
	a.host.drafts.proposed(len(a.drafts), a.fromHead) // before a token may end the stream
	for i := 0; ; i++ {
		var tok int32
		var running bool
		if picks != nil {
			ev := Event{Token: picks[i]}
			if lps != nil {
				ev.Logprob, ev.Top = lps[i].Logprob, lps[i].Top
			}
			tok, running = picks[i], a.accept(ev, context)
		} else {
			tok, running = a.step(smp, logits[i*vocab:(i+1)*vocab], context)
		}
		switch {
		case !running || i == len(a.drafts):
			return i, i
		case tok != a.drafts[i]:
			return i + 1, i
		}
		a.accepted++ // draft i was right: its row's keys and values stand
		a.host.drafts.landed(i, a.fromHead)
	}
}

// feed records that the keys and values of the stream's next n tokens stand in its session. It is
// the one place fed moves after admission.
func (a *active) feed(n int) { a.fed += n }

// end delivers the terminal event, closes the channel and frees the session.
func (a *active) end(ev Event) {
	if a.done {
		return
	}
	a.done = true
	a.host.lane.offer(a) // before the session is free: its keys and values still stand
	// The session is free, and counted so, before the reader hears the end.
	a.sess.holder, a.sess.kept = nil, a.tokens[:a.fed]
	a.host.countActive(-1)
	ev.Drafted, ev.Accepted, ev.Cached = a.drafted, a.accepted, a.cached
	a.host.noteHold(time.Since(a.admitted))
	a.finish(ev)
	a.stopHost()
	a.cancel()
}

// endCancelledOrFailed ends the stream after err: cancelled when its context ended, else an error.
func (a *active) endCancelledOrFailed(err error) {
	if a.live.Err() != nil {
		a.end(Event{Done: true, Reason: FinishCancelled})
		return
	}
	a.end(Event{Done: true, Reason: FinishError, Err: err})
}

// outgrown is the error of a stream longer than the largest session.
func outgrown(tokens, largest int) error {
	return fmt.Errorf("scheduler: the reply reached %d tokens and the largest session holds %d: the tokens sent stand; use a session layout with a larger session (sessions.layout) or a shorter reply", tokens, largest)
}
