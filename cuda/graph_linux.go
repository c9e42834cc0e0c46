//go:build amd64 || arm64

package cuda

import (
	"errors"
	"fmt"
	"slices"
	"unsafe"

	"github.com/ebitengine/purego"
)

// CUDA graphs, transparently. A decode forward is about 140 small kernels with the same arguments
// every step: the row data (tokens, positions, session bases) lives in device buffers that the
// WriteInt32 copies fill, so only those copies change from one step to the next. Launching each
// kernel costs the worker a few microseconds, which for a small model is most of the forward.
//
// So the worker holds back each run of consecutive launches (the commands between two copies,
// memsets or waits) instead of launching them at once. At the run's end it looks the run up by a
// hash of its commands: a run captured before (compared in full, not by hash alone) is replayed
// with one cuGraphLaunch; a run seen once before is captured into a graph now, then replayed; a
// run never seen is launched kernel by kernel and remembered. Copies and memsets always run on
// their own, outside every graph, in stream order with the graphs around them, so the data a
// graph reads is whatever the copies just wrote.
//
// A graph replays exactly the kernels, grids and arguments of its run, so the results are the
// same bits as launching them one by one (TestGraphsKeepBits). TFD_CUDA_GRAPHS=0 turns graphs
// off; they are also off when the driver lacks the graph API, and they turn themselves off (and
// say why through graphState) if capturing or instantiating ever fails.

const (
	// maxGraphs bounds the instantiated graphs kept; the least recently used one goes first. A
	// server's rounds come in a few shapes (row counts, wanted-logits counts), each its own run.
	maxGraphs = 16
	// seenLen is how many hashes of runs seen once are remembered.
	seenLen = 64
	// minRun is the shortest run worth a graph: below it one launch per kernel is as cheap.
	minRun = 4
	// maxRun is the longest run held back. A longer one (a loop of many ops with no sync between,
	// as in a benchmark) is launched as it comes, so that the GPU starts early and the held
	// commands stay bounded. A forward of a 64-layer model is about 900 commands; a greedy chain's
	// step (a forward and its argmax, then a read) about as many.
	maxRun = 16384
)

// CUstreamCaptureMode: THREAD_LOCAL forbids unsafe calls (allocation, say) only on the capturing
// thread, which makes none while it captures; other threads of the process are not affected.
const captureThreadLocal = 1

// graphs is the worker's graph state; worker thread only.
type graphs struct {
	allowed bool  // the driver has the graph API and TFD_CUDA_GRAPHS is not 0; fixed at Open
	on      bool  // hold runs and use graphs
	err     error // why graphs were turned off after a failure; nil otherwise

	run   []command // the launches held back since the current run began
	eager bool      // the run passed maxRun and is being launched as it comes

	cache [maxGraphs]graphEntry
	seen  [seenLen]uint64 // hashes of runs seen once, a ring
	next  int             // the ring's next slot
	clock uint64          // counts lookups, for least-recently-used eviction

	captures, replays int // graphs instantiated and launched, for tests and benchmarks
}

// graphEntry is one instantiated graph and the run it was captured from.
type graphEntry struct {
	exec cuGraphExec // 0: empty slot
	hash uint64
	cmds []command
	used uint64 // clock at the last replay
}

// graphsAvailable reports whether the driver has the graph API.
func graphsAvailable() bool { return graphBindingsErr == nil }

// take runs or holds one command; worker thread only. Launches are held back in the current run;
// any other command ends the run first, then runs on its own.
func (w *worker) take(c *command) {
	g := &w.g
	switch {
	case !g.on:
		w.exec(c)
	case c.kind != cmdLaunch:
		w.endRun()
		w.exec(c)
	case g.eager:
		w.exec(c)
	case len(g.run) == maxRun:
		for i := range g.run {
			w.exec(&g.run[i])
		}
		g.run = g.run[:0]
		g.eager = true
		w.exec(c)
	default:
		g.run = append(g.run, *c)
		// Arguments past nargs are stale from the batch slot's earlier use: clear them, so that
		// runs compare and hash by what the kernel receives.
		r := &g.run[len(g.run)-1]
		clear(r.args[r.nargs:])
	}
}

// endRun runs the held run: by replaying its graph, by capturing one, or kernel by kernel. It is
// called before anything that is not a launch and before every wait; worker thread only.
func (w *worker) endRun() {
	g := &w.g
	if g.eager {
		g.eager = false // its launches have run already
		return
	}
	run := g.run
	if len(run) == 0 {
		return
	}
	g.run = g.run[:0]
	if len(run) < minRun {
		w.execAll(run)
		return
	}
	h := hashRun(run)
	g.clock++
	for i := range g.cache {
		e := &g.cache[i]
		if e.exec != 0 && e.hash == h && slices.Equal(e.cmds, run) {
			e.used = g.clock
			w.launchGraph(e.exec)
			return
		}
	}
	if !g.sawBefore(h) {
		g.seen[g.next] = h
		g.next = (g.next + 1) % seenLen
		w.execAll(run)
		return
	}
	exec, err := w.capture(run)
	if err != nil {
		// The run has not run: capture only records. Launch it now, which reports a bad launch
		// the usual way. A failure of the graph machinery itself turns graphs off for good.
		var le launchError
		if !errors.As(err, &le) {
			w.dropGraphs()
			g.on, g.err = false, err
		}
		w.execAll(run)
		return
	}
	e := g.victim()
	if e.exec != 0 {
		destroyGraphExec(e.exec)
	}
	e.exec, e.hash, e.used = exec, h, g.clock
	e.cmds = append(e.cmds[:0], run...)
	g.captures++
	w.launchGraph(exec)
}

// sawBefore reports whether hash h is among the runs seen once.
func (g *graphs) sawBefore(h uint64) bool {
	for _, s := range g.seen {
		if s == h && h != 0 {
			return true
		}
	}
	return false
}

// victim returns an empty cache slot, or else the least recently used one.
func (g *graphs) victim() *graphEntry {
	v := &g.cache[0]
	for i := range g.cache {
		e := &g.cache[i]
		if e.exec == 0 {
			return e
		}
		if e.used < v.used {
			v = e
		}
	}
	return v
}

func (w *worker) execAll(run []command) {
	for i := range run {
		w.exec(&run[i])
	}
}

// launchError is a kernel launch the driver refused while capturing: the run is at fault, not
// the graph machinery.
type launchError struct{ err error }

func (e launchError) Error() string { return e.err.Error() }

// capture records run into a graph and instantiates it; nothing runs on the GPU.
func (w *worker) capture(run []command) (cuGraphExec, error) {
	w.call[0], w.call[1] = uintptr(w.stream), captureThreadLocal
	if r, _, _ := purego.SyscallN(fnStreamBeginCapture, w.call[:2]...); r != 0 {
		return 0, check("cuStreamBeginCapture", cuResult(int32(r)))
	}
	var failed error
	for i := range run {
		if r := w.launch(&run[i]); r != 0 && failed == nil {
			failed = launchError{commandError(&run[i], r)}
		}
	}
	// The capture always ends, so that the stream leaves capture mode whatever happened.
	var graph cuGraph
	w.call[0], w.call[1] = uintptr(w.stream), uintptr(unsafe.Pointer(&graph))
	r, _, _ := purego.SyscallN(fnStreamEndCapture, w.call[:2]...)
	if r != 0 || failed != nil {
		if graph != 0 {
			destroyGraph(graph)
		}
		if failed != nil {
			return 0, failed
		}
		return 0, check("cuStreamEndCapture", cuResult(int32(r)))
	}
	var exec cuGraphExec
	w.call[0], w.call[1], w.call[2] = uintptr(unsafe.Pointer(&exec)), uintptr(graph), 0
	r, _, _ = purego.SyscallN(fnGraphInstantiate, w.call[:3]...)
	destroyGraph(graph) // the instantiated graph does not need it
	if r != 0 {
		return 0, check(fmt.Sprintf("cuGraphInstantiateWithFlags of %d kernels", len(run)), cuResult(int32(r)))
	}
	return exec, nil
}

// launchGraph replays an instantiated graph on the stream; a failure is reported at the next sync.
func (w *worker) launchGraph(exec cuGraphExec) {
	w.call[0], w.call[1] = uintptr(exec), uintptr(w.stream)
	r, _, _ := purego.SyscallN(fnGraphLaunch, w.call[:2]...)
	if res := cuResult(int32(r)); res != 0 && w.err == nil {
		w.err = check("cuGraphLaunch", res)
	}
	w.g.replays++
}

// dropGraphs destroys every instantiated graph and forgets the runs seen; worker thread only, with
// no run held.
func (w *worker) dropGraphs() {
	g := &w.g
	for i := range g.cache {
		if e := &g.cache[i]; e.exec != 0 {
			destroyGraphExec(e.exec)
			*e = graphEntry{cmds: e.cmds[:0]}
		}
	}
	g.seen = [seenLen]uint64{}
}

// setGraphs turns graphs on or off for the work recorded from now on; turning them off destroys
// the graphs kept. They stay off where they are not allowed (no graph API, TFD_CUDA_GRAPHS=0) or
// have failed.
func (b *backend) setGraphs(on bool) {
	b.wait(false, func() error {
		g := &b.w.g
		if !on {
			b.w.dropGraphs()
		}
		g.on = on && g.allowed && g.err == nil
		return nil
	})
}

// graphState reports whether graphs are on, how many were captured and replayed so far, and why
// they were turned off if they failed.
func (b *backend) graphState() (on bool, captures, replays int, err error) {
	b.wait(false, func() error {
		g := &b.w.g
		on, captures, replays, err = g.on, g.captures, g.replays, g.err
		return nil
	})
	return on, captures, replays, err
}

func destroyGraph(g cuGraph) {
	purego.SyscallN(fnGraphDestroy, uintptr(g))
}

func destroyGraphExec(e cuGraphExec) {
	purego.SyscallN(fnGraphExecDestroy, uintptr(e))
}

// hashRun hashes the commands of a run: kernel, grid, block and arguments. It is a lookup key;
// a hit is confirmed by comparing the commands in full.
func hashRun(run []command) uint64 {
	h := uint64(0x9e3779b97f4a7c15)
	mix := func(v uint64) {
		h = (h ^ v) * 0xff51afd7ed558ccd
		h ^= h >> 32
	}
	for i := range run {
		c := &run[i]
		mix(uint64(c.kind) | uint64(c.nargs)<<8 | uint64(c.block)<<32)
		mix(uint64(c.grid[0]) | uint64(c.grid[1])<<32)
		mix(uint64(c.grid[2]) ^ uint64(uintptr(unsafe.Pointer(c.k))))
		for _, a := range c.args[:c.nargs] {
			mix(a)
		}
	}
	return h | 1 // never 0, the seen ring's empty value
}
