package metal

import (
	"errors"
)

// allocation is one MTLBuffer (an MTLAllocation to a residency set): weights, the KV pool,
// scratch, logits, staging. Its size is fixed when it is made.
type allocation interface {
	// size returns the buffer's length in bytes (MTLBuffer length).
	size() uint64
}

// residencySet is an MTLResidencySet attached to the backend's command queue. Adds and removes
// are staged by Metal itself and take effect at commit.
type residencySet interface {
	add(a allocation)    // addAllocation:
	remove(a allocation) // removeAllocation:
	commit()             // commit
	requestResidency()   // requestResidency
	endResidency()       // endResidency
}

// gpu is what the residency keeper needs of a Metal device and its command queue. The darwin
// backend implements it with Objective-C calls; tests implement it with a fake.
type gpu interface {
	// newResidencySet makes a residency set with room for capacity allocations and attaches it
	// to the command queue (addResidencySet:), or returns errNoResidencySets where the OS has
	// none (macOS before 15).
	newResidencySet(capacity int) (residencySet, error)
	// workingSetLimit returns the device's recommendedMaxWorkingSetSize in bytes.
	workingSetLimit() uint64
	// tick commits a command buffer that copies 16 bytes between two buffers held in the
	// residency set, so that the GPU really runs something, and waits for it.
	tick() error
}

// errNoResidencySets is returned by gpu.newResidencySet where the OS has no MTLResidencySet.
var errNoResidencySets = errors.New("metal: this macOS has no residency sets (they came with macOS 15)")
