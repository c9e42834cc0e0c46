//go:build amd64 || arm64

package cuda

import (
	"fmt"
	"runtime"
	"unsafe"

	"github.com/ebitengine/purego"
)

// cmdKind is what a command does on the stream.
type cmdKind uint8

const (
	cmdLaunch cmdKind = iota + 1 // launch k with args
	cmdHtoD                      // args: device dst, host src, bytes
	cmdDtoH                      // args: host dst, device src, bytes
	cmdDtoD                      // args: device dst, device src, bytes
	cmdZero                      // args: device dst, bytes
	cmdEvent                     // args: event, recorded on the stream
)

// maxArgs is the most parameters a kernel takes (qk_rope_write_H_KV, 24).
const maxArgs = 24

// command is one op recorded for the worker. Commands live in batches, which are reused, so
// recording one allocates nothing. Each argument is 8 bytes; a 4-byte kernel parameter reads the
// low half, which is where a little-endian machine keeps it.
type command struct {
	kind   cmdKind
	nargs  uint8
	block  uint32
	shared uint32 // bytes of dynamic shared memory
	grid   [3]uint32
	k      *kernel
	args   [maxArgs]uint64
	// dependent lets a launch start while the kernel before it ends, where the worker's
	// programmatic dependent launch is on (pdl_linux.go).
	dependent bool
}

// batchLen is the number of commands in a batch. A decode forward of a small model fits in one;
// a full batch is handed over at once, so that the GPU starts on long forwards early.
const batchLen = 256

// cmdBatch is a run of commands, then optionally a wait: a stream synchronisation and/or a call made
// on the worker's thread, whose outcome the worker sends back on done.
type cmdBatch struct {
	cmds [batchLen]command
	n    int
	sync bool         // synchronise the stream and collect errors after the commands
	call func() error // run on the worker's thread after the commands (and sync)
}

// worker owns the OS thread on which the backend's context is current; it makes every driver
// call. The backend's goroutine records commands into cur and hands full batches over on full;
// the worker hands them back on free. Both channels hold every batch, so neither side blocks on a
// send.
type worker struct {
	full chan *cmdBatch
	free chan *cmdBatch
	done chan error
	cur  *cmdBatch // being recorded; owned by the backend's goroutine

	// Worker-thread state.
	stream cuStream
	err    error            // the first failed command since the last sync
	params [maxArgs]uintptr // pointers to the current launch's arguments
	call   [11]uintptr      // the argument block of SyscallN
	onSync func() error     // collects the kernels' error word after a sync
	g      graphs           // held launches and captured graphs (graph_linux.go)
	pdl    dependentLaunch  // programmatic dependent launch (pdl_linux.go)
}

const batches = 4

func newWorker() *worker {
	w := &worker{
		full: make(chan *cmdBatch, batches),
		free: make(chan *cmdBatch, batches),
		done: make(chan error, 1),
	}
	for range batches - 1 {
		w.free <- new(cmdBatch)
	}
	w.cur = new(cmdBatch)
	return w
}

// start runs the worker's loop on a new goroutine locked to its own OS thread. init runs there
// first; start returns its error, and the worker stops if it failed.
func (w *worker) start(init func() error) error {
	ready := make(chan error)
	go w.loop(init, ready)
	return <-ready
}

func (w *worker) loop(init func() error, ready chan<- error) {
	// The thread stays locked until the goroutine ends, and then it exits with it: the context
	// made current on it goes nowhere else.
	runtime.LockOSThread()
	if err := init(); err != nil {
		ready <- err
		return
	}
	ready <- nil
	for b := range w.full {
		for i := range b.n {
			w.take(&b.cmds[i])
		}
		b.n = 0
		if !b.sync && b.call == nil {
			// A run of launches may go on in the next batch: it stays held.
			w.free <- b
			continue
		}
		w.endRun()
		var err error
		if b.sync {
			err = w.synchronize()
		}
		if b.call != nil {
			if cerr := b.call(); err == nil {
				err = cerr
			}
		}
		b.sync, b.call = false, nil
		w.free <- b
		w.done <- err
	}
}

// record returns the next free command of the current batch, handing the batch over first if it
// is full.
func (w *worker) record() *command {
	if w.cur.n == batchLen {
		w.full <- w.cur
		w.cur = <-w.free
	}
	c := &w.cur.cmds[w.cur.n]
	w.cur.n++
	return c
}

// wait hands the current batch over with a wait and returns the outcome: with sync, after the
// stream has finished everything recorded so far; with call, after call has run on the worker's
// thread (after the sync, if both).
func (w *worker) wait(sync bool, call func() error) error {
	w.cur.sync, w.cur.call = sync, call
	w.full <- w.cur
	err := <-w.done
	w.cur = <-w.free
	return err
}

// flush hands the commands recorded so far to the worker without waiting for them, so that the
// device starts on them now rather than at the next wait. Launches at their end stay held as a
// run until a command that is not a launch.
func (w *worker) flush() {
	if w.cur.n == 0 {
		return
	}
	w.full <- w.cur
	w.cur = <-w.free
}

// stop ends the worker after everything recorded has run; final runs last on its thread.
func (w *worker) stop(final func() error) error {
	err := w.wait(true, final)
	close(w.full)
	return err
}

// exec runs one command on the worker's thread, now.
func (w *worker) exec(c *command) {
	var r uintptr
	switch c.kind {
	case cmdLaunch:
		r = uintptr(w.launch(c))
	case cmdHtoD, cmdDtoH, cmdDtoD:
		fn := fnMemcpyHtoDAsync
		if c.kind == cmdDtoH {
			fn = fnMemcpyDtoHAsync
		} else if c.kind == cmdDtoD {
			fn = fnMemcpyDtoDAsync
		}
		w.call[0], w.call[1], w.call[2], w.call[3] = uintptr(c.args[0]), uintptr(c.args[1]), uintptr(c.args[2]), uintptr(w.stream)
		r, _, _ = purego.SyscallN(fn, w.call[:4]...)
	case cmdZero:
		w.call[0], w.call[1], w.call[2], w.call[3] = uintptr(c.args[0]), 0, uintptr(c.args[1]), uintptr(w.stream)
		r, _, _ = purego.SyscallN(fnMemsetD8Async, w.call[:4]...)
	case cmdEvent:
		w.call[0], w.call[1] = uintptr(c.args[0]), uintptr(w.stream)
		r, _, _ = purego.SyscallN(fnEventRecord, w.call[:2]...)
	}
	if res := cuResult(int32(r)); res != 0 && w.err == nil {
		w.err = commandError(c, res)
	}
}

// launch launches kernel command c on the stream (or into the graph being captured on it).
func (w *worker) launch(c *command) cuResult {
	for i := range int(c.nargs) {
		w.params[i] = uintptr(unsafe.Pointer(&c.args[i]))
		if c.k.maps&(1<<i) != 0 {
			w.params[i] = uintptr(c.args[i]) // the map's host copy (tma_linux.go), which the driver copies
		}
	}
	if w.pdl.on && c.dependent {
		return w.launchDependent(c)
	}
	w.call = [11]uintptr{uintptr(c.k.fn), uintptr(c.grid[0]), uintptr(c.grid[1]), uintptr(c.grid[2]),
		uintptr(c.block), 1, 1, uintptr(c.shared), uintptr(w.stream), uintptr(unsafe.Pointer(&w.params[0])), 0}
	r, _, _ := purego.SyscallN(fnLaunchKernel, w.call[:11]...)
	return cuResult(int32(r))
}

// synchronize waits for the stream and returns, and forgets, the first error since the last
// synchronisation: a failed command, the stream's own failure, or an error a kernel reported.
func (w *worker) synchronize() error {
	w.call[0] = uintptr(w.stream)
	r, _, _ := purego.SyscallN(fnStreamSynchronize, w.call[:1]...)
	err := w.err
	w.err = nil
	if res := cuResult(int32(r)); res != 0 && err == nil {
		err = check("cuStreamSynchronize", res)
	}
	if w.onSync != nil {
		if kerr := w.onSync(); err == nil {
			err = kerr
		}
	}
	return err
}

// commandError describes a command the driver refused.
func commandError(c *command, r cuResult) error {
	switch c.kind {
	case cmdLaunch:
		return fmt.Errorf("cuda: launch of %s on %d×%d blocks of %d: %w", c.k.name, c.grid[0], c.grid[1], c.block, cuError(r))
	case cmdZero:
		return fmt.Errorf("cuda: cuMemsetD8Async of %d bytes: %w", c.args[1], cuError(r))
	case cmdEvent:
		return fmt.Errorf("cuda: cuEventRecord: %w", cuError(r))
	}
	names := map[cmdKind]string{cmdHtoD: "cuMemcpyHtoDAsync", cmdDtoH: "cuMemcpyDtoHAsync", cmdDtoD: "cuMemcpyDtoDAsync"}
	return fmt.Errorf("cuda: %s of %d bytes: %w", names[c.kind], c.args[2], cuError(r))
}
