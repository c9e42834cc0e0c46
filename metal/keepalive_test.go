package metal

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"tfd/batch"
	"tfd/compute"
	"tfd/scheduler"
)

// keptModel is a toy scheduler.Model on a residency keeper, as the Metal backend will be: each
// forward is one command buffer between beforeWork and afterWork, and Warm is the keeper's idle
// tick. A row's logits depend on its token and position only; nothing here checks replies, only
// when the device works. gate, when set, holds each forward's command buffer until a value
// arrives or it is closed (a long command buffer); the during hook runs inside each forward with
// its number (from 1), to make and free buffers mid-request.
type keptModel struct {
	k    *keeper
	gate chan struct{}

	mu       sync.Mutex // guards the fields below
	during   func(n int)
	forwards int
	logits   []float32
}

const keptVocab = 8

func (m *keptModel) Forward(ctx context.Context, rows []batch.Row) ([]float32, error) {
	m.k.beforeWork()
	defer m.k.afterWork()
	if m.gate != nil {
		select {
		case <-m.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.forwards++
	if m.during != nil {
		m.during(m.forwards)
	}
	m.logits = m.logits[:0]
	for _, r := range rows {
		if r.Logits {
			for i := range keptVocab {
				m.logits = append(m.logits, float32((int(r.Token)+r.Pos+i)%keptVocab))
			}
		}
	}
	return m.logits, nil
}

func (m *keptModel) Warm() error                  { return m.k.idle() }
func (m *keptModel) Vocab() int                   { return keptVocab }
func (m *keptModel) MaxRows() int                 { return 4 }
func (m *keptModel) Slots() int                   { return 512 }
func (m *keptModel) Context() int                 { return 512 }
func (m *keptModel) MoveKV(dst, src, n int) error { return nil }

func (m *keptModel) forwardCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.forwards
}

// at sets the hook to run f inside forward n.
func (m *keptModel) at(n int, f func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.during = func(i int) {
		if i == n {
			f()
		}
	}
}

// TestKeepaliveWithTheLane runs the keeper under the scheduler's lane on synctest's clock, with
// residency.tick 500 ms and keep_warm 10 s. It shows: no tick before any request; none while a
// request runs, neither while its command buffers run for many tick periods nor while the lane
// waits on a stalled reader; a buffer made and one freed while the device is busy are committed
// (and the freed one released) only when the device has been idle, here when the stalled request
// resumes; one made at the end of a request is committed by the first idle tick; then a tick every
// 500 ms for 10 s after the last forward, none after that, and the same after the next request.
func TestKeepaliveWithTheLane(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		opts := compute.ResidencyOptions{Enabled: true, Tick: 500 * time.Millisecond, KeepWarm: 10 * time.Second, Limit: 48 * gb}
		g := newFakeGPU(64 * gb)
		k, _ := newLogged(g, opts)
		weights, kv := buf("weights", 8*gb), buf("kv", 2*gb)
		k.track(weights)
		k.track(kv)
		k.loaded()
		m := &keptModel{k: k, gate: make(chan struct{})}
		m.at(2, func() { // a session grows: a new KV pool is made, the old one freed
			k.track(buf("kv-grown", 4*gb))
			k.untrack(kv, g.release(kv))
		})
		h, err := scheduler.NewShared(m, scheduler.SharedOptions{Layout: batch.Layout{256},
			KeepWarm: opts.KeepWarm, WarmTick: opts.Tick, Warmer: m})
		if err != nil {
			t.Fatal(err)
		}
		var streams []<-chan scheduler.Event
		defer func() { // a failed test may leave a forward held and a stream unread: end both
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			h.Close(ctx)
			for _, events := range streams {
				for range events {
				}
			}
		}()
		noTicks := func(when string) {
			t.Helper()
			if n := g.tickCount(); n != 0 {
				t.Fatalf("%s: %d ticks, want none", when, n)
			}
		}

		time.Sleep(time.Minute)
		noTicks("before any request")

		events, err := h.Submit(t.Context(), scheduler.Request{Prompt: []int32{1, 2, 3}, MaxTokens: 200})
		if err != nil {
			t.Fatal(err)
		}
		streams = append(streams, events)
		for range 4 { // each command buffer runs for four tick periods
			time.Sleep(4 * opts.Tick)
			noTicks("while a command buffer runs")
			m.gate <- struct{}{}
		}
		close(m.gate) // forwards run free until the unread events fill the stream's buffer
		synctest.Wait()
		stalledAt := m.forwardCount()
		if s := h.Stats(); s.Active != 1 || stalledAt >= 200 {
			t.Fatalf("the stream should be stalled on its reader: %+v after %d forwards", s, stalledAt)
		}
		time.Sleep(5 * time.Second)
		noTicks("while the lane waits on a stalled reader")
		wantState(t, g, 1, 1, 0, "weights", "kv") // the device was never idle for a tick's period
		wantReleased(t, g)

		m.at(stalledAt+3, func() { k.track(buf("chains", gb)) })
		for ev := range events { // the reader comes back; the reply runs to its end
			if ev.Done && ev.Reason != scheduler.FinishLength {
				t.Fatalf("the request ended %q", ev.Reason)
			}
		}
		synctest.Wait() // the lane is idle; no time has passed since its last forward
		// The device was idle while the reader stalled: the request's resumption committed.
		wantState(t, g, 2, 1, 0, "weights", "kv-grown")
		wantReleased(t, g, "kv")
		time.Sleep(opts.Tick - time.Millisecond)
		noTicks("before the first tick's period")
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if n := g.tickCount(); n != 1 {
			t.Fatalf("%d ticks one period after the request, want 1", n)
		}
		wantState(t, g, 3, 2, 0, "weights", "kv-grown", "chains")

		perWindow := int(opts.KeepWarm / opts.Tick)
		time.Sleep(time.Minute)
		if n := g.tickCount(); n != perWindow {
			t.Fatalf("%d ticks after the request, want %d: one per %v for %v", n, perWindow, opts.Tick, opts.KeepWarm)
		}
		wantState(t, g, 3, 1+perWindow, 0, "weights", "kv-grown", "chains") // nothing staged: no commit

		events, err = h.Submit(t.Context(), scheduler.Request{Prompt: []int32{4, 5}, MaxTokens: 5})
		if err != nil {
			t.Fatal(err)
		}
		streams = append(streams, events)
		for range events {
		}
		time.Sleep(time.Minute)
		if n := g.tickCount(); n != 2*perWindow {
			t.Fatalf("%d ticks after the second request, want %d", n, 2*perWindow)
		}
		if s := k.stats(); s.Commits != 3 || s.Ticks != uint64(2*perWindow) || !s.On {
			t.Fatalf("stats %+v", s)
		}
		g.check(t)
	})
}
