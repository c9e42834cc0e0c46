package kernels_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"tfd/kernels"
)

// The CUDA C that kernels.CUDA() emits is compiled by NVRTC only where a GPU is. Here clang's CUDA
// front end compiles it to PTX for sm_80 (the oldest architecture with every instruction the
// kernels use: BF16 mma.sync, cp.async) against cudacheck/tfd_cuda.h, a header that declares what
// NVRTC would, so a kernel that does not compile fails on any machine, not first on the GPU. PTX
// held in inline asm is passed through unread; NVRTC still reads it on the GPU. clang 14 knows no
// sm_90, so the sm_90-only lines (dependent launch, prelude.cuh) are compiled out here.
var cudaFlags = []string{"-x", "cuda", "--cuda-device-only", "--cuda-gpu-arch=sm_80",
	"-nocudainc", "-nocudalib", "-Xclang", "-target-feature", "-Xclang", "+ptx75",
	"-S", "-O0", "-ferror-limit=0",
	// The kernels declare Metal's staging memory for both backends; CUDA's macros never read it.
	"-Wall", "-Wextra", "-Werror", "-Wno-unused-variable"}

var (
	cudaEntryRE  = regexp.MustCompile(`(?m)^\.visible \.entry (\w+)\(`)
	cudaGlobalRE = regexp.MustCompile(`extern "C" __global__ void __launch_bounds__\([^)]*\) (\w+)\(`)
)

// compileCUDA compiles src (a whole CUDA translation unit) to PTX and returns clang's output, the
// PTX, and whether clang accepted it.
func compileCUDA(t *testing.T, clang, src string, extra ...string) (output, ptx string, ok bool) {
	t.Helper()
	shim, err := os.ReadFile(filepath.Join("cudacheck", "tfd_cuda.h"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, b := range map[string][]byte{"tfd.cu": []byte(src), "tfd_cuda.h": shim} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	args := append(append(append([]string{}, cudaFlags...), extra...), "-include", filepath.Join(dir, "tfd_cuda.h"),
		"-o", filepath.Join(dir, "tfd.ptx"), filepath.Join(dir, "tfd.cu"))
	got, err := exec.Command(clang, args...).CombinedOutput()
	if err != nil {
		if _, exit := err.(*exec.ExitError); !exit {
			t.Fatalf("clang: %v", err)
		}
		return string(got), "", false
	}
	b, err := os.ReadFile(filepath.Join(dir, "tfd.ptx"))
	if err != nil {
		t.Fatal(err)
	}
	return string(got), string(b), true
}

// TestCUDACompiles compiles the whole CUDA emission with no error and no warning and finds every
// kernel of the source as an entry of the PTX.
func TestCUDACompiles(t *testing.T) {
	clang := clangxx(t)
	start := time.Now()
	src := kernels.CUDA()
	output, ptx, ok := compileCUDA(t, clang, src)
	if !ok || output != "" {
		t.Fatalf("clang:\n%s", output)
	}
	var want, got []string
	for _, m := range cudaGlobalRE.FindAllStringSubmatch(src, -1) {
		want = append(want, m[1])
	}
	for _, m := range cudaEntryRE.FindAllStringSubmatch(ptx, -1) {
		got = append(got, m[1])
	}
	if strings.Count(src, "__global__") != len(want) || len(want) == 0 {
		t.Fatalf("the emission has %d __global__ functions, %d of them in the expected form", strings.Count(src, "__global__"), len(want))
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("PTX entries differ from the source's kernels:\n got %v\nwant %v", got, want)
	}
	summary := fmt.Sprintf("cuda: %d kernels compile to PTX for sm_80 with clang against cudacheck/tfd_cuda.h (0 warnings, %v)",
		len(got), time.Since(start).Round(time.Millisecond))
	t.Log(summary)
	fmt.Println(summary)
}

// TestCUDACompileRejects shows that the check can fail: each kernel here is wrong CUDA and must be
// rejected with the expected message. Each is compiled alone after the prelude and common.h, whose
// helpers it does not all call, so unused functions are no error here; the first case, correct,
// shows that nothing else is.
func TestCUDACompileRejects(t *testing.T) {
	clang := clangxx(t)
	head := kernels.Prelude("prelude.cuh") + "\n" + kernels.Prelude("common.h") + "\n"
	const sig = `extern "C" __global__ void __launch_bounds__(32) bad`
	t.Run("a correct kernel", func(t *testing.T) {
		t.Parallel()
		output, _, ok := compileCUDA(t, clang, head+sig+`(float* x, int* err) {
	float v = SHFL_XOR(x[LANE], 1);
	if (v > 0.0f) report(err, 1, 2, 3);
	x[LANE] = FMA(v, 2.0f, 1.0f);
}
`, "-Wno-unused-function")
		if !ok || output != "" {
			t.Errorf("rejected:\n%s", output)
		}
	})
	for _, c := range []struct{ name, src, want string }{
		{"a misspelled intrinsic", sig + `(float* x) {
	x[0] = __fmaf_rnn(x[0], 2.0f, 1.0f);
}`, "undeclared identifier '__fmaf_rnn'"},
		{"write through a const pointer", sig + `(const float* x) {
	x[0] = 1.0f;
}`, "read-only variable is not assignable"},
		{"an int buffer read as floats", sig + `(float* x, const int* n) {
	const float* p = n;
	x[0] = p[0];
}`, "cannot initialize a variable"},
		{"a vector load into the wrong type", sig + `(float* x) {
	float4 v = VLOAD(uint4, x);
	x[0] = v.x;
}`, "no viable conversion"},
		{"an unused result", sig + `(float* x) {
	x[0] == 1.0f;
}`, "equality comparison result unused"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			output, _, ok := compileCUDA(t, clang, head+c.src+"\n", "-Wno-unused-function")
			if ok && output == "" {
				t.Fatal("clang accepted it")
			}
			if !strings.Contains(output, c.want) {
				t.Errorf("rejected, but without %q:\n%s", c.want, output)
			}
		})
	}
}
