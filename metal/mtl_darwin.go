//go:build darwin && arm64

package metal

import (
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/ebitengine/purego/objc"
)

// One Go type per Objective-C protocol or class tfd talks to, each wrapping the object, with
// methods named after the selectors they send. Objects made by new…, alloc/init or a Copy
// function are owned and released with release; objects returned otherwise are autoreleased
// and valid until the enclosing pool pops.

// mtlSize is MTLSize (https://developer.apple.com/documentation/metal/mtlsize): three NSUInteger.
type mtlSize struct{ width, height, depth uint64 }

// mtlDevice is an id<MTLDevice> (https://developer.apple.com/documentation/metal/mtldevice).
type mtlDevice struct{ id objc.ID }

func (d mtlDevice) name() string { return goString(objc.ID(send(d.id, sel_name))) }

func (d mtlDevice) hasUnifiedMemory() bool { return isTrue(send(d.id, sel_hasUnifiedMemory)) }

// recommendedMaxWorkingSetSize is the memory the GPU can use without hurting performance
// (https://developer.apple.com/documentation/metal/mtldevice/recommendedmaxworkingsetsize).
func (d mtlDevice) recommendedMaxWorkingSetSize() uint64 {
	return uint64(send(d.id, sel_recommendedMaxWorkingSetSize))
}

func (d mtlDevice) maxBufferLength() uint64 { return uint64(send(d.id, sel_maxBufferLength)) }

func (d mtlDevice) newCommandQueue() mtlCommandQueue {
	return mtlCommandQueue{objc.ID(send(d.id, sel_newCommandQueue))}
}

// newBufferWithLength returns a new buffer, cleared to zeros by Metal, or a nil one
// (https://developer.apple.com/documentation/metal/mtldevice/makebuffer(length:options:)).
func (d mtlDevice) newBufferWithLength(length uint64, options resourceOptions) mtlBuffer {
	return mtlBuffer{objc.ID(send(d.id, sel_newBufferWithLength_options, uintptr(length), uintptr(options)))}
}

// newLibraryWithSource compiles MSL source. A library may come with an NSError that holds only
// warnings; they are returned as text beside it. Call inside a pool.
// https://developer.apple.com/documentation/metal/mtldevice/makelibrary(source:options:)
func (d mtlDevice) newLibraryWithSource(source string, options mtlCompileOptions) (lib mtlLibrary, warnings string, err error) {
	src := nsString(source)
	defer release(src)
	var e objc.ID
	lib.id = objc.ID(send(d.id, sel_newLibraryWithSource_options_error, uintptr(src), uintptr(options.id), uintptr(unsafe.Pointer(&e))))
	if lib.id == 0 {
		return lib, "", nsError("newLibraryWithSource:options:error: (compiling tfd/kernels' MSL)", e)
	}
	if e != 0 {
		warnings = goString(objc.ID(send(e, sel_localizedDescription)))
	}
	return lib, warnings, nil
}

// newComputePipelineStateWithFunction returns the pipeline of one kernel. Call inside a pool.
// https://developer.apple.com/documentation/metal/mtldevice/makecomputepipelinestate(function:)
func (d mtlDevice) newComputePipelineStateWithFunction(f mtlFunction) (mtlComputePipelineState, error) {
	var e objc.ID
	p := objc.ID(send(d.id, sel_newComputePipelineStateWithFunction_error, uintptr(f.id), uintptr(unsafe.Pointer(&e))))
	if p == 0 {
		return mtlComputePipelineState{}, nsError("newComputePipelineStateWithFunction:error:", e)
	}
	return mtlComputePipelineState{p}, nil
}

// newResidencySetWithDescriptor returns a new residency set (macOS 15). Call inside a pool.
// https://developer.apple.com/documentation/metal/mtldevice/makeresidencyset(descriptor:)
func (d mtlDevice) newResidencySetWithDescriptor(desc mtlResidencySetDescriptor) (mtlResidencySet, error) {
	var e objc.ID
	s := objc.ID(send(d.id, sel_newResidencySetWithDescriptor_error, uintptr(desc.id), uintptr(unsafe.Pointer(&e))))
	if s == 0 {
		return mtlResidencySet{}, nsError("newResidencySetWithDescriptor:error:", e)
	}
	return mtlResidencySet{s}, nil
}

// mtlCompileOptions is an MTLCompileOptions
// (https://developer.apple.com/documentation/metal/mtlcompileoptions).
type mtlCompileOptions struct{ id objc.ID }

func newCompileOptions() mtlCompileOptions {
	return mtlCompileOptions{newObject(class_MTLCompileOptions)}
}

func (o mtlCompileOptions) setLanguageVersion(v languageVersion) {
	send(o.id, sel_setLanguageVersion, uintptr(v))
}

// setFastMathEnabled is the switch before macOS 15 (deprecated there for mathMode).
func (o mtlCompileOptions) setFastMathEnabled(on bool) {
	var v uintptr
	if on {
		v = 1
	}
	send(o.id, sel_setFastMathEnabled, v)
}

func (o mtlCompileOptions) setMathMode(m mathMode) { send(o.id, sel_setMathMode, uintptr(m)) }

func (o mtlCompileOptions) setMathFloatingPointFunctions(f mathFloatingPointFunctions) {
	send(o.id, sel_setMathFloatingPointFunctions, uintptr(f))
}

// mtlLibrary is an id<MTLLibrary> (https://developer.apple.com/documentation/metal/mtllibrary).
type mtlLibrary struct{ id objc.ID }

// newFunctionWithName returns the named kernel, or a nil function.
func (l mtlLibrary) newFunctionWithName(name string) mtlFunction {
	s := nsString(name)
	defer release(s)
	return mtlFunction{objc.ID(send(l.id, sel_newFunctionWithName, uintptr(s)))}
}

// mtlFunction is an id<MTLFunction> (https://developer.apple.com/documentation/metal/mtlfunction).
type mtlFunction struct{ id objc.ID }

// mtlComputePipelineState is an id<MTLComputePipelineState>
// (https://developer.apple.com/documentation/metal/mtlcomputepipelinestate).
type mtlComputePipelineState struct{ id objc.ID }

// threadExecutionWidth is the SIMD-group width the pipeline runs with.
func (p mtlComputePipelineState) threadExecutionWidth() uint64 {
	return uint64(send(p.id, sel_threadExecutionWidth))
}

func (p mtlComputePipelineState) maxTotalThreadsPerThreadgroup() uint64 {
	return uint64(send(p.id, sel_maxTotalThreadsPerThreadgroup))
}

// mtlBuffer is an id<MTLBuffer> (https://developer.apple.com/documentation/metal/mtlbuffer).
type mtlBuffer struct{ id objc.ID }

// contents is the buffer's CPU address (shared storage).
func (b mtlBuffer) contents() unsafe.Pointer { return pointerOf(send(b.id, sel_contents)) }

// gpuAddress is the buffer's address as kernels see it (macOS 13).
func (b mtlBuffer) gpuAddress() uint64 { return uint64(send(b.id, sel_gpuAddress)) }

// mtlCommandQueue is an id<MTLCommandQueue>
// (https://developer.apple.com/documentation/metal/mtlcommandqueue).
type mtlCommandQueue struct{ id objc.ID }

// commandBuffer returns an autoreleased command buffer that retains the resources it uses.
func (q mtlCommandQueue) commandBuffer() mtlCommandBuffer {
	return mtlCommandBuffer{objc.ID(send(q.id, sel_commandBuffer))}
}

// addResidencySet attaches a set to every command buffer the queue commits from now on.
// https://developer.apple.com/documentation/metal/mtlcommandqueue/addresidencyset(_:)
func (q mtlCommandQueue) addResidencySet(s mtlResidencySet) {
	send(q.id, sel_addResidencySet, uintptr(s.id))
}

// removeResidencySet detaches a set from the queue's command buffers.
func (q mtlCommandQueue) removeResidencySet(s mtlResidencySet) {
	send(q.id, sel_removeResidencySet, uintptr(s.id))
}

// mtlCommandBuffer is an id<MTLCommandBuffer>
// (https://developer.apple.com/documentation/metal/mtlcommandbuffer).
type mtlCommandBuffer struct{ id objc.ID }

// computeCommandEncoder returns an autoreleased encoder that dispatches serially.
func (c mtlCommandBuffer) computeCommandEncoder() objc.ID {
	return objc.ID(send(c.id, sel_computeCommandEncoder))
}

// blitCommandEncoder returns an autoreleased blit encoder.
func (c mtlCommandBuffer) blitCommandEncoder() mtlBlitCommandEncoder {
	return mtlBlitCommandEncoder{objc.ID(send(c.id, sel_blitCommandEncoder))}
}

func (c mtlCommandBuffer) commit()             { send(c.id, sel_commit) }
func (c mtlCommandBuffer) waitUntilCompleted() { send(c.id, sel_waitUntilCompleted) }

func (c mtlCommandBuffer) status() commandBufferStatus {
	return commandBufferStatus(send(c.id, sel_status))
}

// error is the NSError of a failed command buffer (autoreleased), or nil.
func (c mtlCommandBuffer) error() objc.ID { return objc.ID(send(c.id, sel_error)) }

// mtlComputeCommandEncoder is an id<MTLComputeCommandEncoder>
// (https://developer.apple.com/documentation/metal/mtlcomputecommandencoder). It is the hot
// path: its messages go through a preset argument block, and setBytes and the MTLSize pair
// read fields of the encoder, so encoding allocates nothing. It must live on the heap (a field
// of the backend) while Metal reads those fields, which it does within each call.
type mtlComputeCommandEncoder struct {
	id     objc.ID
	block  [5]uintptr // self, _cmd and up to three arguments
	scalar uint64     // what setBytes copies
	sizes  [2]mtlSize // threadgroups per grid, threads per threadgroup
}

func (e *mtlComputeCommandEncoder) send(sel objc.SEL, args ...uintptr) {
	e.block[0], e.block[1] = uintptr(e.id), uintptr(sel)
	n := 2 + copy(e.block[2:], args)
	purego.SyscallN(msgSend, e.block[:n]...)
}

func (e *mtlComputeCommandEncoder) setComputePipelineState(p mtlComputePipelineState) {
	e.send(sel_setComputePipelineState, uintptr(p.id))
}

func (e *mtlComputeCommandEncoder) setBuffer(b mtlBuffer, offset, index uint64) {
	e.send(sel_setBuffer_offset_atIndex, uintptr(b.id), uintptr(offset), uintptr(index))
}

// setBytes binds the low size bytes of v (little-endian) at index; Metal copies them at once.
func (e *mtlComputeCommandEncoder) setBytes(v uint64, size, index uint64) {
	e.scalar = v
	e.send(sel_setBytes_length_atIndex, uintptr(unsafe.Pointer(&e.scalar)), uintptr(size), uintptr(index))
}

// dispatchThreadgroups runs groups threadgroups of threads threads each.
func (e *mtlComputeCommandEncoder) dispatchThreadgroups(groups, threads mtlSize) {
	e.sizes = [2]mtlSize{groups, threads}
	e.send(sel_dispatchThreadgroups_threadsPerThreadgroup, uintptr(unsafe.Pointer(&e.sizes[0])), uintptr(unsafe.Pointer(&e.sizes[1])))
}

// endEncoding ends the pass (MTLCommandEncoder).
func (e *mtlComputeCommandEncoder) endEncoding() { e.send(sel_endEncoding) }

// mtlBlitCommandEncoder is an id<MTLBlitCommandEncoder>
// (https://developer.apple.com/documentation/metal/mtlblitcommandencoder).
type mtlBlitCommandEncoder struct{ id objc.ID }

// copyFromBuffer copies size bytes; the two ranges must not overlap.
func (e mtlBlitCommandEncoder) copyFromBuffer(src mtlBuffer, srcOffset uint64, dst mtlBuffer, dstOffset, size uint64) {
	send(e.id, sel_copyFromBuffer_sourceOffset_toBuffer_destinationOffset_size,
		uintptr(src.id), uintptr(srcOffset), uintptr(dst.id), uintptr(dstOffset), uintptr(size))
}

func (e mtlBlitCommandEncoder) endEncoding() { send(e.id, sel_endEncoding) }

// mtlResidencySetDescriptor is an MTLResidencySetDescriptor (macOS 15)
// (https://developer.apple.com/documentation/metal/mtlresidencysetdescriptor).
type mtlResidencySetDescriptor struct{ id objc.ID }

func (d mtlResidencySetDescriptor) setInitialCapacity(n uint64) {
	send(d.id, sel_setInitialCapacity, uintptr(n))
}

func (d mtlResidencySetDescriptor) setLabel(label string) {
	s := nsString(label)
	defer release(s)
	send(d.id, sel_setLabel, uintptr(s))
}

// mtlResidencySet is an id<MTLResidencySet> (macOS 15)
// (https://developer.apple.com/documentation/metal/mtlresidencyset). Adds and removes are
// staged until commit; gpu_darwin.go makes it the keeper's residencySet.
type mtlResidencySet struct{ id objc.ID }

func (s mtlResidencySet) addAllocation(b mtlBuffer) { send(s.id, sel_addAllocation, uintptr(b.id)) }
func (s mtlResidencySet) removeAllocation(b mtlBuffer) {
	send(s.id, sel_removeAllocation, uintptr(b.id))
}
func (s mtlResidencySet) commit()           { send(s.id, sel_commit) }
func (s mtlResidencySet) requestResidency() { send(s.id, sel_requestResidency) }
func (s mtlResidencySet) endResidency()     { send(s.id, sel_endResidency) }

// nsArray is an NSArray (https://developer.apple.com/documentation/foundation/nsarray).
type nsArray struct{ id objc.ID }

func (a nsArray) count() uint64 { return uint64(send(a.id, sel_count)) }

func (a nsArray) objectAtIndex(i uint64) objc.ID {
	return objc.ID(send(a.id, sel_objectAtIndex, uintptr(i)))
}

// String names the status as Apple does, for errors.
func (s commandBufferStatus) String() string {
	names := [...]string{"NotEnqueued", "Enqueued", "Committed", "Scheduled", "Completed", "Error"}
	if int(s) < len(names) {
		return "MTLCommandBufferStatus" + names[s]
	}
	return "MTLCommandBufferStatus(unknown)"
}
