//go:build darwin && arm64

package metal

import (
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/ebitengine/purego/objc"

	"tfd/compute"
	"tfd/kernels"
)

// backend is the Metal implementation of compute.Backend, on the Mac's one GPU. It is driven by
// one goroutine at a time (the contract's rule). Ops encode into the compute pass of one open
// command buffer; Sync, ReadFloat32 and ReadInt32 commit it and wait. Metal needs no thread of
// its own, but the stretches that receive autoreleased objects run on a locked thread inside a
// pool (objc_darwin.go).
type backend struct {
	// Fixed at Open.
	dev     mtlDevice
	queue   mtlCommandQueue
	lib     mtlLibrary
	device  string // the device's name
	found   string // how it was found
	maxBuf  uint64 // maxBufferLength
	pipes   map[string]*pipeline
	errWord *buffer    // [4]int32: the kernels' error word (kernels/common.h)
	dummy   *buffer    // 16 bytes bound where a kernel argument has no tensor (no bias)
	ticks   [2]*buffer // the idle tick copies 16 bytes from the first to the second
	own     []*buffer  // the four above

	// Residency: the keeper is made at the first allocation, with opts as they are then. It is
	// read by compute.ResidencyStats from other goroutines (/metrics), hence the atomic pointer.
	opts       compute.ResidencyOptions
	logger     *slog.Logger
	keep       atomic.Pointer[keeper]
	wasLoaded  bool              // the keeper was told the load is over
	sets       []mtlResidencySet // the sets made for the keeper, released at Close
	workingSet uint64            // recommendedMaxWorkingSetSize at Open

	// The work being encoded: a retained command buffer and, within it, the compute pass being
	// encoded; zero ids when none.
	cmd mtlCommandBuffer
	enc mtlComputeCommandEncoder

	// attnPart is the attention kernels' scratch for the partial results of a row's key splits,
	// grown when a launch needs more (kernels.AttentionLaunch); nil until the first Attention.
	attnPart *tensor
	// qact is the quantized activations of a MatMul with quantized weights (quant_darwin.go),
	// grown as attnPart is; nil until the first.
	qact *tensor

	live    map[any]struct{} // tensors and pools not yet freed; Close releases them
	pending error            // an error met while encoding, for the next Sync
	closed  bool
}

// pipeline is one kernel's compute pipeline and what binding its arguments needs.
type pipeline struct {
	state   mtlComputePipelineState
	threads int
	params  []kernels.Param
	scalar  []uint64 // bytes of each scalar parameter (0 for buffers)
}

// open finds the device, compiles every kernel and makes the backend's own buffers. Missing
// frameworks or no usable device wrap compute.ErrNoDevice.
func open(opts compute.ResidencyOptions, logger *slog.Logger) (compute.Backend, error) {
	if err := load(); err != nil {
		return nil, fmt.Errorf("%w: metal: %v", compute.ErrNoDevice, err)
	}
	if logger == nil {
		logger = slog.Default()
	}
	b := &backend{opts: opts, logger: logger, pipes: map[string]*pipeline{}, live: map[any]struct{}{}}
	p := pushPool()
	err := b.init()
	p.pop()
	if err != nil {
		b.release()
		return nil, err
	}
	return b, nil
}

func (b *backend) init() error {
	if err := b.pickDevice(); err != nil {
		return err
	}
	if !b.dev.hasUnifiedMemory() {
		return fmt.Errorf("metal: %s has no unified memory; tfd keeps every tensor in shared storage and needs Apple silicon", b.device)
	}
	b.workingSet, b.maxBuf = b.dev.recommendedMaxWorkingSetSize(), b.dev.maxBufferLength()
	if b.queue = b.dev.newCommandQueue(); b.queue.id == 0 {
		return fmt.Errorf("metal: %s gave no command queue", b.device)
	}
	if err := b.compile(); err != nil {
		return err
	}
	for _, p := range []**buffer{&b.errWord, &b.dummy, &b.ticks[0], &b.ticks[1]} {
		var err error
		if *p, err = b.newBuffer(16); err != nil {
			return err
		}
		b.own = append(b.own, *p)
	}
	if b.found != "MTLCreateSystemDefaultDevice" {
		b.logger.Info("metal: took a device from MTLCopyAllDevices", "device", b.Describe())
	}
	return nil
}

// pickDevice takes the system default device or, where a process outside a login session (a
// LaunchDaemon, ssh) gets nil from MTLCreateSystemDefaultDevice, the first device with unified
// memory that MTLCopyAllDevices lists, and records which.
func (b *backend) pickDevice() error {
	if d := objc.ID(call(fnCreateSystemDefaultDevice)); d != 0 {
		b.dev, b.found = mtlDevice{d}, "MTLCreateSystemDefaultDevice"
		b.device = b.dev.name()
		return nil
	}
	all := nsArray{objc.ID(call(fnCopyAllDevices))}
	defer release(all.id)
	var n uint64
	if all.id != 0 {
		n = all.count()
	}
	for i := range n {
		if d := (mtlDevice{all.objectAtIndex(i)}); d.hasUnifiedMemory() {
			b.dev = mtlDevice{retain(d.id)}
			b.found = fmt.Sprintf("MTLCopyAllDevices, device %d of %d (MTLCreateSystemDefaultDevice returned nil, as it does for some processes outside a login session)", i+1, n)
			b.device = b.dev.name()
			return nil
		}
	}
	return fmt.Errorf("%w: metal: no Metal device: MTLCreateSystemDefaultDevice returned nil and MTLCopyAllDevices listed %d devices, none with unified memory", compute.ErrNoDevice, n)
}

// compile builds every kernel of tfd/kernels from kernels.Metal(): MSL 3.1, the newest version
// macOS 14 (the oldest macOS tfd computes on) has, pinned so that every macOS compiles the same
// language; safe math (MTLMathModeSafe and precise functions on macOS 15 and later, fast math
// off before), so the kernels' explicit operations keep their order and rounding. It makes the
// pipelines of the kernels this backend launches (launched).
func (b *backend) compile() error {
	start := time.Now()
	opts := newCompileOptions()
	defer release(opts.id)
	opts.setLanguageVersion(languageVersion3_1)
	opts.setFastMathEnabled(false)
	if responds(opts.id, sel_setMathMode) {
		opts.setMathMode(mathModeSafe)
	}
	if responds(opts.id, sel_setMathFloatingPointFunctions) {
		opts.setMathFloatingPointFunctions(mathFloatingPointFunctionsPrecise)
	}
	lib, warnings, err := b.dev.newLibraryWithSource(kernels.Metal(), opts)
	if err != nil {
		return err
	}
	b.lib = lib
	if warnings != "" {
		b.logger.Info("metal: the MSL compiler warned", "warnings", warnings)
	}
	for _, k := range kernels.All() {
		if !launched(k.Name) {
			continue
		}
		if err := b.newPipeline(k); err != nil {
			return err
		}
	}
	b.logger.Debug("metal: kernels compiled", "kernels", len(b.pipes), "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// newPipeline makes k's pipeline and checks what the kernel body assumes: SIMD groups of 32
// (its butterflies and per-SIMD-group slots) and room for its threads(N) in one threadgroup.
func (b *backend) newPipeline(k kernels.Kernel) error {
	f := b.lib.newFunctionWithName(k.Name)
	if f.id == 0 {
		return fmt.Errorf("metal: the compiled library has no kernel %s", k.Name)
	}
	state, err := b.dev.newComputePipelineStateWithFunction(f)
	release(f.id)
	if err != nil {
		return fmt.Errorf("%w (kernel %s)", err, k.Name)
	}
	p := &pipeline{state: state, threads: k.Threads, params: k.Params, scalar: make([]uint64, len(k.Params))}
	b.pipes[k.Name] = p
	if w := state.threadExecutionWidth(); w != 32 {
		return fmt.Errorf("metal: kernel %s runs in SIMD groups of %d threads on %s; tfd's kernels assume 32", k.Name, w, b.device)
	}
	if m := state.maxTotalThreadsPerThreadgroup(); m < uint64(k.Threads) {
		return fmt.Errorf("metal: kernel %s needs %d threads per threadgroup; %s allows it %d", k.Name, k.Threads, b.device, m)
	}
	for i, prm := range k.Params {
		if prm.Kind != kernels.Scalar {
			continue
		}
		switch prm.Type {
		case "int", "uint", "float":
			p.scalar[i] = 4
		case "ulong":
			p.scalar[i] = 8
		default:
			return fmt.Errorf("metal: kernel %s: scalar parameter %s of type %q", k.Name, prm.Name, prm.Type)
		}
	}
	return nil
}

// release lets go of everything the backend holds; Close and a failed Open call it.
func (b *backend) release() {
	for t := range b.live {
		for _, a := range buffersOf(t) {
			a.free()
		}
	}
	clear(b.live)
	for _, a := range b.own {
		a.free()
	}
	for _, p := range b.pipes {
		release(p.state.id)
	}
	clear(b.pipes)
	for _, s := range b.sets {
		b.queue.removeResidencySet(s) // the keeper ended residency; the set is the backend's
		release(s.id)
	}
	release(b.lib.id)
	release(b.queue.id)
	release(b.dev.id)
	b.own, b.sets, b.lib, b.queue, b.dev = nil, nil, mtlLibrary{}, mtlCommandQueue{}, mtlDevice{}
}

func (b *backend) Name() string { return "metal" }

// Memory returns the Mac's RAM (sysctl hw.memsize): the GPU shares it, and the memory plan takes
// its share of RAM as on the CPU. Where hw.memsize cannot be read it is the working set.
func (b *backend) Memory() uint64 {
	if ram, err := physicalMemory(); err == nil && ram > 0 {
		return ram
	}
	return b.workingSet
}

// WorkingSet implements compute.SharedMemory: the device's recommendedMaxWorkingSetSize at Open,
// what the GPU can use without hurting performance
// (https://developer.apple.com/documentation/metal/mtldevice/recommendedmaxworkingsetsize). Apple
// gives no figure; it has been seen at about 75% of RAM, and the iogpu.wired_limit_mb sysctl
// moves it. The memory plan never passes it.
func (b *backend) WorkingSet() uint64 { return b.workingSet }

// Describe names the device, how it was found and its memory, for logs.
func (b *backend) Describe() string {
	return fmt.Sprintf("%s (found by %s; recommended working set %.1f GiB, largest buffer %.1f GiB)",
		b.device, b.found, float64(b.workingSet)/(1<<30), float64(b.maxBuf)/(1<<30))
}

var (
	_ compute.Chainer       = (*backend)(nil)
	_ compute.DraftVerifier = (*backend)(nil)
	_ compute.Warmer        = (*backend)(nil)
	_ compute.Resident      = (*backend)(nil)
	_ compute.SharedMemory  = (*backend)(nil)
)

// SetResidency implements compute.Resident: it must come before the first Upload, Alloc or NewKV.
func (b *backend) SetResidency(opts compute.ResidencyOptions, logger *slog.Logger) error {
	if b.keep.Load() != nil {
		return errors.New("metal: SetResidency after the backend made its first tensor: set residency before loading the model")
	}
	b.opts = opts
	if logger != nil {
		b.logger = logger
	}
	return nil
}

// ResidencyStats implements compute.Resident: what /metrics shows of the keeper; zero before the first
// tensor. It is safe for concurrent use.
func (b *backend) ResidencyStats() compute.ResidencyStats {
	if k := b.keep.Load(); k != nil {
		return k.stats()
	}
	return compute.ResidencyStats{}
}

// residency returns the keeper, making it at the first call with the options set by then (Limit
// 0 is the device's working set, which the keeper applies anyway).
func (b *backend) residency() *keeper {
	k := b.keep.Load()
	if k == nil {
		k = newKeeper(b, b.opts, b.logger)
		for _, a := range b.own {
			k.track(a)
		}
		b.keep.Store(k)
	}
	return k
}

// loaded tells the keeper, once, that the load is over. It runs before the first command
// buffer of real work or the first idle tick: the engine makes its weights, KV pool and
// scratch before its first forward, so that is when the whole working set exists. Buffers
// made later are staged by the keeper like those of a request.
func (b *backend) loaded() {
	if b.wasLoaded {
		return
	}
	b.wasLoaded = true
	b.residency().loaded()
	if off, err := wiredCollectorDisabled(); err == nil && !off {
		b.logger.Info(wiredCollectorHint)
	}
}

// Sync commits the work encoded so far, waits for it, and returns, and forgets, the first error
// since the last Sync: a failed command buffer (its status and Metal's error), a data error
// reported by a kernel (a token, index or slot out of range), or one met while encoding.
func (b *backend) Sync() error {
	if b.closed {
		return errors.New("metal: Sync on a closed backend")
	}
	err := b.flush()
	err = errors.Join(b.pending, err, b.collectErrors())
	b.pending = nil
	return err
}

// Warm is the idle tick (compute.Warmer): the keeper commits what was staged during the last
// request and has the GPU copy 16 bytes inside the residency set, so the memory stays wired.
func (b *backend) Warm() error {
	if b.closed {
		return errors.New("metal: Warm on a closed backend")
	}
	if err := b.flush(); err != nil && b.pending == nil {
		b.pending = err // the next Sync reports it, as it would have
	}
	b.loaded()
	return b.residency().idle()
}

// Close waits for the work encoded so far, ends residency and releases everything.
func (b *backend) Close() error {
	if b.closed {
		return errors.New("metal: backend closed twice")
	}
	err := b.flush()
	b.closed = true
	if k := b.keep.Load(); k != nil {
		k.close()
	}
	b.release()
	return err
}

// collectErrors turns the error word into an error and clears it. The GPU must be idle.
func (b *backend) collectErrors() error {
	w := (*[4]int32)(b.errWord.host)
	e := *w
	if e[0] == 0 {
		return nil
	}
	*w = [4]int32{}
	switch e[0] {
	case 1:
		return fmt.Errorf("metal: Embed: token %d of row %d is outside the vocabulary", e[2], e[1])
	case 2:
		return fmt.Errorf("metal: Gather: index %d of row %d is outside src", e[2], e[1])
	case 3:
		return fmt.Errorf("metal: KVWrite: row %d: slot %d is outside the pool", e[1], e[2])
	case 4:
		return fmt.Errorf("metal: Attention: row %d: slot %d is outside the pool", e[1], e[2])
	case 5:
		return fmt.Errorf("metal: GroupByExpert: pair %d has expert %d, which the model lacks", e[1], e[2])
	case 6:
		return fmt.Errorf("metal: a DeltaNet step list: step %d (row %d) is outside the rows or the states", e[1], e[2])
	}
	return fmt.Errorf("metal: a kernel reported error %d (%d, %d)", e[0], e[1], e[2])
}

// commandBuffer returns the command buffer being encoded, opening one if there is none: the
// keeper hears first (at a request's start it commits what it staged since the last commit).
func (b *backend) commandBuffer() mtlCommandBuffer {
	if b.closed {
		panic("metal: op on a closed backend")
	}
	if b.cmd.id == 0 {
		b.loaded()
		b.residency().beforeWork()
		p := pushPool()
		b.cmd = mtlCommandBuffer{retain(b.queue.commandBuffer().id)}
		p.pop()
		if b.cmd.id == 0 {
			panic("metal: the command queue gave no command buffer")
		}
	}
	return b.cmd
}

// encoder returns the compute pass being encoded, opening one in the command buffer if needed.
func (b *backend) encoder() *mtlComputeCommandEncoder {
	if b.enc.id == 0 {
		cmd := b.commandBuffer()
		p := pushPool()
		b.enc.id = retain(cmd.computeCommandEncoder())
		p.pop()
		if b.enc.id == 0 {
			panic("metal: the command buffer gave no compute encoder")
		}
	}
	return &b.enc
}

// endCompute ends the compute pass being encoded, if any, so a blit pass can follow or the
// command buffer can be committed.
func (b *backend) endCompute() {
	if b.enc.id != 0 {
		b.enc.endEncoding()
		release(b.enc.id)
		b.enc.id = 0
	}
}

// flush commits the command buffer being encoded, if any, and waits for it; then the keeper
// hears that the device is idle.
func (b *backend) flush() error {
	if b.cmd.id == 0 {
		return nil
	}
	b.endCompute()
	cmd := b.cmd
	b.cmd = mtlCommandBuffer{}
	cmd.commit()
	err := b.wait(cmd, "a forward")
	b.residency().afterWork()
	return err
}

// wait waits for a committed command buffer, releases it, and reports its failure with its
// status and Metal's error.
func (b *backend) wait(cmd mtlCommandBuffer, what string) error {
	defer release(cmd.id)
	cmd.waitUntilCompleted()
	st := cmd.status()
	if st == commandBufferStatusCompleted {
		return nil
	}
	p := pushPool()
	defer p.pop()
	err := nsError(fmt.Sprintf("the command buffer of %s ended with status %v", what, st), cmd.error())
	return fmt.Errorf("%w (on %s)", err, b.device)
}

// arg is one kernel argument: a buffer at a byte offset, or a scalar's bits.
type arg struct {
	buf    *buffer
	off    uint64
	scalar uint64
}

// dispatch encodes one launch as kernels.*Launch describes it: argument i at index i, every
// buffer parameter bound (the dummy buffer where a tensor is absent), scalars with setBytes.
// Nothing is encoded for an empty grid.
func (b *backend) dispatch(l kernels.Launch, args ...arg) {
	p := b.pipes[l.Kernel]
	if p == nil {
		panic("metal: no pipeline for kernel " + l.Kernel)
	}
	if len(args) != len(p.params) || l.Threads != p.threads {
		panic(fmt.Sprintf("metal: %s takes %d arguments in threadgroups of %d, got %d in %d", l.Kernel, len(p.params), p.threads, len(args), l.Threads))
	}
	if l.Groups[0] <= 0 || l.Groups[1] <= 0 {
		return
	}
	e := b.encoder()
	e.setComputePipelineState(p.state)
	for i, a := range args {
		if n := p.scalar[i]; n > 0 {
			e.setBytes(a.scalar, n, uint64(i))
			continue
		}
		if a.buf == nil {
			a.buf, a.off = b.dummy, 0
		}
		e.setBuffer(a.buf.mtl, a.off, uint64(i))
	}
	e.dispatchThreadgroups(mtlSize{uint64(l.Groups[0]), uint64(l.Groups[1]), 1}, mtlSize{uint64(l.Threads), 1, 1})
}
