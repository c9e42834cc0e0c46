package scheduler

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"tfd/batch"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// toyModel is a deterministic stand-in for the engine: a row's logits are a hash of the tokens in
// its session up to its position, so a reply depends on the whole context the way a real model's
// does. gate, when set, blocks each Forward until a value arrives.
type toyModel struct {
	vocab, context int
	slots          []int32
	logits         []float32
	gate           chan struct{}
	mu             sync.Mutex // guards forwards
	forwards       int
}

func newToy(vocab, context int) *toyModel {
	return &toyModel{vocab: vocab, context: context, slots: make([]int32, context)}
}

func (m *toyModel) Forward(ctx context.Context, rows []batch.Row) ([]float32, error) {
	if m.gate != nil {
		select {
		case <-m.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	m.mu.Lock()
	m.forwards++
	m.mu.Unlock()
	m.logits = m.logits[:0]
	for _, r := range rows {
		m.slots[r.Base+r.Pos] = r.Token
	}
	for _, r := range rows {
		if !r.Logits {
			continue
		}
		h := uint64(r.Pos)
		for _, t := range m.slots[r.Base : r.Base+r.Pos+1] {
			h = mix(h ^ uint64(t))
		}
		for i := range m.vocab {
			m.logits = append(m.logits, float32(mix(h+uint64(i))%1000)/100)
		}
	}
	return m.logits, nil
}

func (m *toyModel) Vocab() int   { return m.vocab }
func (m *toyModel) MaxRows() int { return 4 }
func (m *toyModel) Slots() int   { return m.context }
func (m *toyModel) Context() int { return m.context }

func (m *toyModel) MoveKV(dst, src, n int) error {
	copy(m.slots[dst:dst+n], m.slots[src:src+n])
	return nil
}

// collect reads a stream to its end.
func collect(t *testing.T, events <-chan Event) ([]int32, Event) {
	t.Helper()
	var toks []int32
	for ev := range events {
		if ev.Done {
			return toks, ev
		}
		toks = append(toks, ev.Token)
	}
	t.Fatal("stream closed without a terminal event")
	return nil, Event{}
}

func closeHost(t *testing.T, h Host) {
	t.Helper()
	if err := h.Close(context.Background()); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func TestSerialGreedyIsRepeatableAndEndsByLength(t *testing.T) {
	h := NewSerial(newToy(32, 64), SharedOptions{})
	defer closeHost(t, h)
	req := Request{Prompt: []int32{1, 2, 3, 4, 5, 6, 7}, MaxTokens: 10}
	var first []int32
	for i := range 2 {
		events, err := h.Submit(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		toks, end := collect(t, events)
		if end.Reason != FinishLength || len(toks) != 10 {
			t.Fatalf("got %d tokens ending %q, want 10 ending length", len(toks), end.Reason)
		}
		if i == 0 {
			first = toks
		} else if !slices.Equal(first, toks) {
			t.Fatalf("second run %v differs from first %v", toks, first)
		}
	}
}

func TestSerialStopsAtStopTokenAndContext(t *testing.T) {
	h := NewSerial(newToy(32, 64), SharedOptions{})
	defer closeHost(t, h)
	prompt := []int32{9, 8, 7}
	events, _ := h.Submit(context.Background(), Request{Prompt: prompt, MaxTokens: 20})
	toks, _ := collect(t, events)
	stop := toks[5]
	events, _ = h.Submit(context.Background(), Request{Prompt: prompt, MaxTokens: 20, StopTokens: []int32{stop}})
	got, end := collect(t, events)
	if end.Reason != FinishStop || end.StopToken != stop || !slices.Equal(got, toks[:slices.Index(toks, stop)]) {
		t.Fatalf("with stop token %d: got %v ending %+v; unstopped reply was %v", stop, got, end, toks)
	}
	events, _ = h.Submit(context.Background(), Request{Prompt: prompt, MaxTokens: 1000})
	got, end = collect(t, events)
	if end.Reason != FinishLength || len(prompt)+len(got) != 64 {
		t.Fatalf("a reply past the context gave %d tokens ending %q, want %d ending length", len(got), end.Reason, 64-len(prompt))
	}
}

func TestSerialRefusesWhatCannotRun(t *testing.T) {
	h := NewSerial(newToy(32, 16), SharedOptions{})
	defer closeHost(t, h)
	var tooLong *PromptTooLongError
	if _, err := h.Submit(context.Background(), Request{Prompt: make([]int32, 16), MaxTokens: 1}); !errors.As(err, &tooLong) {
		t.Fatalf("16-token prompt in a 16-token context: err = %v, want PromptTooLongError", err)
	}
	if _, err := h.Submit(context.Background(), Request{Prompt: []int32{1}, MaxTokens: 0}); err == nil {
		t.Fatal("max tokens 0 accepted")
	}
	if _, err := h.Submit(context.Background(), Request{Prompt: []int32{99}, MaxTokens: 1}); err == nil {
		t.Fatal("token outside the vocabulary accepted")
	}
}

func TestSerialCancellationAndQueueBound(t *testing.T) {
	m := newToy(32, 64)
	m.gate = make(chan struct{})
	h := NewSerial(m, SharedOptions{Queue: 1})
	defer closeHost(t, h)
	ctx, cancel := context.WithCancel(context.Background())
	running, err := h.Submit(ctx, Request{Prompt: []int32{1}, MaxTokens: 50})
	if err != nil {
		t.Fatal(err)
	}
	m.gate <- struct{}{} // the lane has taken the first stream off the queue
	waiting, err := h.Submit(context.Background(), Request{Prompt: []int32{2}, MaxTokens: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Submit(context.Background(), Request{Prompt: []int32{3}, MaxTokens: 2}); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("third request with a queue of 1: err = %v, want ErrQueueFull", err)
	}
	m.gate <- struct{}{}
	<-running // one token out
	cancel()
	// Let forwards run freely: the stream ends at the next round boundary, and the forward the
	// lane may be waiting in (under the host's context, in a shared round) must be able to end.
	close(m.gate)
	if _, end := collect(t, running); end.Reason != FinishCancelled {
		t.Fatalf("cancelled stream ended %q", end.Reason)
	}
	if toks, end := collect(t, waiting); end.Reason != FinishLength || len(toks) != 2 {
		t.Fatalf("queued stream: %d tokens ending %q", len(toks), end.Reason)
	}
}

func TestSerialCloseCancelsAfterGrace(t *testing.T) {
	m := newToy(32, 64)
	m.gate = make(chan struct{}) // never opened: the stream cannot finish by itself
	h := NewSerial(m, SharedOptions{})
	events, err := h.Submit(context.Background(), Request{Prompt: []int32{1}, MaxTokens: 5})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := h.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close = %v, want deadline exceeded", err)
	}
	if _, end := collect(t, events); end.Reason != FinishCancelled {
		t.Fatalf("stream ended %q after Close, want cancelled", end.Reason)
	}
	if _, err := h.Submit(context.Background(), Request{Prompt: []int32{1}, MaxTokens: 1}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Submit after Close: %v, want ErrClosed", err)
	}
}

// warmToy counts keep-warm ticks.
type warmToy struct {
	*toyModel
	mu    sync.Mutex // guards ticks
	ticks int
}

func (m *warmToy) Warm() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ticks++
	return nil
}

func (m *warmToy) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ticks
}

// TestKeepWarmTicksOnlyInItsWindow: an idle host ticks the model every WarmTick while within
// KeepWarm of its last forward, and stops after.
func TestKeepWarmTicksOnlyInItsWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &warmToy{toyModel: newToy(32, 64)}
		h, err := NewShared(m, SharedOptions{Layout: []int{64}, KeepWarm: 100 * time.Millisecond, WarmTick: 5 * time.Millisecond, Warmer: m})
		if err != nil {
			t.Fatal(err)
		}
		defer closeHost(t, h)
		time.Sleep(time.Second)
		if n := m.count(); n != 0 {
			t.Fatalf("%d ticks before any work", n)
		}
		events, _ := h.Submit(context.Background(), Request{Prompt: []int32{1, 2}, MaxTokens: 3})
		collect(t, events)
		time.Sleep(300 * time.Millisecond) // the window, and then some
		if n := m.count(); n != 100/5 {
			t.Fatalf("%d ticks in a 100 ms window at one per 5 ms, want %d", n, 100/5)
		}
	})
}
