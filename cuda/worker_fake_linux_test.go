//go:build amd64 || arm64

package cuda

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ebitengine/purego"
)

// The worker's graph logic, on any Linux machine: a fake driver made of purego callbacks stands in
// for libcuda's launch, copy, capture and graph entry points, and logs what reaches the stream.
// What runs on the stream must be the same commands in the same order whatever graphs do.

// fakeDriver logs the work that reaches its stream: "k<fn>:<first argument>" for a kernel, "copy"
// for a copy, "event" for an event recorded, in the order the stream would run it (a replayed graph
// adds its kernels). Each event recorded is also sent on events, if set.
type fakeDriver struct {
	stream     []string
	capturing  bool
	captured   []string
	graphs     map[uintptr][]string // by graph handle, then by exec handle
	nextID     uintptr
	destroyed  int
	failEnd    bool    // cuStreamEndCapture fails
	failLaunch uintptr // launches of this kernel fail (0: none)
	events     chan uintptr
}

// install points the worker's entry points at the fake until the test ends.
func (f *fakeDriver) install(t *testing.T) {
	f.graphs = map[uintptr][]string{}
	saved := []uintptr{fnLaunchKernel, fnMemcpyHtoDAsync, fnMemcpyDtoHAsync, fnMemcpyDtoDAsync, fnMemsetD8Async,
		fnStreamSynchronize, fnStreamBeginCapture, fnStreamEndCapture, fnGraphInstantiate, fnGraphLaunch,
		fnGraphExecDestroy, fnGraphDestroy, fnEventRecord}
	savedErr := graphBindingsErr
	t.Cleanup(func() {
		for i, p := range []*uintptr{&fnLaunchKernel, &fnMemcpyHtoDAsync, &fnMemcpyDtoHAsync, &fnMemcpyDtoDAsync,
			&fnMemsetD8Async, &fnStreamSynchronize, &fnStreamBeginCapture, &fnStreamEndCapture, &fnGraphInstantiate,
			&fnGraphLaunch, &fnGraphExecDestroy, &fnGraphDestroy, &fnEventRecord} {
			*p = saved[i]
		}
		graphBindingsErr = savedErr
	})
	graphBindingsErr = nil
	fnLaunchKernel = fakeCallbacks.launch
	fnMemcpyHtoDAsync, fnMemcpyDtoHAsync, fnMemcpyDtoDAsync = fakeCallbacks.copy, fakeCallbacks.copy, fakeCallbacks.copy
	fnMemsetD8Async = fakeCallbacks.copy
	fnStreamSynchronize = fakeCallbacks.sync
	fnStreamBeginCapture = fakeCallbacks.begin
	fnStreamEndCapture = fakeCallbacks.end
	fnGraphInstantiate = fakeCallbacks.instantiate
	fnGraphLaunch = fakeCallbacks.graphLaunch
	fnGraphExecDestroy, fnGraphDestroy = fakeCallbacks.destroy, fakeCallbacks.destroy
	fnEventRecord = fakeCallbacks.event
	fake = f
}

// fake is the driver the callbacks serve; purego callbacks are never freed, so they are made once.
var (
	fake          *fakeDriver
	fakeCallbacks = struct {
		launch, copy, sync, begin, end, instantiate, graphLaunch, destroy, event uintptr
	}{
		launch: purego.NewCallback(func(fn, gx, gy, gz, bx, by, bz, shm, stream uintptr, params *[maxArgs]*uint64, extra uintptr) uintptr {
			if fn == fake.failLaunch {
				return 1 // CUDA_ERROR_INVALID_VALUE
			}
			s := fmt.Sprintf("k%d:%d", fn, *params[0])
			if fake.capturing {
				fake.captured = append(fake.captured, s)
			} else {
				fake.stream = append(fake.stream, s)
			}
			return 0
		}),
		copy: purego.NewCallback(func(dst, src, n, stream uintptr) uintptr {
			if fake.capturing {
				panic("a copy was captured")
			}
			fake.stream = append(fake.stream, "copy")
			return 0
		}),
		sync:  purego.NewCallback(func(stream uintptr) uintptr { return 0 }),
		begin: purego.NewCallback(func(stream, mode uintptr) uintptr { fake.capturing, fake.captured = true, nil; return 0 }),
		end: purego.NewCallback(func(stream uintptr, graph *uintptr) uintptr {
			fake.capturing = false
			if fake.failEnd {
				return 901 // CUDA_ERROR_STREAM_CAPTURE_INVALIDATED
			}
			fake.nextID++
			fake.graphs[fake.nextID] = fake.captured
			*graph = fake.nextID
			return 0
		}),
		instantiate: purego.NewCallback(func(exec *uintptr, graph uintptr, flags uintptr) uintptr {
			fake.nextID++
			fake.graphs[fake.nextID] = fake.graphs[graph]
			*exec = fake.nextID
			return 0
		}),
		graphLaunch: purego.NewCallback(func(exec, stream uintptr) uintptr {
			fake.stream = append(fake.stream, fake.graphs[exec]...)
			return 0
		}),
		destroy: purego.NewCallback(func(h uintptr) uintptr { fake.destroyed++; return 0 }),
		event: purego.NewCallback(func(event, stream uintptr) uintptr {
			fake.stream = append(fake.stream, "event")
			if fake.events != nil {
				fake.events <- event
			}
			return 0
		}),
	}
)

// fakeWorker starts a worker with graphs on over a fake driver.
func fakeWorker(t *testing.T, f *fakeDriver) *worker {
	f.install(t)
	w := newWorker()
	if err := w.start(func() error { w.g.allowed, w.g.on = true, true; return nil }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.stop(func() error { w.dropGraphs(); return nil }) })
	return w
}

var fakeKernels = [3]*kernel{{name: "a", fn: 1, params: 2}, {name: "b", fn: 2, params: 2}, {name: "c", fn: 3, params: 2}}

// forward records a copy, then n launches cycling through the fake kernels with first argument
// arg+i, then waits; it returns what the stream ran.
func forward(t *testing.T, w *worker, f *fakeDriver, n, arg int) []string {
	t.Helper()
	f.stream = f.stream[:0]
	c := w.record()
	*c = command{kind: cmdHtoD, args: [maxArgs]uint64{1, 2, 4}}
	for i := range n {
		c := w.record()
		c.kind, c.k, c.nargs, c.grid, c.block = cmdLaunch, fakeKernels[i%3], 2, [3]uint32{1, 1, 1}, 32
		c.args[0], c.args[1] = uint64(arg+i), 7
	}
	if err := w.wait(true, nil); err != nil {
		t.Fatal(err)
	}
	return slices.Clone(f.stream)
}

func want(n, arg int) []string {
	out := []string{"copy"}
	for i := range n {
		out = append(out, fmt.Sprintf("k%d:%d", i%3+1, arg+i))
	}
	return out
}

func TestGraphsReplaySameWork(t *testing.T) {
	f := &fakeDriver{}
	w := fakeWorker(t, f)
	for _, n := range []int{10, 300} { // 300 spans two batches
		for i := range 4 {
			if got := forward(t, w, f, n, 100*n); !slices.Equal(got, want(n, 100*n)) {
				t.Fatalf("%d launches, time %d: the stream ran\n%v\nwant\n%v", n, i+1, got, want(n, 100*n))
			}
		}
	}
	// Each run: launched on its own the first time, captured the second, replayed from then on.
	if g := w.g; g.captures != 2 || g.replays != 6 {
		t.Errorf("captures %d, replays %d; want 2 and 6", g.captures, g.replays)
	}
	// A run that differs in one argument is another run.
	forward(t, w, f, 10, 1001)
	if w.g.replays != 6 {
		t.Errorf("a different run replayed a graph")
	}
}

func TestGraphsSkipShortAndLongRuns(t *testing.T) {
	f := &fakeDriver{}
	w := fakeWorker(t, f)
	for _, n := range []int{minRun - 1, maxRun + 10} {
		for range 3 {
			if got := forward(t, w, f, n, 5); !slices.Equal(got, want(n, 5)) {
				t.Fatalf("%d launches: the stream ran other work", n)
			}
		}
	}
	if w.g.captures != 0 || w.g.replays != 0 {
		t.Errorf("captures %d, replays %d; want none", w.g.captures, w.g.replays)
	}
}

func TestGraphCacheIsBounded(t *testing.T) {
	f := &fakeDriver{}
	w := fakeWorker(t, f)
	for r := range maxGraphs + 4 {
		for range 3 {
			if got := forward(t, w, f, 8, 10*r); !slices.Equal(got, want(8, 10*r)) {
				t.Fatalf("run %d: the stream ran other work", r)
			}
		}
	}
	live := 0
	for _, e := range w.g.cache {
		if e.exec != 0 {
			live++
		}
	}
	// Each capture destroys its graph after instantiation; 4 execs were evicted.
	if captures := maxGraphs + 4; w.g.captures != captures || live != maxGraphs || f.destroyed != captures+4 {
		t.Errorf("captures %d, live %d, destroyed %d; want %d, %d, %d", w.g.captures, live, f.destroyed, captures, maxGraphs, captures+4)
	}
}

func TestGraphFailureFallsBack(t *testing.T) {
	f := &fakeDriver{failEnd: true}
	w := fakeWorker(t, f)
	for range 3 {
		if got := forward(t, w, f, 10, 1); !slices.Equal(got, want(10, 1)) {
			t.Fatalf("the stream ran other work after a failed capture:\n%v", got)
		}
	}
	if w.g.on || w.g.err == nil || !strings.Contains(w.g.err.Error(), "cuStreamEndCapture") {
		t.Errorf("after a failed capture: on %v, err %v; want off and the reason", w.g.on, w.g.err)
	}
}

func TestGraphCaptureOfBadLaunchReports(t *testing.T) {
	f := &fakeDriver{}
	w := fakeWorker(t, f)
	forward(t, w, f, 10, 1)
	f.failLaunch = 2
	f.stream = f.stream[:0]
	c := w.record()
	*c = command{kind: cmdHtoD, args: [maxArgs]uint64{1, 2, 4}}
	for i := range 10 {
		c := w.record()
		c.kind, c.k, c.nargs, c.grid, c.block = cmdLaunch, fakeKernels[i%3], 2, [3]uint32{1, 1, 1}, 32
		c.args[0], c.args[1] = uint64(1+i), 7
	}
	err := w.wait(true, nil)
	if err == nil || !strings.Contains(err.Error(), "launch of b") {
		t.Errorf("a launch refused during capture: Sync says %v", err)
	}
	var le launchError
	if !w.g.on || errors.As(w.g.err, &le) {
		t.Errorf("a bad launch turned graphs off")
	}
}

// TestFlushedStepsRunWithoutAWait: a chain step as the cuda backend records it (launches, then a
// copy of its token and an event, ReadInt32Async) reaches the stream when it is flushed, before
// anything waits; its launches end as a run at the copy, so from the second step on they replay
// one graph, and the stream runs each step's launches, copy and event in order.
func TestFlushedStepsRunWithoutAWait(t *testing.T) {
	f := &fakeDriver{events: make(chan uintptr, 1)}
	w := fakeWorker(t, f)
	const steps, n = 4, 10
	var wantStream []string
	for step := range steps {
		for i := range n {
			c := w.record()
			c.kind, c.k, c.nargs, c.grid, c.block = cmdLaunch, fakeKernels[i%3], 2, [3]uint32{1, 1, 1}, 32
			c.args[0], c.args[1] = uint64(i), 7
		}
		c := w.record()
		*c = command{kind: cmdDtoH, args: [maxArgs]uint64{1, 2, 4}}
		c = w.record()
		*c = command{kind: cmdEvent, args: [maxArgs]uint64{uint64(100 + step)}}
		w.flush()
		if ev := <-f.events; ev != uintptr(100+step) { // the worker ran the step with nothing waiting
			t.Fatalf("step %d recorded event %d", step, ev)
		}
		wantStream = append(wantStream, want(n, 0)[1:]...)
		wantStream = append(wantStream, "copy", "event")
	}
	if err := w.wait(true, nil); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(f.stream, wantStream) {
		t.Errorf("the stream ran\n%v\nwant\n%v", f.stream, wantStream)
	}
	if w.g.captures != 1 || w.g.replays != steps-1 {
		t.Errorf("captures %d, replays %d; want 1 and %d", w.g.captures, w.g.replays, steps-1)
	}
}
