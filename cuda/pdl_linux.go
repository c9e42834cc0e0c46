package cuda

import (
	"strings"
	"unsafe"

	"github.com/ebitengine/purego"
)

// Programmatic dependent launch (compute capability 9.0 and later, CUDA 12.0's
// cuLaunchKernelEx). A kernel is normally started only once the kernel before it on the stream
// has finished and its writes are flushed, and in a decode step of an 8B model that gap comes
// some 500 times: after every norm, rope and matmul. Launched with the programmatic
// stream-serialization attribute, a kernel's groups may start as soon as every group of the one
// before has begun (GRID_RELEASE), and wait there in GRID_WAIT until it is done (the CUDA
// prelude). Every kernel waits before it reads or writes anything another kernel touches, so the
// results are the same bits either way; the packed matmuls fetch their first chunks of weights
// before they wait, so the weights are already streaming when the step before them ends.
//
// It is on where the device and driver allow it, unless TFD_CUDA_PDL=0, for the kernels of forwards
// of at most pdlRows rows (TFD_CUDA_PDL_ROWS=N sets N; 0: every forward), but for a heavy kernel
// straight after a heavy one where TFD_CUDA_SERIAL_HEAVY=1 (heavy). Captured graphs keep it: stream
// capture records the programmatic edges.

// cuLaunchKernelEx(config, f, params, extra), bound when the driver has it (CUDA 12.0 and later).
var fnLaunchKernelEx uintptr

// cuLaunchAttributeProgrammaticStreamSerialization is CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION.
const cuLaunchAttributeProgrammaticStreamSerialization = 6

// launchConfig is CUlaunchConfig, field for field on a 64-bit machine.
type launchConfig struct {
	gridX, gridY, gridZ    uint32
	blockX, blockY, blockZ uint32
	sharedMemBytes         uint32
	_                      uint32
	stream                 cuStream
	attrs                  *launchAttribute
	numAttrs               uint32
	_                      uint32
}

// launchAttribute is CUlaunchAttribute: an id, padding to 8 bytes, and a 64-byte union whose
// first int, for this attribute, is programmaticStreamSerializationAllowed.
type launchAttribute struct {
	id    uint32
	_     uint32
	value [64]byte
}

// The layouts the driver reads; a mismatch fails the build.
var (
	_ [56 - unsafe.Sizeof(launchConfig{})]struct{}
	_ [unsafe.Sizeof(launchConfig{}) - 56]struct{}
	_ [72 - unsafe.Sizeof(launchAttribute{})]struct{}
	_ [unsafe.Sizeof(launchAttribute{}) - 72]struct{}
)

// dependentLaunch is the worker's preset launch configuration for programmatic dependent
// launches; worker thread only.
type dependentLaunch struct {
	on   bool
	cfg  launchConfig
	attr launchAttribute
}

// pdlRows is the most rows of a forward whose kernels are launched dependent. On the H200 with
// the 8B model it gave one stream 3-6% (its forward is some 500 short kernels, and the packed
// matmuls' weights stream in early), and cost 32 and 64 streams 10-20% (docs/performance.md).
const pdlRows = 8

// heavy reports whether the kernel named fills the GPU streaming a large operand through it:
// the matmuls (dense, quantized and of experts) and attention over the KV cache. With
// TFD_CUDA_SERIAL_HEAVY=1 a heavy kernel recorded straight after another is launched not
// dependent (backend.launch), so that it starts only once that one has ended. On the H200 the
// 8B's 145 one-row matmuls of a token, with every other kernel left out, took 4.91 ms launched
// dependent and 4.26 ms each after the one before; with only attention_combine left out, o's
// matmul started under attention and the step lost 5% (docs/performance.md, "Where a one-row
// step's time goes in the chain"). A dense forward never records two heavy kernels in a row, so
// there the setting changes nothing (measured for matmuls: 200.3 tok/s against 200.6 and
// 200.2); where it acts (Qwen3-Next's q gate after q/k/v, a mixture's experts' gate then up and
// its shared expert's matmuls, matrices on the CUDA cores one launch each, attention without a
// combine) it was measured on the Qwen3-30B-A3B shape at +0.1-0.8%, inside the noise, so it is
// off by default. Between a small kernel and the heavy
// one after it dependent launch stays: there a matmul's weights start streaming while the small
// kernel runs, worth 2.5% of the 8B's token.
func heavy(name string) bool {
	for _, p := range heavyPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// heavyPrefixes begin the names of the heavy kernels' families (attention_combine is light).
var heavyPrefixes = [...]string{"matmul_", "qmatmul_", "expert_matmul_", "expert_qmatmul_", "attention_split_", "attention_warp_", "attention_tile_"}

// pdlAvailable reports whether programmatic dependent launch can be used on a device of the given
// compute capability with the driver loaded.
func pdlAvailable(major int32) bool { return major >= 9 && fnLaunchKernelEx != 0 }

// setDependentLaunch turns programmatic dependent launch on or off for the launches from now on;
// worker thread only, with no run held. Graphs captured the other way are dropped.
func (w *worker) setDependentLaunch(on bool) {
	if w.pdl.on == on {
		return
	}
	w.dropGraphs()
	w.pdl.on = on
	w.pdl.attr.id = cuLaunchAttributeProgrammaticStreamSerialization
	w.pdl.attr.value[0] = 1
	w.pdl.cfg.attrs = &w.pdl.attr
	w.pdl.cfg.numAttrs = 1
}

// launchDependent launches kernel command c with the programmatic stream-serialization attribute;
// w.params holds its arguments.
func (w *worker) launchDependent(c *command) cuResult {
	p := &w.pdl.cfg
	p.gridX, p.gridY, p.gridZ = uint32(c.grid[0]), uint32(c.grid[1]), uint32(c.grid[2])
	p.blockX, p.blockY, p.blockZ = uint32(c.block), 1, 1
	p.sharedMemBytes = c.shared
	p.stream = w.stream
	w.call[0], w.call[1], w.call[2], w.call[3] = uintptr(unsafe.Pointer(p)), uintptr(c.k.fn), uintptr(unsafe.Pointer(&w.params[0])), 0
	r, _, _ := purego.SyscallN(fnLaunchKernelEx, w.call[:4]...)
	return cuResult(int32(r))
}

// setDependentLaunch turns programmatic dependent launch on or off for the work recorded from now
// on, where the device allows it (tests and benchmarks: the bits must not change, the time may).
func (b *backend) setDependentLaunch(on bool) {
	b.wait(false, func() error {
		b.w.setDependentLaunch(on && b.pdlAllowed)
		return nil
	})
}
