//go:build amd64 || arm64

package cuda

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"

	"tfd/compute"
)

// Driver API types (cuda.h).
type (
	cuResult    int32   // CUresult
	cuDevice    int32   // CUdevice
	cuContext   uintptr // CUcontext
	cuModule    uintptr // CUmodule
	cuFunction  uintptr // CUfunction
	cuStream    uintptr // CUstream
	cuGraph     uintptr // CUgraph
	cuGraphExec uintptr // CUgraphExec
	cuEvent     uintptr // CUevent
	devPtr      uint64  // CUdeviceptr
)

// CUdevice_attribute values.
const (
	attrMultiprocessorCount    = 16
	attrComputeCapabilityMajor = 75
	attrComputeCapabilityMinor = 76
)

// cuStreamNonBlocking is CU_STREAM_NON_BLOCKING: the stream does not wait for the legacy default
// stream.
const cuStreamNonBlocking = 1

// The driver API, bound once by loadDriver. Calls that run once per op (launches, async copies)
// are not here but in the fn* entry points below: a purego-registered function goes through
// reflection and allocates on every call.
var (
	cuInit                    func(flags uint32) cuResult
	cuDeviceGetCount          func(n *int32) cuResult
	cuDeviceGet               func(dev *cuDevice, ordinal int32) cuResult
	cuDeviceGetName           func(name *byte, n int32, dev cuDevice) cuResult
	cuDeviceGetAttribute      func(v *int32, attr int32, dev cuDevice) cuResult
	cuDeviceTotalMem          func(bytes *uint64, dev cuDevice) cuResult // cuDeviceTotalMem_v2
	cuDevicePrimaryCtxRetain  func(ctx *cuContext, dev cuDevice) cuResult
	cuDevicePrimaryCtxRelease func(dev cuDevice) cuResult // cuDevicePrimaryCtxRelease_v2
	cuCtxSetCurrent           func(ctx cuContext) cuResult
	cuStreamCreate            func(s *cuStream, flags uint32) cuResult
	cuStreamDestroy           func(s cuStream) cuResult // cuStreamDestroy_v2
	cuStreamSynchronize       func(s cuStream) cuResult
	cuModuleLoadData          func(m *cuModule, image *byte) cuResult
	cuModuleUnload            func(m cuModule) cuResult
	cuModuleGetFunction       func(f *cuFunction, m cuModule, name string) cuResult
	cuMemAlloc                func(p *devPtr, bytes uintptr) cuResult         // cuMemAlloc_v2
	cuMemFree                 func(p devPtr) cuResult                         // cuMemFree_v2
	cuMemAllocHost            func(p *unsafe.Pointer, bytes uintptr) cuResult // cuMemAllocHost_v2
	cuMemFreeHost             func(p unsafe.Pointer) cuResult
	cuMemcpyHtoDAsync         func(dst devPtr, src unsafe.Pointer, bytes uintptr, s cuStream) cuResult // _v2
	cuEventCreate             func(e *cuEvent, flags uint32) cuResult
	cuEventDestroy            func(e cuEvent) cuResult // cuEventDestroy_v2
	cuGetErrorName            func(r cuResult, s **byte) cuResult
	cuGetErrorString          func(r cuResult, s **byte) cuResult
)

// Entry points called from the worker with purego.SyscallN and a preset argument block, which
// allocates nothing.
var (
	fnLaunchKernel      uintptr // cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra)
	fnMemcpyHtoDAsync   uintptr // cuMemcpyHtoDAsync_v2(dst, src, bytes, stream)
	fnMemcpyDtoHAsync   uintptr // cuMemcpyDtoHAsync_v2(dst, src, bytes, stream)
	fnMemcpyDtoDAsync   uintptr // cuMemcpyDtoDAsync_v2(dst, src, bytes, stream)
	fnMemsetD8Async     uintptr // cuMemsetD8Async(dst, value, n, stream)
	fnStreamSynchronize uintptr
	fnEventRecord       uintptr // cuEventRecord(event, stream)
	fnEventSynchronize  uintptr // cuEventSynchronize(event)
)

// The graph entry points (graph_linux.go), bound when the driver has them (CUDA 11.4 and later);
// without them the backend launches every kernel itself. Capture and instantiation run once per
// captured graph; cuGraphLaunch runs once per forward, so it too goes through SyscallN.
var (
	fnStreamBeginCapture  uintptr // cuStreamBeginCapture_v2(stream, mode)
	fnStreamEndCapture    uintptr // cuStreamEndCapture(stream, *graph)
	fnGraphInstantiate    uintptr // cuGraphInstantiateWithFlags(*exec, graph, flags uint64)
	fnGraphLaunch         uintptr // cuGraphLaunch(exec, stream)
	fnGraphExecDestroy    uintptr // cuGraphExecDestroy(exec)
	fnGraphDestroy        uintptr // cuGraphDestroy(graph)
	graphBindingsErr      error   // why the graph entry points are missing, if they are
	graphBindingsOptional = []binding{
		{name: "cuStreamBeginCapture_v2", addr: &fnStreamBeginCapture},
		{name: "cuStreamEndCapture", addr: &fnStreamEndCapture},
		{name: "cuGraphInstantiateWithFlags", addr: &fnGraphInstantiate},
		{name: "cuGraphLaunch", addr: &fnGraphLaunch},
		{name: "cuGraphExecDestroy", addr: &fnGraphExecDestroy},
		{name: "cuGraphDestroy", addr: &fnGraphDestroy},
	}
)

// binding ties a C symbol to a Go function variable (fn) or to a raw entry point (addr).
type binding struct {
	name string
	fn   any
	addr *uintptr
}

var driverBindings = []binding{
	{name: "cuInit", fn: &cuInit},
	{name: "cuDeviceGetCount", fn: &cuDeviceGetCount},
	{name: "cuDeviceGet", fn: &cuDeviceGet},
	{name: "cuDeviceGetName", fn: &cuDeviceGetName},
	{name: "cuDeviceGetAttribute", fn: &cuDeviceGetAttribute},
	{name: "cuDeviceTotalMem_v2", fn: &cuDeviceTotalMem},
	{name: "cuDevicePrimaryCtxRetain", fn: &cuDevicePrimaryCtxRetain},
	{name: "cuDevicePrimaryCtxRelease_v2", fn: &cuDevicePrimaryCtxRelease},
	{name: "cuCtxSetCurrent", fn: &cuCtxSetCurrent},
	{name: "cuStreamCreate", fn: &cuStreamCreate},
	{name: "cuStreamDestroy_v2", fn: &cuStreamDestroy},
	{name: "cuStreamSynchronize", fn: &cuStreamSynchronize},
	{name: "cuModuleLoadData", fn: &cuModuleLoadData},
	{name: "cuModuleUnload", fn: &cuModuleUnload},
	{name: "cuModuleGetFunction", fn: &cuModuleGetFunction},
	{name: "cuMemAlloc_v2", fn: &cuMemAlloc},
	{name: "cuMemFree_v2", fn: &cuMemFree},
	{name: "cuMemAllocHost_v2", fn: &cuMemAllocHost},
	{name: "cuMemFreeHost", fn: &cuMemFreeHost},
	{name: "cuMemcpyHtoDAsync_v2", fn: &cuMemcpyHtoDAsync},
	{name: "cuEventCreate", fn: &cuEventCreate},
	{name: "cuEventDestroy_v2", fn: &cuEventDestroy},
	{name: "cuGetErrorName", fn: &cuGetErrorName},
	{name: "cuGetErrorString", fn: &cuGetErrorString},
	{name: "cuLaunchKernel", addr: &fnLaunchKernel},
	{name: "cuMemcpyHtoDAsync_v2", addr: &fnMemcpyHtoDAsync},
	{name: "cuMemcpyDtoHAsync_v2", addr: &fnMemcpyDtoHAsync},
	{name: "cuMemcpyDtoDAsync_v2", addr: &fnMemcpyDtoDAsync},
	{name: "cuMemsetD8Async", addr: &fnMemsetD8Async},
	{name: "cuStreamSynchronize", addr: &fnStreamSynchronize},
	{name: "cuEventRecord", addr: &fnEventRecord},
	{name: "cuEventSynchronize", addr: &fnEventSynchronize},
}

var (
	driverOnce sync.Once
	driverErr  error       // the outcome of loading and initialising libcuda, for every Open
	goHandlers *sigactions // every signal's action before libcuda loaded: Go's
)

// loadDriver opens libcuda, binds the driver API and calls cuInit, once per process. Whatever
// comes of it, the signal actions it changed are put back (signals_linux.go): a process that
// falls back to another backend keeps libcuda loaded.
func loadDriver() error {
	driverOnce.Do(func() {
		goHandlers = readSigactions()
		openDriver()
		putBackSigactions(goHandlers, "cuInit")
	})
	return driverErr
}

// openDriver is loadDriver's work.
func openDriver() {
	lib, path, err := dlopenFirst("NVIDIA driver library libcuda.so.1", "TFD_LIBCUDA", driverCandidates())
	if err != nil {
		driverErr = fmt.Errorf("%w: %w", compute.ErrNoDevice, err)
		return
	}
	if driverErr = bind(lib, path, driverBindings); driverErr != nil {
		return
	}
	graphBindingsErr = bind(lib, path, graphBindingsOptional)
	// Without it (a driver before CUDA 12.0) fnLaunchKernelEx stays 0 and every launch waits
	// for the kernel before it (pdl_linux.go).
	_ = bind(lib, path, []binding{{name: "cuLaunchKernelEx", addr: &fnLaunchKernelEx}})
	// Without these (before CUDA 12.0) the copy engine's matmul stays off (tma_linux.go).
	_ = bind(lib, path, tmaBindings)
	if r := cuInit(0); r == cudaErrorNoDevice {
		driverErr = fmt.Errorf("%w: cuda: cuInit with %s: %w", compute.ErrNoDevice, path, cuError(r))
	} else if r != 0 {
		driverErr = fmt.Errorf("cuda: cuInit with %s: %w (is an NVIDIA GPU visible to this process?)", path, cuError(r))
	}
}

// triplet is the Debian multiarch directory name of this architecture.
func triplet() string {
	if runtime.GOARCH == "arm64" {
		return "aarch64-linux-gnu"
	}
	return "x86_64-linux-gnu"
}

// driverCandidates lists where libcuda is looked for: the loader's own path (LD_LIBRARY_PATH,
// ld.so.cache), then the usual driver folders of containers and distributions.
func driverCandidates() []string {
	return []string{
		"libcuda.so.1",
		"/usr/local/nvidia/lib64/libcuda.so.1",
		"/usr/lib/" + triplet() + "/libcuda.so.1",
		"/lib/" + triplet() + "/libcuda.so.1",
		"/usr/lib64/libcuda.so.1",
		"/usr/lib/wsl/lib/libcuda.so.1",
	}
}

// dlopenFirst opens the first library that loads: the path in the environment variable env if
// set (and then only it), else the candidates in order. The error names every place tried.
func dlopenFirst(what, env string, candidates []string) (uintptr, string, error) {
	if p := os.Getenv(env); p != "" {
		candidates = []string{p}
	}
	var tried []string
	var last error
	for _, c := range candidates {
		if strings.Contains(c, "/") {
			if _, err := os.Stat(c); err != nil {
				tried = append(tried, c+" (absent)")
				continue
			}
		}
		lib, err := purego.Dlopen(c, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err == nil {
			return lib, c, nil
		}
		tried = append(tried, c)
		last = err
	}
	msg := fmt.Sprintf("cuda: no %s found; looked for %s", what, strings.Join(tried, ", "))
	if last != nil {
		msg += "; last error: " + last.Error()
	}
	return 0, "", errors.New(msg + "; set " + env + " to its path")
}

// bind resolves every binding in lib, or reports the first symbol lib lacks.
func bind(lib uintptr, path string, bs []binding) error {
	for _, b := range bs {
		sym, err := purego.Dlsym(lib, b.name)
		if err != nil {
			return fmt.Errorf("cuda: %s has no %s (too old a version?): %w", path, b.name, err)
		}
		if b.addr != nil {
			*b.addr = sym
		} else {
			purego.RegisterFunc(b.fn, sym)
		}
	}
	return nil
}

// globNewestFirst returns the files matching pattern, the highest version first, without those
// whose base name contains any of skip.
func globNewestFirst(pattern string, skip ...string) []string {
	m, _ := filepath.Glob(pattern)
	var out []string
next:
	for _, p := range m {
		for _, s := range skip {
			if strings.Contains(filepath.Base(p), s) {
				continue next
			}
		}
		out = append(out, p)
	}
	sort.Sort(sort.Reverse(sort.StringSlice(out)))
	return out
}

// driverError is a failed driver API call: the call and the driver's own name and description
// of the result.
type driverError struct {
	code cuResult
}

func cuError(r cuResult) error { return driverError{r} }

// cudaErrorNoDevice is CUDA_ERROR_NO_DEVICE: the driver is installed but sees no GPU, which is a
// machine without the device, not a broken backend.
const cudaErrorNoDevice cuResult = 100

func (e driverError) Error() string {
	var name, desc *byte
	if cuGetErrorName == nil || cuGetErrorName(e.code, &name) != 0 {
		return fmt.Sprintf("CUresult %d", e.code)
	}
	cuGetErrorString(e.code, &desc)
	return fmt.Sprintf("%s (%d): %s", goString(name), e.code, goString(desc))
}

// check returns nil for CUDA_SUCCESS and otherwise an error naming the call.
func check(call string, r cuResult) error {
	if r == 0 {
		return nil
	}
	return fmt.Errorf("cuda: %s: %w", call, cuError(r))
}

// goString copies the NUL-terminated C string at p.
func goString(p *byte) string {
	if p == nil {
		return ""
	}
	n := 0
	for *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
	}
	return string(unsafe.Slice(p, n))
}
