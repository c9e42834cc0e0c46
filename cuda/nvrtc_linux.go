//go:build amd64 || arm64

package cuda

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

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

// compiled holds the CUBIN of each architecture for the process: tests open many backends.
var (
	compiledMu sync.Mutex // guards compiled
	compiled   = map[string][]byte{}
)

// compile returns the kernels as a CUBIN for arch (such as "sm_90"): the process's, else the one
// cached on disk (cubinCacheDir), else NVRTC's, which it then caches.
func compile(arch string) ([]byte, error) {
	compiledMu.Lock()
	defer compiledMu.Unlock()
	if c, ok := compiled[arch]; ok {
		return c, nil
	}
	if err := loadNVRTC(); err != nil {
		return nil, err
	}
	var major, minor int32
	nvrtcVersion(&major, &minor)
	src, opts := kernels.CUDA(), nvrtcOptions(arch)
	dir := cubinCacheDir(os.Getenv)
	key := cubinKey(src, arch, opts, nvrtcIdentity(major, minor))
	if dir != "" {
		if c := readCubin(dir, key); c != nil {
			slog.Debug("cuda: kernels from the cache", "arch", arch, "file", filepath.Join(dir, key+".cubin"))
			compiled[arch] = c
			return c, nil
		}
	}
	if dir != "" {
		slog.Info("cuda: compiling the kernels, once for this GPU and NVRTC (up to a minute); later starts read them from the cache",
			"arch", arch, "nvrtc", fmt.Sprintf("%d.%d", major, minor), "cache", dir)
	} else {
		slog.Info("cuda: compiling the kernels (up to a minute), with no cache to keep them (TFD_CUDA_CACHE names one)",
			"arch", arch, "nvrtc", fmt.Sprintf("%d.%d", major, minor))
	}
	start := time.Now()
	c, _, err := nvrtcCompile(src, arch, opts)
	if err != nil {
		return nil, err
	}
	slog.Info("cuda: kernels compiled", "arch", arch, "took", time.Since(start).Round(time.Millisecond))
	if dir != "" {
		if err := writeCubin(dir, key, c); err != nil {
			slog.Warn("cuda: the compiled kernels are not cached; each start compiles them again (TFD_CUDA_CACHE names another folder)", "err", err)
		}
	}
	compiled[arch] = c
	return c, nil
}

// nvrtcIdentity names the NVRTC loaded for the cache's key: its version, which says only major and
// minor, and the library's path, size and time, which change with a patch release installed over
// it.
func nvrtcIdentity(major, minor int32) string {
	id := fmt.Sprintf("%d.%d %s", major, minor, nvrtcPath)
	if fi, err := os.Stat(nvrtcPath); err == nil {
		id += fmt.Sprintf(" %d %d", fi.Size(), fi.ModTime().UnixNano())
	}
	return id
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
