package cuda

import (
	"fmt"
	"slices"
	"unsafe"
)

// HostFloat32 returns n float32s of page-locked host memory (compute.HostBuffers). ReadFloat32 into
// it is one copy, by the GPU's copy engine, where other memory takes a second, out of the pinned
// stage on the CPU: a 64-stream round of the 8B model reads 39 MB of logits, and that second copy
// took milliseconds (docs/performance.md). Close frees what FreeHost has not.
func (b *backend) HostFloat32(n int) ([]float32, error) {
	if n <= 0 {
		return nil, fmt.Errorf("cuda: HostFloat32 of %d floats", n)
	}
	var p unsafe.Pointer
	err := b.wait(false, func() error {
		var err error
		p, err = hostAlloc(4 * n)
		return err
	})
	if err != nil {
		return nil, err
	}
	buf := unsafe.Slice((*float32)(p), n)
	b.pinned = append(b.pinned, buf)
	return buf, nil
}

// FreeHost releases memory HostFloat32 returned. ReadFloat32 waits for its copy, so no copy into
// buf can be under way. After Close, which freed it, it does nothing.
func (b *backend) FreeHost(buf []float32) {
	if b.closed {
		return
	}
	i := slices.IndexFunc(b.pinned, func(p []float32) bool { return unsafe.SliceData(p) == unsafe.SliceData(buf) })
	if i < 0 {
		panic("cuda: FreeHost of memory HostFloat32 did not return")
	}
	b.pinned = slices.Delete(b.pinned, i, i+1)
	if err := b.wait(false, func() error {
		return check("cuMemFreeHost", cuMemFreeHost(unsafe.Pointer(unsafe.SliceData(buf))))
	}); err != nil {
		panic(fmt.Sprintf("cuda: FreeHost: %v", err)) // the pointer came from cuMemAllocHost
	}
}

// pinnedHolds reports whether dst lies within memory HostFloat32 returned and not freed, where a
// read may copy to directly.
func (b *backend) pinnedHolds(dst []float32) bool {
	if b.stagedReads || len(dst) == 0 {
		return false
	}
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(dst)))
	hi := lo + 4*uintptr(len(dst))
	for _, p := range b.pinned {
		at := uintptr(unsafe.Pointer(unsafe.SliceData(p)))
		if lo >= at && hi <= at+4*uintptr(len(p)) {
			return true
		}
	}
	return false
}
