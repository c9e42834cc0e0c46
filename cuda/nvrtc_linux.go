//go:build amd64 || arm64

package cuda

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"tfd/kernels"

	"github.com/ebitengine/purego"
)

// NVRTC (nvrtc.h), bound once by loadNVRTC. nvrtcResult is an int32; 0 is NVRTC_SUCCESS.
var (
	nvrtcVersion           func(major, minor *int32) int32
	nvrtcCreateProgram     func(prog *uintptr, src, name string, numHeaders int32, headers, includeNames **byte) int32
	nvrtcCompileProgram    func(prog uintptr, numOptions int32, options **byte) int32
	nvrtcGetProgramLogSize func(prog uintptr, size *uintptr) int32
	nvrtcGetProgramLog     func(prog uintptr, log *byte) int32
	nvrtcGetCUBINSize      func(prog uintptr, size *uintptr) int32
	nvrtcGetCUBIN          func(prog uintptr, cubin *byte) int32
	nvrtcDestroyProgram    func(prog *uintptr) int32
	nvrtcGetErrorString    func(r int32) string
)

var nvrtcBindings = []binding{
	{name: "nvrtcVersion", fn: &nvrtcVersion},
	{name: "nvrtcCreateProgram", fn: &nvrtcCreateProgram},
	{name: "nvrtcCompileProgram", fn: &nvrtcCompileProgram},
	{name: "nvrtcGetProgramLogSize", fn: &nvrtcGetProgramLogSize},
	{name: "nvrtcGetProgramLog", fn: &nvrtcGetProgramLog},
	{name: "nvrtcGetCUBINSize", fn: &nvrtcGetCUBINSize},
	{name: "nvrtcGetCUBIN", fn: &nvrtcGetCUBIN},
	{name: "nvrtcDestroyProgram", fn: &nvrtcDestroyProgram},
	{name: "nvrtcGetErrorString", fn: &nvrtcGetErrorString},
}

var (
	nvrtcOnce sync.Once
	nvrtcErr  error
	nvrtcPath string
)

// loadNVRTC opens NVRTC and binds it, once per process.
func loadNVRTC() error {
	nvrtcOnce.Do(func() {
		var lib uintptr
		lib, nvrtcPath, nvrtcErr = dlopenFirst("NVRTC library libnvrtc.so", "TFD_NVRTC", nvrtcCandidates())
		if nvrtcErr != nil {
			return
		}
		nvrtcErr = bind(lib, nvrtcPath, nvrtcBindings)
		// NVRTC opens its builtins library (libnvrtc-builtins.so) by name when it compiles, which
		// fails unless the loader's path holds it. Opening it here from NVRTC's own folder makes
		// that lookup find it already loaded.
		if dir := filepath.Dir(nvrtcPath); dir != "." {
			if b := globNewestFirst(filepath.Join(dir, "libnvrtc-builtins.so*")); len(b) > 0 {
				purego.Dlopen(b[0], purego.RTLD_NOW|purego.RTLD_GLOBAL) // best effort: compile reports the failure
			}
		}
	})
	return nvrtcErr
}

// nvrtcCandidates lists where NVRTC is looked for: the toolkit's folders ($CUDA_HOME, $CUDA_PATH,
// /usr/local/cuda), the distribution's library folder, the loader's path, and the NVRTC wheels of
// Python environments. Each folder's newest version comes first.
func nvrtcCandidates() []string {
	var dirs []string
	for _, env := range []string{"CUDA_HOME", "CUDA_PATH"} {
		if d := os.Getenv(env); d != "" {
			dirs = append(dirs, filepath.Join(d, "lib64"), filepath.Join(d, "lib"))
		}
	}
	dirs = append(dirs,
		"/usr/local/cuda/lib64",
		"/usr/local/cuda/targets/"+strings.Replace(triplet(), "-gnu", "", 1)+"/lib",
		"/usr/lib/"+triplet(),
		"/usr/lib64",
	)
	for _, py := range []string{"/opt/*/.venv/lib/python3*/site-packages", "/usr/local/lib/python3*/dist-packages", "/usr/lib/python3/dist-packages"} {
		for _, sub := range []string{"nvidia/cu*/lib", "nvidia/cuda_nvrtc/lib"} {
			m, _ := filepath.Glob(filepath.Join(py, sub))
			dirs = append(dirs, m...)
		}
	}
	var out []string
	for _, d := range dirs {
		libs := globNewestFirst(filepath.Join(d, "libnvrtc.so*"), "builtins", "alt")
		if len(libs) == 0 {
			out = append(out, filepath.Join(d, "libnvrtc.so"))
			continue
		}
		out = append(out, libs...)
	}
	return append(out, "libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12")
}

// compiled caches the CUBIN of each architecture: NVRTC takes seconds, and tests open many
// backends.
var (
	compiledMu sync.Mutex // guards compiled
	compiled   = map[string][]byte{}
)

// compile returns the kernels as a CUBIN for arch (such as "sm_90"), compiling them on first use
// in a process, or reading what an earlier start compiled from the kernel cache (kernelCacheDir).
func compile(arch string) ([]byte, error) {
	compiledMu.Lock()
	defer compiledMu.Unlock()
	if c, ok := compiled[arch]; ok {
		return c, nil
	}
	if err := loadNVRTC(); err != nil {
		return nil, err
	}
	src, opts := kernels.CUDA(), nvrtcOptions(arch)
	var major, minor int32
	nvrtcVersion(&major, &minor)
	// The key: everything the CUBIN depends on, NVRTC's version included.
	key := fmt.Sprintf("NVRTC %d.%d\x00%s\x00%s\x00%s", major, minor, arch, strings.Join(opts, "\x00"), src)
	c, err := cachedCompile(kernelCacheDir(), arch, key, func() ([]byte, error) {
		c, _, err := nvrtcCompile(src, arch, opts)
		return c, err
	})
	if err != nil {
		return nil, err
	}
	compiled[arch] = c
	return c, nil
}

// nvrtcOptions are the compile options: the device's own architecture (so the CUBIN holds its
// machine code and no PTX is JIT-compiled at load), device code by default, and no fast math, so
// expf, division and square roots are the accurate ones.
func nvrtcOptions(arch string) []string {
	return []string{"--gpu-architecture=" + arch, "-default-device", "-lineinfo"}
}

// nvrtcCompile compiles src with opts and returns the CUBIN and NVRTC's log.
func nvrtcCompile(src, arch string, opts []string) ([]byte, string, error) {
	var prog uintptr
	if r := nvrtcCreateProgram(&prog, src, "tfd_kernels.cu", 0, nil, nil); r != 0 {
		return nil, "", fmt.Errorf("cuda: nvrtcCreateProgram: %s", nvrtcGetErrorString(r))
	}
	defer nvrtcDestroyProgram(&prog)
	cstrs := make([][]byte, len(opts))
	ptrs := make([]*byte, len(opts))
	for i, o := range opts {
		cstrs[i] = append([]byte(o), 0)
		ptrs[i] = &cstrs[i][0]
	}
	if r := nvrtcCompileProgram(prog, int32(len(ptrs)), &ptrs[0]); r != 0 {
		var major, minor int32
		nvrtcVersion(&major, &minor)
		return nil, "", fmt.Errorf("cuda: NVRTC %d.%d (%s) failed to compile the kernels for %s: %s\n%s",
			major, minor, nvrtcPath, arch, nvrtcGetErrorString(r), programLog(prog))
	}
	var n uintptr
	if r := nvrtcGetCUBINSize(prog, &n); r != 0 || n == 0 {
		return nil, "", fmt.Errorf("cuda: nvrtcGetCUBINSize: %s", nvrtcGetErrorString(r))
	}
	cubin := make([]byte, n)
	if r := nvrtcGetCUBIN(prog, &cubin[0]); r != 0 {
		return nil, "", fmt.Errorf("cuda: nvrtcGetCUBIN: %s", nvrtcGetErrorString(r))
	}
	return cubin, programLog(prog), nil
}

func programLog(prog uintptr) string {
	var n uintptr
	if nvrtcGetProgramLogSize(prog, &n) != 0 || n <= 1 {
		return ""
	}
	log := make([]byte, n)
	nvrtcGetProgramLog(prog, &log[0])
	return strings.TrimRight(string(log), "\x00\n")
}

// compileForTest compiles the kernels for arch without a GPU (only NVRTC is needed), asking
// ptxas for its register and spill report, and returns NVRTC's log.
func compileForTest(arch string) (string, error) {
	if err := loadNVRTC(); err != nil {
		return "", err
	}
	_, log, err := nvrtcCompile(kernels.CUDA(), arch, append(nvrtcOptions(arch), "--ptxas-options=--verbose"))
	return log, err
}
