package cpu

import (
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"tfd/compute/computetest"
)

// countTask counts how often each item runs.
type countTask struct{ hits []atomic.Int32 }

func (t *countTask) run(_ *scratch, lo, hi int) {
	for i := lo; i < hi; i++ {
		t.hits[i].Add(1)
	}
}

// Every item of every task runs exactly once, whether the workers are still polling when the
// next task comes or have parked (gaps longer than poll), and at any GOMAXPROCS.
//
// These tests sleep on the wall clock on purpose: what they test is a pool that spins on the real
// clock before it parks. testing/synctest cannot stand in: its clock moves only when every
// goroutine in the bubble is blocked, and a polling worker never is.
func TestPoolRunsEveryItemOnce(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, procs := range procsToTry {
		withProcs(procs, func() {
			p := newPool(procs)
			defer p.close()
			task := &countTask{hits: make([]atomic.Int32, 300)}
			for round := range 300 {
				n, grain, par := 1+r.IntN(300), 1+r.IntN(20), 1+r.IntN(16)
				for i := range n {
					task.hits[i].Store(0)
				}
				p.run(task, n, grain, par)
				for i := range n {
					if h := task.hits[i].Load(); h != 1 {
						t.Fatalf("procs %d round %d: item %d of %d ran %d times", procs, round, i, n, h)
					}
				}
				switch round % 3 {
				case 1:
					time.Sleep(poll / 5)
				case 2:
					time.Sleep(2 * poll)
				}
			}
		})
	}
}

// Close stops every worker.
func TestCloseStopsWorkers(t *testing.T) {
	before := runtime.NumGoroutine()
	withProcs(4, func() {
		b := newBackend()
		x := ften(t, b, computetest.Randn(1, 1<<20), 1, 1<<20)
		b.Add(x, x, x, 1) // big enough to wake every worker
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
	})
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines after Close, %d before Open", runtime.NumGoroutine(), before)
		}
		time.Sleep(time.Millisecond)
	}
}

// A wait returns only for a signal sent while it was due: never for the previous wait's signal,
// even when the waiter takes a signal, waits again and parks while the signaller is still inside
// signal. (The pool counts on it: a worker woken twice by one signal would finish a task twice.)
func TestWaiterOneWakePerSignal(t *testing.T) {
	w := newWaiter()
	var sent, acked atomic.Int64
	go func() {
		for i := int64(1); i <= 500; i++ {
			for acked.Load() != i-1 {
				runtime.Gosched()
			}
			time.Sleep(20 * time.Microsecond) // an early wake would find sent < i
			sent.Store(i)
			w.signal()
		}
	}()
	for i := int64(1); i <= 500; i++ {
		w.wait()
		if s := sent.Load(); s != i {
			t.Fatalf("wait %d returned with %d signals sent", i, s)
		}
		acked.Store(i)
		if i%3 == 0 {
			time.Sleep(2 * poll) // the next wait parks
		}
	}
}
