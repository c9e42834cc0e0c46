//go:build amd64 || arm64

package cuda

import (
	"fmt"
	"unsafe"

	"github.com/ebitengine/purego"

	"tfd/compute"
)

// Reads that do not wait for the whole stream (compute.AsyncReader). A greedy chain's host takes
// a step's token while the device runs the next step: a ReadInt32 would synchronise the stream,
// so the next step could not start until the host had read this one and recorded it. Instead each
// of compute.AsyncReads slots has pinned host memory and an event. ReadInt32Async records a copy
// into its slot and the event after it, and hands the recorded work to the worker at once;
// AwaitInt32 waits for that event alone. The copy and the event are commands of their own, outside
// every graph, so the launches before them are replayed as one graph as usual.

// asyncSlot is one read's place.
type asyncSlot struct {
	event  cuEvent
	host   []int32        // pinned, compute.MaxAsyncRead values
	ticket compute.Ticket // the read the slot holds until it is awaited; 0: none
}

// asyncReads is the backend's ring of read slots. The slots' memory and events are made at Open
// and freed at Close, on the worker's thread; the rest is the backend goroutine's.
type asyncReads struct {
	slots  [compute.AsyncReads]asyncSlot
	last   compute.Ticket // the last ticket handed out; the first is 1
	waitOn cuEvent        // the event the worker's wait call waits for
	wait   func() error   // runs on the worker's thread: waits for waitOn; made once
}

// cuEventDisableTiming is CU_EVENT_DISABLE_TIMING: the event only orders, it keeps no time.
const cuEventDisableTiming = 2

// initAsync makes the slots' pinned memory and events; worker thread only.
func (b *backend) initAsync() error {
	r := &b.async
	host, err := hostAlloc(compute.AsyncReads * compute.MaxAsyncRead * 4)
	if err != nil {
		return err
	}
	all := unsafe.Slice((*int32)(host), compute.AsyncReads*compute.MaxAsyncRead)
	for i := range r.slots {
		s := &r.slots[i]
		s.host = all[i*compute.MaxAsyncRead : (i+1)*compute.MaxAsyncRead]
		if err := check("cuEventCreate", cuEventCreate(&s.event, cuEventDisableTiming)); err != nil {
			return err
		}
	}
	r.wait = func() error {
		b.w.call[0] = uintptr(r.waitOn)
		res, _, _ := purego.SyscallN(fnEventSynchronize, b.w.call[:1]...)
		return check("cuEventSynchronize", cuResult(int32(res)))
	}
	return nil
}

// releaseAsync frees what initAsync made; worker thread only, with the stream idle.
func (b *backend) releaseAsync(keep func(call string, r cuResult)) {
	r := &b.async
	for i := range r.slots {
		if s := &r.slots[i]; s.event != 0 {
			keep("cuEventDestroy", cuEventDestroy(s.event))
			s.event = 0
		}
	}
	if h := r.slots[0].host; h != nil {
		keep("cuMemFreeHost", cuMemFreeHost(unsafe.Pointer(unsafe.SliceData(h))))
	}
	for i := range r.slots {
		r.slots[i].host = nil
	}
}

// ReadInt32Async implements compute.AsyncReader: it records a copy of src's first n values into
// the next slot and the slot's event after it, and hands everything recorded to the worker.
func (b *backend) ReadInt32Async(src compute.Tensor, n int) compute.Ticket {
	if n < 1 || n > compute.MaxAsyncRead {
		panic(fmt.Sprintf("cuda: ReadInt32Async of %d values: want 1 to %d", n, compute.MaxAsyncRead))
	}
	s := b.tensorOf(src, "ReadInt32Async", "src", compute.I32, n)
	r := &b.async
	r.last++
	slot := &r.slots[r.last%compute.AsyncReads]
	slot.ticket = r.last // a read not awaited by now is overtaken
	c := b.record()
	*c = command{kind: cmdDtoH, args: [maxArgs]uint64{uint64(uintptr(unsafe.Pointer(unsafe.SliceData(slot.host)))), uint64(s.ptr), uint64(4 * n)}}
	c = b.record()
	*c = command{kind: cmdEvent, args: [maxArgs]uint64{uint64(slot.event)}}
	b.flush()
	return r.last
}

// AwaitInt32 implements compute.AsyncReader: it waits, on the worker's thread, for the event
// recorded after read t's copy, then copies the slot out.
func (b *backend) AwaitInt32(t compute.Ticket, dst []int32) error {
	r := &b.async
	slot := &r.slots[t%compute.AsyncReads]
	switch {
	case t == 0 || slot.ticket != t:
		return fmt.Errorf("cuda: AwaitInt32: read %d was awaited already, or %d reads came after it (the most kept is %d)", t, r.last-t, compute.AsyncReads)
	case len(dst) > compute.MaxAsyncRead:
		return fmt.Errorf("cuda: AwaitInt32 into %d values: a read holds at most %d", len(dst), compute.MaxAsyncRead)
	}
	slot.ticket = 0
	r.waitOn = slot.event
	err := b.wait(false, r.wait)
	copy(dst, slot.host)
	return err
}
