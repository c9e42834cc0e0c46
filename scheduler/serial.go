package scheduler

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// SerialOptions configures a serial host.
type SerialOptions struct {
	// Queue bounds the requests waiting behind the running one; 0 means 64.
	Queue int
}

// Serial is the serial host: one reply at a time, in arrival order, on one session that spans the
// model's whole KV pool. Later requests wait in a bounded queue.
type Serial struct {
	model   Model
	queue   chan *stream
	hostCtx context.Context    // ends when Close gives up waiting
	stopAll context.CancelFunc // cancels hostCtx
	done    chan struct{}      // closed when the lane goroutine has ended

	mu     sync.Mutex // guards closed and sends on queue
	closed bool
}

// stream is one admitted request and the channel its events go to.
type stream struct {
	ctx    context.Context
	req    Request
	events chan Event
}

// NewSerial starts a serial host on m. Close stops it.
func NewSerial(m Model, opts SerialOptions) *Serial {
	if opts.Queue <= 0 {
		opts.Queue = 64
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Serial{
		model:   m,
		queue:   make(chan *stream, opts.Queue),
		hostCtx: ctx,
		stopAll: cancel,
		done:    make(chan struct{}),
	}
	go s.lane()
	return s
}

// Submit implements Host.
func (s *Serial) Submit(ctx context.Context, req Request) (<-chan Event, error) {
	if err := checkRequest(req, s.model); err != nil {
		return nil, err
	}
	st := &stream{ctx: ctx, req: req, events: make(chan Event, 16)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	select {
	case s.queue <- st:
		return st.events, nil
	default:
		return nil, ErrQueueFull
	}
}

// Close implements Host.
func (s *Serial) Close(ctx context.Context) error {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.queue)
	}
	s.mu.Unlock()
	select {
	case <-s.done:
		return nil
	case <-ctx.Done():
	}
	s.stopAll()
	<-s.done
	return ctx.Err()
}

// checkRequest refuses what no host could run.
func checkRequest(req Request, m Model) error {
	switch {
	case len(req.Prompt) == 0:
		return errors.New("scheduler: empty prompt")
	case req.MaxTokens <= 0:
		return fmt.Errorf("scheduler: max tokens must be positive, got %d", req.MaxTokens)
	case len(req.Prompt) >= m.Context() || len(req.Prompt) >= m.Slots():
		return &PromptTooLongError{Prompt: len(req.Prompt), Context: min(m.Context(), m.Slots()) - 1}
	}
	for _, t := range req.Prompt {
		if t < 0 || int(t) >= m.Vocab() {
			return fmt.Errorf("scheduler: prompt token %d outside the vocabulary of %d", t, m.Vocab())
		}
	}
	return nil
}

// lane runs the queued streams one after another until the queue is closed and drained.
func (s *Serial) lane() {
	defer close(s.done)
	var smp sampler
	for st := range s.queue {
		ctx, cancel := context.WithCancel(st.ctx)
		stop := context.AfterFunc(s.hostCtx, cancel)
		end := s.generate(ctx, st, &smp)
		stop()
		cancel()
		st.events <- end
		close(st.events)
	}
}

// generate prefills the prompt and decodes until a stop token, the token limit, the end of the
// context, cancellation or an error; it returns the terminal event.
func (s *Serial) generate(ctx context.Context, st *stream, smp *sampler) Event {
	req := st.req
	logits, err := s.prefill(ctx, req.Prompt)
	if err != nil {
		return endEvent(ctx, err)
	}
	limit := min(s.model.Context(), s.model.Slots())
	for pos, produced := len(req.Prompt), 0; ; pos++ {
		tok := smp.pick(logits, req.Sampling, pos)
		if isStop(tok, req.StopTokens) {
			return Event{Done: true, Reason: FinishStop, StopToken: tok}
		}
		ev := Event{Token: tok}
		if req.Logprobs {
			ev.Logprob = logprob(logits, tok)
		}
		select {
		case st.events <- ev:
		case <-ctx.Done():
			return Event{Done: true, Reason: FinishCancelled}
		}
		produced++
		if produced == req.MaxTokens || pos+1 >= limit {
			return Event{Done: true, Reason: FinishLength}
		}
		rows := []Row{{Base: 0, Pos: pos, Token: tok, Logits: true}}
		if logits, err = s.model.Forward(ctx, rows); err != nil {
			return endEvent(ctx, err)
		}
	}
}

// prefill runs the prompt in chunks of at most MaxRows rows and returns the last row's logits.
func (s *Serial) prefill(ctx context.Context, prompt []int32) ([]float32, error) {
	chunk := s.model.MaxRows()
	rows := make([]Row, 0, min(chunk, len(prompt)))
	var logits []float32
	for start := 0; start < len(prompt); start += chunk {
		end := min(start+chunk, len(prompt))
		rows = rows[:0]
		for pos := start; pos < end; pos++ {
			rows = append(rows, Row{Base: 0, Pos: pos, Token: prompt[pos], Logits: pos == len(prompt)-1})
		}
		var err error
		if logits, err = s.model.Forward(ctx, rows); err != nil {
			return nil, err
		}
	}
	return logits, nil
}

// endEvent turns a forward's error into the terminal event: cancelled when the stream's context
// ended, an error otherwise.
func endEvent(ctx context.Context, err error) Event {
	if ctx.Err() != nil {
		return Event{Done: true, Reason: FinishCancelled}
	}
	return Event{Done: true, Reason: FinishError, Err: err}
}

func isStop(tok int32, stops []int32) bool {
	for _, s := range stops {
		if tok == s {
			return true
		}
	}
	return false
}
