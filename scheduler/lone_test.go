package scheduler

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"tfd/batch"
)

// forwardTime is how long one forward takes on deviceToy's device, chain step or round.
const forwardTime = time.Millisecond

// deviceToy is the toy model with greedy chains (batch.Chainer) on a device simulated on
// synctest's clock: each forward, a round or a chain step, takes forwardTime, and the device runs
// one at a time, each from when it is enqueued or the one before it ends, whichever is later. A
// chain step's token is worked out when the step is enqueued (the toy is deterministic, and steps
// run in order) and handed over when the step ends. It logs when each step and each Forward
// started on the device.
type deviceToy struct {
	*toyModel
	busyUntil time.Time // when the device ends the work it has

	row    batch.Row // the next chain step's input
	queued []queuedStep
	steps  []time.Time // when each chain step started
	rounds []time.Time // when each Forward started
}

type queuedStep struct {
	token int32
	ends  time.Time
}

// run books forwardTime of the device for work enqueued now and returns when the work starts.
func (m *deviceToy) run() time.Time {
	start := time.Now()
	if m.busyUntil.After(start) {
		start = m.busyUntil
	}
	m.busyUntil = start.Add(forwardTime)
	return start
}

func (m *deviceToy) Forward(ctx context.Context, rows []batch.Row) ([]float32, error) {
	m.rounds = append(m.rounds, m.run())
	time.Sleep(time.Until(m.busyUntil))
	return m.toyModel.Forward(ctx, rows)
}

func (m *deviceToy) StartChain(_ context.Context, row batch.Row) error {
	m.row, m.queued = row, m.queued[:0]
	return nil
}

func (m *deviceToy) Step() error {
	if len(m.queued) == batch.ChainAhead {
		return errors.New("deviceToy: more steps untaken than batch.ChainAhead")
	}
	m.steps = append(m.steps, m.run())
	m.row.Logits = true
	logits, err := m.toyModel.Forward(context.Background(), []batch.Row{m.row})
	if err != nil {
		return err
	}
	tok := int32(0)
	for i, v := range logits {
		if v > logits[tok] {
			tok = int32(i)
		}
	}
	m.queued = append(m.queued, queuedStep{tok, m.busyUntil})
	m.row = batch.Row{Base: m.row.Base, Pos: m.row.Pos + 1, Token: tok}
	return nil
}

func (m *deviceToy) Token() (int32, error) {
	s := m.queued[0]
	m.queued = m.queued[1:]
	time.Sleep(time.Until(s.ends))
	return s.token, nil
}

// TestNewcomerWaitsAtMostOneForward: a greedy stream alone runs as a chain on the device; a
// request that arrives halfway through one of its steps has its first forward after that step and
// at most one more, not after a whole chain.
func TestNewcomerWaitsAtMostOneForward(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &deviceToy{toyModel: newToy(32, 2048)}
		h, err := NewShared(m, SharedOptions{Layout: []int{1024, 1024}, Grow: 8, Chainer: m})
		if err != nil {
			t.Fatal(err)
		}
		lone, err := h.Submit(t.Context(), Request{Prompt: []int32{1, 2, 3}, MaxTokens: 300})
		if err != nil {
			t.Fatal(err)
		}
		for range 20 {
			<-lone
		}
		time.Sleep(forwardTime / 2) // halfway through a step
		arrived := time.Now()
		newcomer, err := h.Submit(t.Context(), Request{Prompt: []int32{4, 5, 6}, MaxTokens: 5})
		if err != nil {
			t.Fatal(err)
		}
		lonely := drain(lone)
		if _, end := collect(t, newcomer); end.Reason != FinishLength {
			t.Fatalf("the newcomer ended %s: %v", end.Reason, end.Err)
		}
		<-lonely
		closeHost(t, h) // the lane has ended: its logs are the test's to read

		i := slices.IndexFunc(m.rounds, func(start time.Time) bool { return !start.Before(arrived) })
		if i < 0 {
			t.Fatal("no forward after the newcomer arrived")
		}
		first := m.rounds[i]
		before, after := 0, 0
		for _, start := range m.steps {
			switch {
			case start.Before(arrived):
				before++
			case start.Before(first):
				after++
			}
		}
		t.Logf("%d chain steps before the arrival, %d after it and before the newcomer's first forward, which began %v after it",
			before, after, first.Sub(arrived))
		if before < 10 {
			t.Fatalf("the lone stream ran %d chain steps before the arrival: it was not chaining", before)
		}
		if after > 1 {
			t.Errorf("the newcomer waited for %d chain steps that started after it arrived; want at most 1", after)
		}
	})
}
