package cpu

import (
	"runtime"
	"sync/atomic"
	"time"
)

// A task is the body of one parallel op. run computes items [lo, hi) using the scratch space of
// the goroutine that runs it. Which goroutine runs which items is decided at run time, so an item's
// result must depend only on the item.
type task interface {
	run(s *scratch, lo, hi int)
}

// scratch is per-goroutine working memory that grows to the largest size asked and is kept.
type scratch struct {
	buf []float32
	// wide holds a block of an F16 KV pool's keys or values widened to F32 (attentionTask.block).
	wide []float32
	// dots holds a quantized kernel's results (qmatmulTask): some kernels are called through a
	// function value, so a local array would escape and be allocated at every call.
	dots [32]float32
}

// floats returns n floats of scratch; their contents are undefined. A task that needs scratch
// has the pool reserve it first (see pool.reserve), so that this does not allocate.
func (s *scratch) floats(n int) []float32 {
	s.reserve(n)
	return s.buf[:n]
}

// reserve makes room for n floats, generously, so that growing stops after a few calls.
func (s *scratch) reserve(n int) {
	if cap(s.buf) < n {
		s.buf = make([]float32, max(n+n/2, 4096))
	}
}

// pool is a persistent set of worker goroutines that run one task at a time together with the
// goroutine that submits it. It is driven by one goroutine (the backend's); it allocates only when
// GOMAXPROCS grows past the number of workers it has.
//
// Ops come back to back during a forward, so a worker that finishes a task keeps polling for the
// next one for a while (poll) before it parks: handing it the next task then costs no OS wake-up.
// The submitting goroutine waits for the last worker the same way.
type pool struct {
	workers []*worker
	self    scratch // the submitting goroutine's scratch
	done    waiter  // signalled by the worker that finishes a task last
	closed  atomic.Bool

	// The current task. Written by run before it signals workers and read by them afterwards;
	// the signal orders the two.
	job   task
	grain int
	procs int // goroutines running the task: the helpers and the submitter

	need int // floats of scratch every goroutine gets before the next task; see reserve

	// spans[0] is the submitter's share of the current task, spans[i+1] workers[i]'s; see work.
	spans []*span

	_    [64]byte     // the counter below changes while workers read the fields above
	left atomic.Int32 // signalled workers that have not finished the current task
}

type worker struct {
	start waiter
	s     scratch
	id    int      // the worker's span: p.spans[id]
	_     [64]byte // keep the waiter, polled by this worker, off other workers' cache lines
}

// A span is one goroutine's share of a task's items, [next, end) of it not yet claimed. Its owner
// claims from it, and so do goroutines that have finished their own.
type span struct {
	next atomic.Int64
	end  int64
	_    [48]byte // spans are claimed from by different goroutines: one to a cache line
}

// poll is how long a waiter polls before it parks: longer than the gap between two ops of a
// forward, short enough that an idle daemon's workers are soon asleep.
const poll = 50 * time.Microsecond

// newPool returns a pool able to run tasks on procs goroutines (procs-1 workers and the caller).
func newPool(procs int) *pool {
	p := &pool{done: newWaiter(), spans: []*span{new(span)}}
	p.grow(procs - 1)
	return p
}

// grow starts workers until there are at least n.
func (p *pool) grow(n int) {
	for len(p.workers) < n {
		w := &worker{start: newWaiter(), id: len(p.spans)}
		p.workers = append(p.workers, w)
		p.spans = append(p.spans, new(span))
		go p.serve(w)
	}
}

func (p *pool) serve(w *worker) {
	for {
		w.start.wait()
		if p.closed.Load() {
			return
		}
		p.work(&w.s, w.id)
		if p.left.Add(-1) == 0 {
			p.done.signal()
		}
	}
}

// work runs the current task's items as goroutine id: first its own span, a grain at a time,
// then what is left of the others' spans, each from where its owner has got to.
//
// Each goroutine starts on a contiguous share of the items rather than all claiming from one
// counter: at decode an item is a small block of a matrix (16 KiB), and goroutines that took
// items alternately would each read the weights in strides, which the hardware prefetchers do not
// follow, and would contend for the counter on every item. Taking from the others' spans once its
// own is done evens out a goroutine that started late or was descheduled. Which goroutine runs
// which items still depends on timing, so an item's result must depend only on the item (see
// task).
func (p *pool) work(s *scratch, id int) {
	grain := int64(p.grain)
	for k := range p.procs {
		sp := p.spans[(id+k)%p.procs]
		for {
			lo := sp.next.Add(grain) - grain
			if lo >= sp.end {
				break
			}
			p.job.run(s, int(lo), int(min(lo+grain, sp.end)))
		}
	}
}

// reserve makes every goroutine that runs the next task have n floats of scratch, allocated here
// rather than by whichever goroutine first meets a large item.
func (p *pool) reserve(n int) {
	p.need = n
}

// run runs items [0, n) of t in chunks of grain on up to par goroutines, never more than
// GOMAXPROCS, and returns when all are done.
func (p *pool) run(t task, n, grain, par int) {
	need := p.need
	p.need = 0
	if n <= 0 {
		return
	}
	grain = max(grain, 1)
	helpers := min(par, runtime.GOMAXPROCS(0), (n+grain-1)/grain) - 1
	p.self.reserve(need)
	if helpers <= 0 {
		t.run(&p.self, 0, n)
		return
	}
	p.grow(helpers)
	for _, w := range p.workers[:helpers] {
		w.s.reserve(need) // the worker is idle: its scratch is ours to touch
	}
	p.job, p.grain, p.procs = t, grain, helpers+1
	// Spans of whole grains, as equal as they can be.
	chunks := (n + grain - 1) / grain
	for k, sp := range p.spans[:p.procs] {
		sp.next.Store(int64(min(n, chunks*k/p.procs*grain)))
		sp.end = int64(min(n, chunks*(k+1)/p.procs*grain))
	}
	p.left.Store(int32(helpers))
	for _, w := range p.workers[:helpers] {
		w.start.signal()
	}
	p.work(&p.self, 0)
	p.done.wait()
	p.job = nil
}

// close stops the workers.
func (p *pool) close() {
	p.closed.Store(true)
	for _, w := range p.workers {
		w.start.signal()
	}
	p.workers = nil
}

// A waiter lets one goroutine wait for a signal from another. The waiting goroutine polls for a
// while, then parks on a channel. One state word, which each side changes in a single atomic step,
// decides whether the channel is used, so no signal is lost, none is left over, and none wakes a
// later wait: with the signal's flag and the parked state in two words, a signaller delayed
// between setting one and testing the other could find the waiter parked again for the next
// signal, and wake it with this one.
type waiter struct {
	state atomic.Int32 // idle, parked or signalled
	ch    chan struct{}
}

const (
	idle      = iota // no signal yet: the waiter polls (or is not waiting)
	parked           // no signal yet: the waiter receives, or is about to receive, from ch
	signalled        // the signal came; the waiter has not taken it
)

func newWaiter() waiter { return waiter{ch: make(chan struct{}, 1)} }

// wait returns once signal has been called, and readies the waiter for the next signal. Only one
// goroutine waits on a waiter, and a signal is sent only while a wait is due.
//
// The poll is a plain loop on an atomic load, yielding the P only now and then: a loop that
// yields every time sends each waiting goroutine through the scheduler's global run queue, whose
// lock a dozen such loops contend for.
func (w *waiter) wait() {
	var deadline time.Time
	for i := 1; w.state.Load() != signalled; i++ {
		if i%256 != 0 {
			continue
		}
		if now := time.Now(); deadline.IsZero() {
			deadline = now.Add(poll)
		} else if now.After(deadline) {
			if w.state.CompareAndSwap(idle, parked) {
				<-w.ch // the signaller will find parked and send
			}
			break
		}
		runtime.Gosched()
	}
	w.state.Store(idle)
}

// signal wakes the waiter, with a channel send only if it has parked.
func (w *waiter) signal() {
	if w.state.Swap(signalled) == parked {
		w.ch <- struct{}{}
	}
}
