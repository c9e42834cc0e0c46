package scheduler

import "context"

// Row is one token of one session in a forward.
type Row struct {
	// Base is the session's first KV slot; the token's keys and values go to slot Base+Pos.
	Base int
	// Pos is the token's absolute position in its sequence.
	Pos int
	// Token is the input token id.
	Token int32
	// Logits asks for this row's logits.
	Logits bool
}

// Model is what the scheduler needs of the engine: one forward over rows of many sessions.
type Model interface {
	// Forward runs the rows (at most MaxRows) and returns the logits of the rows that asked for
	// them, in row order, as one slice of n×Vocab() values. The slice is owned by the model and
	// valid until the next call. A row's logits are the same bits whatever rows share the call.
	Forward(ctx context.Context, rows []Row) ([]float32, error)
	// Vocab returns the length of a logits row.
	Vocab() int
	// MaxRows returns the most rows one Forward takes.
	MaxRows() int
	// Slots returns the KV slots available to sessions.
	Slots() int
	// Context returns the longest sequence (prompt plus reply) the model runs.
	Context() int
	// MoveKV copies the keys and values of n slots starting at src to the slots starting at dst,
	// bits unchanged: a session moving to a larger one.
	MoveKV(dst, src, n int) error
}

// Host admits requests and runs them on a model.
type Host interface {
	// Submit queues req and returns the channel its events arrive on; the channel is closed after
	// the event with Done set. The stream is cancelled when ctx ends. Submit fails at once with
	// ErrQueueFull, ErrClosed or *PromptTooLongError. The caller must read the channel until it
	// is closed: the terminal event is always delivered.
	Submit(ctx context.Context, req Request) (<-chan Event, error)
	// Close stops admitting, lets running streams finish until ctx ends, then cancels the rest;
	// it returns when every stream has ended.
	Close(ctx context.Context) error
}

// DraftRow is one position of a stream fed to a model's MTP head after a Forward: the head reads
// the hidden state that the Forward's row Source computed at position Pos, and Token, the token at
// Pos+1.
type DraftRow struct {
	Base   int // the session's first KV slot
	Pos    int
	Token  int32
	Source int  // index of the row in the last Forward
	Logits bool // ask for the draft logits of the token at Pos+2
}

// Warmer is what a Model on a GPU offers to keep the device ready between requests: Warm runs a
// token amount of real work on it and waits.
type Warmer interface {
	Warm() error
}

// Drafter is what a Model offers when it has an MTP head. The scheduler checks for it at run time,
// as net/http checks for a Flusher.
type Drafter interface {
	// HasMTP reports whether the head is there.
	HasMTP() bool
	// Draft runs the head over rows that follow the last Forward (before the next one) and
	// returns the draft logits of the rows that asked, as Forward does.
	Draft(ctx context.Context, rows []DraftRow) ([]float32, error)
}

// Chainer is what a Model offers when its backend can feed one forward's argmax to the next on
// the device: the lone driver then makes a greedy stream's tokens several per call.
type Chainer interface {
	// CanChain reports whether chains run here.
	CanChain() bool
	// MaxChainLen returns the most tokens one GreedyChain makes.
	MaxChainLen() int
	// GreedyChain feeds row (a session's newest token), then each chosen token one place further,
	// n forwards in all, and returns the n argmax tokens: the same tokens as n Forward calls.
	GreedyChain(ctx context.Context, row Row, n int) ([]int32, error)
}
