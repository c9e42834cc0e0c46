package cpu

import (
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
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
		x := ften(t, b, randn(1, 1<<20), 1, 1<<20)
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
