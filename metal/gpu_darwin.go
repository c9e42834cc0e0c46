//go:build darwin && arm64

package metal

import "errors"

// The backend is the residency keeper's gpu (device.go): it makes the residency set, reports
// the working set, and runs the idle tick.

var (
	_ gpu          = (*backend)(nil)
	_ residencySet = mtlResidencySet{}
)

// add and remove stage a buffer's entry into and out of the set (addAllocation:,
// removeAllocation:); the keeper only hands them the backend's own buffers.
func (s mtlResidencySet) add(a allocation)    { s.addAllocation(a.(*buffer).mtl) }
func (s mtlResidencySet) remove(a allocation) { s.removeAllocation(a.(*buffer).mtl) }

// newResidencySet makes a residency set for capacity allocations and attaches it to the command
// queue, so that every command buffer the queue commits carries it. Before macOS 15 there is no
// MTLResidencySetDescriptor class and the device does not answer
// newResidencySetWithDescriptor:error:, and it returns errNoResidencySets.
func (b *backend) newResidencySet(capacity int) (residencySet, error) {
	if class_MTLResidencySetDescriptor == 0 || !responds(b.dev.id, sel_newResidencySetWithDescriptor_error) {
		return nil, errNoResidencySets
	}
	p := pushPool()
	defer p.pop()
	desc := mtlResidencySetDescriptor{newObject(class_MTLResidencySetDescriptor)}
	defer release(desc.id)
	desc.setLabel("tfd")
	desc.setInitialCapacity(uint64(max(capacity, 0)))
	set, err := b.dev.newResidencySetWithDescriptor(desc)
	if err != nil {
		return nil, err
	}
	b.queue.addResidencySet(set)
	b.sets = append(b.sets, set)
	return set, nil
}

// workingSetLimit returns recommendedMaxWorkingSetSize, asked again each time: the
// iogpu.wired_limit_mb sysctl can move it while tfd runs.
func (b *backend) workingSetLimit() uint64 { return b.dev.recommendedMaxWorkingSetSize() }

// tick commits a command buffer that copies 16 bytes between the backend's two tick buffers,
// which the keeper holds in the residency set with every other buffer, and waits for it: the
// GPU runs real work, touching the set, while the host is idle. An idle backend has no work
// being encoded; should there be some, it is committed first and its error kept for Sync.
func (b *backend) tick() error {
	if b.closed {
		return errors.New("metal: tick on a closed backend")
	}
	if err := b.flush(); err != nil && b.pending == nil {
		b.pending = err
	}
	p := pushPool()
	cmd := mtlCommandBuffer{retain(b.queue.commandBuffer().id)}
	if cmd.id == 0 {
		p.pop()
		return errors.New("metal: tick: the command queue gave no command buffer")
	}
	e := cmd.blitCommandEncoder()
	if e.id == 0 {
		release(cmd.id) // never committed
		p.pop()
		return errors.New("metal: tick: the command buffer gave no blit encoder")
	}
	e.copyFromBuffer(b.ticks[0].mtl, 0, b.ticks[1].mtl, 0, 16)
	e.endEncoding()
	cmd.commit()
	p.pop()
	return b.wait(cmd, "the idle tick")
}
