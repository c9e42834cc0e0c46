package batch

import "context"

// The optional abilities of a model, beyond the forward every model runs. A model offers each
// only where it is real (the engine returns a nil interface where its checkpoint has no MTP head
// or its backend runs no chains), as net/http's ResponseWriter is a Flusher only where it can
// flush; whoever is given one uses it and never asks whether it works.

// Warmer keeps a device ready between requests: Warm runs a token amount of real work on it and
// waits.
type Warmer interface {
	Warm() error
}

// Picker is a model whose forward can hand back a row's greedy pick instead of its logits, taken
// where the logits are (on a GPU, a token a row crosses to the host instead of a vocabulary of
// floats): for a stream whose next token is the raw argmax.
type Picker interface {
	// ForwardPicks runs rows as Forward does and returns the logits of the rows with Logits set
	// and the picks of the rows with Pick set (Argmax of each row's logits, the same bits), each
	// in row order. Both slices are the model's, valid until its next call.
	ForwardPicks(ctx context.Context, rows []Row) ([]float32, []int32, error)
}

// Drafter is a model's MTP head.
type Drafter interface {
	// Draft runs the head over rows that follow the model's last Forward (before the next one)
	// and returns the draft logits of the rows that asked, as Forward does.
	Draft(ctx context.Context, rows []DraftRow) ([]float32, error)
}

// StepSharer is a Drafter that knows what a step of its head reads against a forward of one
// row: StepShare returns the share, the head's weights and the output head over every weight a
// forward reads. Decoding reads each weight once a row, so where reading weights is the work a
// step costs the device about that share of a forward; pricing weighs the head's steps in a
// drafted chain on the device by it.
type StepSharer interface {
	StepShare() float64
}

// Chainer runs a greedy stream's forwards as a chain on the device: each forward's argmax is the
// next forward's token without the host choosing it. The caller commits to one forward at a time:
// it enqueues a step (Step), takes the token of the oldest step not yet taken (Token), and may stop
// after any token; a step it has not enqueued never runs. Where the device runs behind the host (a
// GPU's stream) a step starts as soon as the one before it ends, so a caller that keeps ChainAhead
// steps untaken keeps the device busy and the host's round trip off the tokens' path; elsewhere a
// step runs when its token is taken.
type Chainer interface {
	// StartChain makes row, a session's newest token at its position, the input of the chain's
	// first step. Steps of an earlier chain whose tokens were not taken are dropped.
	StartChain(ctx context.Context, row Row) error
	// Step enqueues the chain's next forward, of the token the step before it chose (row's token
	// for the first) one position further, and returns without waiting for it. It fails when
	// the position would pass the model's context or the session's slots, or when more than
	// ChainAhead steps wait untaken.
	Step() error
	// Token waits for the oldest step whose token has not been taken and returns that token: the
	// argmax of the step's logits, ties to the lowest id, the token a Forward's logits give.
	Token() (int32, error)
}

// DraftChainer runs a greedy stream's drafted forwards as a chain on the device: each step is one
// forward of the stream's newest token and the MTP head's drafts after it, the drafts verified
// against the forward's argmaxes, and the head run from the last accepted position for the next
// step's drafts, all without the host; the host reads back a few ints a step (Verdict). It
// commits to one step at a time as Chainer does, with the same StartDraftChain/Step/Verdict
// rhythm and at most ChainAhead steps untaken. A step advances the stream by 1 to depth+1 tokens,
// which only its verdict says; Step checks the room for the most.
type DraftChainer interface {
	// StartDraftChain makes row, a session's newest token at its position, and drafts, the MTP
	// head's drafts for the positions after it (1 or more: the chain's depth), the first step's
	// rows. It must follow a Forward that fed the positions before row (or a chain's step) and
	// the MTP head's Draft calls after it, so that the head's keys and values stand. Steps of an
	// earlier chain whose verdicts were not taken are dropped.
	StartDraftChain(ctx context.Context, row Row, drafts []int32) error
	// Step enqueues the chain's next drafted forward and returns without waiting for it. It fails
	// when the most the step could reach would pass the model's context or the pool's slots, or
	// when more than ChainAhead steps wait untaken.
	Step() error
	// Verdict waits for the oldest untaken step and returns what it accepted: the drafts that
	// landed, then the target's own token after them (the tokens a Forward's logits give
	// greedily), and the head's drafts for the positions after those. Both slices are the
	// chainer's, valid until the next call.
	Verdict() (accepted, next []int32, err error)
}

// ChainAhead is how many steps of a chain may wait untaken: one running on the device and one
// queued behind it, so that the next starts the moment the running one ends while the host reads
// the running one's token. More would let the device run further past a newly arrived request.
const ChainAhead = 2

// Stateful is a model whose sessions carry a recurrent state besides their keys and values (a
// hybrid model's DeltaNet layers). Keys and values are kept per position, so a session can be fed
// again from any position it holds; a state is kept only for a session's newest positions, so a
// session can be fed again only from just after one of those. A model whose sliding-window
// layers keep their keys and values in rings bounded by the window is Stateful too: a session can
// be fed again only from a position whose window its ring still holds.
type Stateful interface {
	// Resumable returns the largest position p ≤ want from which the session at base can be fed
	// next: 0, or one past a position whose state it keeps.
	Resumable(base, want int) int
	// StateDepth returns how many of its newest positions' states a session keeps: a forward that
	// feeds a session's newest token and d drafts after it can resume after any of them when
	// d < StateDepth.
	StateDepth() int
}
