package scheduler

import (
	"fmt"
	"math"
	"slices"
)

// ConstraintState is a Constraint's position: an opaque value that the constraint makes and
// reads. Advancing returns a new state and leaves the old one as it was, so drafts can be tried
// from a stream's state without changing it.
type ConstraintState = any

// Constraint limits the tokens a stream may generate, such as a grammar that keeps a reply valid
// JSON. At each position the sampler sees only the tokens the constraint allows (the others'
// logits are -inf before the keyed draw, and greedy takes the argmax over the allowed), so the
// reply is still a pure function of prompt, settings and seed. A stop token is allowed exactly
// where the constraint accepts. Implementations must be safe for concurrent use by many streams.
type Constraint interface {
	// Start returns the state before the first generated token.
	Start() ConstraintState
	// Allowed sets in mask, one bit per id of the model's vocabulary (bit id&63 of word id>>6),
	// the tokens that may follow s; mask arrives cleared.
	Allowed(s ConstraintState, mask []uint64)
	// Advance returns the state after token id, and false if id may not follow s.
	Advance(s ConstraintState, id int32) (ConstraintState, bool)
	// Accepting reports whether the tokens so far make a whole reply: a stop token may come.
	Accepting(s ConstraintState) bool
}

// constrained is a constrained stream's part of its active state: where the constraint stands
// after the stream's tokens, and buffers for the masks. It lives as long as the stream, across
// the lone driver, shared rounds and moves between sessions.
type constrained struct {
	c      Constraint
	state  ConstraintState
	mask   []uint64
	masked []float32 // the row's logits, -inf where the mask is clear
}

func newConstrained(c Constraint, vocab int) *constrained {
	return &constrained{c: c, state: c.Start(), mask: make([]uint64, (vocab+63)/64), masked: make([]float32, vocab)}
}

// apply returns the logits with every token the constraint refuses at -inf, stop tokens allowed
// where it accepts. When it allows nothing, it returns false and why the stream ends: it stops
// if the constraint accepts (there is no stop token to write), else the vocabulary cannot go on.
func (k *constrained) apply(logits []float32, stops []int32) ([]float32, bool, Event) {
	clear(k.mask)
	k.c.Allowed(k.state, k.mask)
	accepting := k.c.Accepting(k.state)
	if accepting {
		for _, t := range stops {
			if t >= 0 && int(t) < len(k.masked) {
				k.mask[t>>6] |= 1 << (t & 63)
			}
		}
	}
	some, inf := false, float32(math.Inf(-1))
	for w, bits := range k.mask { // a word at a time: masks are mostly all clear or all set
		lo := w * 64
		hi := min(lo+64, len(logits))
		switch {
		case lo >= hi:
		case bits == 0:
			for id := lo; id < hi; id++ {
				k.masked[id] = inf
			}
		case bits == ^uint64(0):
			copy(k.masked[lo:hi], logits[lo:hi])
			some = true
		default:
			for id := lo; id < hi; id++ {
				k.masked[id] = inf
				if bits>>(id-lo)&1 == 1 {
					k.masked[id], some = logits[id], true
				}
			}
		}
	}
	switch {
	case some:
		return k.masked, true, Event{}
	case accepting:
		return nil, false, Event{Done: true, Reason: FinishStop, StopToken: -1}
	}
	return nil, false, Event{Done: true, Reason: FinishError, Err: fmt.Errorf("scheduler: the output constraint allows no token of the vocabulary here: the reply so far stands; loosen the constraint (response_format)")}
}

// advance moves the state past a generated token; a stop token ends the stream and moves nothing.
func (k *constrained) advance(tok int32) {
	if next, ok := k.c.Advance(k.state, tok); ok {
		k.state = next
	}
}

// cut returns the longest prefix of drafts the constraint allows from the stream's state, so no
// row is spent on a draft that the masked target could never pick; verification keeps a draft
// only while it equals the target's pick, so the reply is the same either way.
func (k *constrained) cut(drafts, stops []int32) []int32 {
	s := k.state
	for i, d := range drafts {
		if slices.Contains(stops, d) {
			if k.c.Accepting(s) {
				return drafts[:i+1] // nothing follows a stop token
			}
			return drafts[:i]
		}
		next, ok := k.c.Advance(s, d)
		if !ok {
			return drafts[:i]
		}
		s = next
	}
	return drafts
}
