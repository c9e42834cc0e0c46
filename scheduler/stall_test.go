package scheduler

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"tfd/batch"
)

// drain reads a stream to its end in the background and hands over its tokens and last event.
func drain(events <-chan Event) <-chan []Event {
	got := make(chan []Event, 1)
	go func() {
		var evs []Event
		for ev := range events {
			evs = append(evs, ev)
		}
		got <- evs
	}()
	return got
}

// within waits for a drained stream for at most d of the bubble's clock.
func within(t *testing.T, got <-chan []Event, d time.Duration, what string) []Event {
	t.Helper()
	select {
	case evs := <-got:
		return evs
	case <-time.After(d):
		t.Fatalf("%s: no end within %v", what, d)
		return nil
	}
}

// stall submits a long stream whose reader takes one event and then stops reading. stop cancels
// it and reads it to its end, returning the terminal event.
func stall(t *testing.T, h *Shared, prompt []int32) (stop func() Event) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	events, err := h.Submit(ctx, Request{Prompt: prompt, MaxTokens: 2000})
	if err != nil {
		t.Fatal(err)
	}
	<-events
	synctest.Wait() // the lane has filled the stream's buffer and set it aside
	if s := h.Stats(); s.Active == 0 {
		t.Fatalf("the stalled stream ended by itself: %+v", s)
	}
	return func() Event {
		cancel()
		var last Event
		for ev := range events {
			last = ev
		}
		return last
	}
}

// TestStalledReaderStallsNoOne: a stream alone on the host whose reader stops reading must not
// hold up a request that arrives after it; the probe is answered at once (the toy model takes no
// time), not when the stalled client leaves.
func TestStalledReaderStallsNoOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, err := NewShared(newToy(32, 4096), SharedOptions{Layout: []int{2048, 2048}, Grow: 8})
		if err != nil {
			t.Fatal(err)
		}
		defer closeHost(t, h)
		stop := stall(t, h, []int32{1, 2, 3})
		probe, err := h.Submit(t.Context(), Request{Prompt: []int32{4, 5}, MaxTokens: 4})
		if err != nil {
			t.Fatal(err)
		}
		evs := within(t, drain(probe), time.Second, "a probe beside a stalled reader")
		if end := evs[len(evs)-1]; end.Reason != FinishLength || len(evs) != 5 {
			t.Fatalf("probe ended %q after %d events, want length after 4 tokens", end.Reason, len(evs)-1)
		}
		if end := stop(); end.Reason != FinishCancelled {
			t.Fatalf("stalled stream ended %q, want cancelled", end.Reason)
		}
	})
}

// TestGivenUpWaiterLeavesTheQueue: a request queued behind a stalled stream that gives up is
// dropped from the queue at once and told so.
func TestGivenUpWaiterLeavesTheQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := NewSerial(newToy(32, 4096), SharedOptions{})
		defer closeHost(t, h)
		defer stall(t, h, []int32{1, 2, 3})()
		ctx, giveUp := context.WithCancel(t.Context())
		waiter, err := h.Submit(ctx, Request{Prompt: []int32{7}, MaxTokens: 4})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if n := h.Stats().Waiting; n != 1 {
			t.Fatalf("%d waiting behind the stalled stream, want 1: %+v", n, h.Stats())
		}
		giveUp()
		synctest.Wait()
		if n := h.Stats().Waiting; n != 0 {
			t.Fatalf("%d still waiting after the waiter gave up", n)
		}
		if evs := within(t, drain(waiter), time.Second, "the waiter that gave up"); evs[0].Reason != FinishCancelled {
			t.Fatalf("the waiter ended %q, want cancelled", evs[0].Reason)
		}
	})
}

// TestReconfigureAdmitsIntoWhatIsFree: a layout change while four long replies run puts the new
// layout in force at once: a probe takes a session of it that no running reply overlaps, Stats
// shows the new layout beside the sessions still retiring, and those retire as their replies end.
func TestReconfigureAdmitsIntoWhatIsFree(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, err := NewShared(newToy(32, 1024), SharedOptions{Layout: slices.Repeat([]int{128}, 8), Grow: 8})
		if err != nil {
			t.Fatal(err)
		}
		defer closeHost(t, h)
		var stops []func() Event
		for i := range 4 {
			stops = append(stops, stall(t, h, []int32{int32(i + 1), 2, 3}))
		}
		if err := h.Reconfigure(SharedOptions{Layout: slices.Repeat([]int{128}, 6), Grow: 8}); err != nil {
			t.Fatal(err)
		}
		probe, err := h.Submit(t.Context(), Request{Prompt: []int32{9, 9}, MaxTokens: 4})
		if err != nil {
			t.Fatal(err)
		}
		evs := within(t, drain(probe), time.Second, "a probe after the layout change")
		if end := evs[len(evs)-1]; end.Reason != FinishLength {
			t.Fatalf("probe ended %q (%v), want length", end.Reason, end.Err)
		}
		s := h.Stats()
		if s.Sessions != 6 || !slices.Equal(s.Retiring, slices.Repeat([]int{128}, 4)) || s.SessionsInUse != 4 {
			t.Fatalf("during the change: %+v, want 6 sessions in force and 4 retiring, 4 in use", s)
		}
		for _, stop := range stops {
			stop()
		}
		synctest.Wait()
		if s := h.Stats(); len(s.Retiring) != 0 || s.SessionsInUse != 0 {
			t.Fatalf("after the old replies ended: %+v, want nothing retiring or in use", s)
		}
	})
}

// slowToy is a toy model whose forwards take 20 ms of the bubble's clock.
type slowToy struct{ *toyModel }

func (m slowToy) Forward(ctx context.Context, rows []batch.Row) ([]float32, error) {
	time.Sleep(20 * time.Millisecond)
	return m.toyModel.Forward(ctx, rows)
}

// TestQueueFullSaysHowLongToWait: a full queue's error estimates how long the streams ahead need,
// from how long replies have held their sessions: four waiting for two sessions held about a
// second each is about two seconds.
func TestQueueFullSaysHowLongToWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, err := NewShared(slowToy{newToy(32, 512)}, SharedOptions{Layout: []int{128, 128}, Grow: 8, Queue: 4})
		if err != nil {
			t.Fatal(err)
		}
		defer closeHost(t, h)
		events, err := h.Submit(t.Context(), Request{Prompt: []int32{1}, MaxTokens: 50}) // 50 forwards: 1 s
		if err != nil {
			t.Fatal(err)
		}
		<-drain(events)
		for i := range 2 {
			defer stall(t, h, []int32{int32(i + 2)})()
		}
		for i := range 4 {
			ctx, cancel := context.WithCancel(t.Context())
			queued, err := h.Submit(ctx, Request{Prompt: []int32{5}, MaxTokens: 1})
			if err != nil {
				t.Fatalf("queued request %d: %v", i, err)
			}
			defer func() { cancel(); <-drain(queued) }()
		}
		_, err = h.Submit(t.Context(), Request{Prompt: []int32{6}, MaxTokens: 1})
		var full *QueueFullError
		if !errors.As(err, &full) || !errors.Is(err, ErrQueueFull) {
			t.Fatalf("a fifth request with a queue of 4: %v, want a QueueFullError", err)
		}
		if full.RetryAfter < 1500*time.Millisecond || full.RetryAfter > 3*time.Second {
			t.Fatalf("RetryAfter = %v, want about 2 s", full.RetryAfter)
		}
	})
}

// TestLayoutChangeCannotWedgeGrowingStreams: two replies that fill their sessions of the old
// layout while the only new session large enough overlaps both would wait for each other
// forever; the lane ends them with an error that says why, and the host goes on serving.
func TestLayoutChangeCannotWedgeGrowingStreams(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newToy(32, 256)
		m.gate = make(chan struct{})
		h, err := NewShared(m, SharedOptions{Layout: []int{64, 64}, Grow: 8})
		if err != nil {
			t.Fatal(err)
		}
		defer closeHost(t, h)
		var ends []<-chan []Event
		for i := range 2 {
			events, err := h.Submit(t.Context(), Request{Prompt: []int32{int32(i + 1)}, MaxTokens: 100})
			if err != nil {
				t.Fatal(err)
			}
			ends = append(ends, drain(events))
		}
		// Forwards one at a time until both streams hold their sessions: the lane may have run
		// the first alone on the lone driver before the second arrived.
		for h.Stats().Active < 2 {
			m.gate <- struct{}{}
			synctest.Wait()
		}
		if err := h.Reconfigure(SharedOptions{Layout: []int{32, 128}, Grow: 8}); err != nil {
			t.Fatal(err)
		}
		close(m.gate)
		for i, end := range ends {
			evs := within(t, end, time.Second, "a stream outgrowing its retiring session")
			if last := evs[len(evs)-1]; last.Reason != FinishError || len(evs) != 65 {
				t.Fatalf("stream %d: %d tokens ending %q (%v), want 64 ending in an error", i, len(evs)-1, last.Reason, last.Err)
			}
		}
		events, err := h.Submit(t.Context(), Request{Prompt: []int32{3}, MaxTokens: 100})
		if err != nil {
			t.Fatal(err)
		}
		if evs := within(t, drain(events), time.Second, "a stream after the change"); len(evs) != 101 {
			t.Fatalf("after the change: %d events, want 100 tokens and the end", len(evs))
		}
	})
}

// failing is an MTP head and a warm tick that always fail.
type failing struct{}

func (failing) Draft(context.Context, []batch.DraftRow) ([]float32, error) {
	return nil, errors.New("the head is broken")
}
func (failing) Warm() error { return errors.New("the tick is broken") }

// TestWorkedAroundErrorsAreReported: a failing draft head and a failing tick cost no reply, and
// each failure reaches Report under its kind.
func TestWorkedAroundErrorsAreReported(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex // guards reported
		reported := map[string]int{}
		report := func(where string, err error) {
			mu.Lock()
			defer mu.Unlock()
			reported[where]++
		}
		h, err := NewShared(newToy(32, 256), SharedOptions{Layout: []int{256}, Drafter: failing{}, Warmer: failing{},
			KeepWarm: 10 * time.Millisecond, WarmTick: 5 * time.Millisecond, Report: report})
		if err != nil {
			t.Fatal(err)
		}
		defer closeHost(t, h)
		events, err := h.Submit(t.Context(), Request{Prompt: []int32{1, 2}, MaxTokens: 5, Drafts: Drafts{MTP: 1}})
		if err != nil {
			t.Fatal(err)
		}
		if evs := within(t, drain(events), time.Second, "a drafted reply with a broken head"); len(evs) != 6 {
			t.Fatalf("%d events, want 5 tokens and the end", len(evs))
		}
		time.Sleep(time.Second)
		mu.Lock()
		defer mu.Unlock()
		if reported["draft"] == 0 || reported["warm"] != 2 {
			t.Fatalf("reported %v, want draft failures and 2 warm ones", reported)
		}
	})
}
