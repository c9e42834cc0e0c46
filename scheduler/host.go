package scheduler

import (
	"context"

	"tfd/batch"
)

// Model is what the scheduler needs of the engine: one forward over rows of many sessions.
type Model interface {
	// Forward runs the rows (at most MaxRows) and returns the logits of the rows that asked for
	// them, in row order, as one slice of n×Vocab() values. The slice is owned by the model and
	// valid until the next call. A row's logits are the same bits whatever rows share the call.
	Forward(ctx context.Context, rows []batch.Row) ([]float32, error)
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

// LogitRower is an optional interface of a Model whose forwards take more rows than may ask for
// their logits or picks (engine.Options.LogitRows): rows past that are a prompt's, which ask for
// none but the newest token's.
type LogitRower interface {
	// LogitRows returns the most rows of one Forward, or of one step of the MTP head, that
	// ask for their logits or picks; at most MaxRows.
	LogitRows() int
}

// logitLimit is the most rows of one forward of m that may ask for their logits or picks.
func logitLimit(m Model) int {
	if r, ok := m.(LogitRower); ok {
		return min(r.LogitRows(), m.MaxRows())
	}
	return m.MaxRows()
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
