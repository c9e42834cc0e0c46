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

// Drafter is a model's MTP head.
type Drafter interface {
	// Draft runs the head over rows that follow the model's last Forward (before the next one)
	// and returns the draft logits of the rows that asked, as Forward does.
	Draft(ctx context.Context, rows []DraftRow) ([]float32, error)
}

// Chainer runs greedy chains on the device: one forward's argmax feeds the next without the host,
// so the lone driver makes a greedy stream's tokens several per call.
type Chainer interface {
	// MaxChainLen returns the most tokens one GreedyChain makes.
	MaxChainLen() int
	// GreedyChain feeds row (a session's newest token), then each chosen token one place further,
	// n forwards in all, and returns the n argmax tokens: the same tokens as n Forward calls.
	GreedyChain(ctx context.Context, row Row, n int) ([]int32, error)
}
