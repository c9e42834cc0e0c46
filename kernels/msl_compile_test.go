package kernels_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"tfd/kernels"
)

// mslPasses are the two ways clang reads the MSL (see mslcheck/shim_compile/metal_stdlib): as
// C++14, MSL's C++ dialect; and as C++ for OpenCL 2021 without a generic address space, whose
// address spaces behave as MSL's (an unqualified pointer is a thread pointer, a cast between
// spaces is an error). aarch64: clang 14 accepts _Float16 (half) there, not on x86.
var mslPasses = []struct {
	name  string
	flags []string
}{
	{"c++14", []string{"-x", "c++", "-std=c++14", "-nostdinc++"}},
	{"opencl", []string{"-x", "clcpp", "-cl-std=clc++2021", "-cl-no-stdinc", "-Xclang",
		"-cl-ext=-__opencl_c_generic_address_space,-__opencl_c_program_scope_global_variables,+cl_khr_fp16"}},
}

// mslWarnings are on top of -Wall -Wextra: MSL has no double, so no float is ever promoted to one.
var mslWarnings = []string{"-Wall", "-Wextra", "-Wdouble-promotion", "-Werror",
	// The one pragma clang does not know is Metal's; each such warning is checked to be it.
	"-Wno-error=unknown-pragmas"}

var (
	diagRE        = regexp.MustCompile(`(?m)^(.*?):(\d+):\d+: (warning|error|fatal error): (.*)$`)
	metalPragmaRE = regexp.MustCompile(`^\s*#pragma METAL fp contract\(off\)\s*$`)
)

// compileMSL compiles src (a whole MSL translation unit) in both passes and returns clang's
// output and the diagnostics that are not Metal's fp contract pragma, each "pass: diagnostic".
func compileMSL(t *testing.T, clang, src string, extra ...string) (output string, bad []string) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "tfd.metal")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	shim, err := filepath.Abs(filepath.Join("mslcheck", "shim_compile"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(src, "\n")
	var out strings.Builder
	for _, pass := range mslPasses {
		args := []string{"--target=aarch64-linux-gnu", "-fsyntax-only", "-nostdinc", "-I", shim, "-ferror-limit=0"}
		args = append(append(append(append(args, pass.flags...), mslWarnings...), extra...), path)
		cmd := exec.Command(clang, args...)
		got, err := cmd.CombinedOutput()
		fmt.Fprintf(&out, "== %s pass\n%s", pass.name, got)
		if err != nil {
			if _, ok := err.(*exec.ExitError); !ok {
				t.Fatalf("%s pass: %v", pass.name, err)
			}
		}
		for _, d := range diagRE.FindAllStringSubmatch(string(got), -1) {
			n, _ := strconv.Atoi(d[2])
			if d[3] == "warning" && d[1] == path && strings.Contains(d[4], "[-Wunknown-pragmas]") &&
				n >= 1 && n <= len(lines) && metalPragmaRE.MatchString(lines[n-1]) {
				continue
			}
			bad = append(bad, pass.name+": "+d[0])
		}
		if err != nil && len(bad) == 0 {
			bad = append(bad, fmt.Sprintf("%s: clang failed without a diagnostic: %v", pass.name, err))
		}
	}
	return out.String(), bad
}

// TestMSLCompiles compiles the whole Metal emission with clang against the shim metal_stdlib, in
// both passes, with no error and no warning, and checks every kernel's attributes.
func TestMSLCompiles(t *testing.T) {
	clang := clangxx(t)
	start := time.Now()
	src := kernels.Metal()
	ks, errs := parseMetalKernels(src)
	for _, k := range ks {
		errs = append(errs, checkAttributes(k)...)
	}
	errs = append(errs, checkEmission(ks)...)
	for _, err := range errs {
		t.Error(err)
	}
	output, bad := compileMSL(t, clang, src)
	for _, d := range bad {
		t.Error(d)
	}
	if len(bad) > 0 {
		t.Logf("clang:\n%s", output)
	}
	if t.Failed() {
		return
	}
	summary := fmt.Sprintf("msl: %d of %d kernels compile with clang against the shim metal_stdlib (c++14 and opencl passes, 0 warnings), attributes checked (%v)",
		len(ks), len(kernels.All()), time.Since(start).Round(time.Millisecond))
	t.Log(summary)
	fmt.Println(summary) // shown by go test in a package directory, with -v, or on failure
}

// TestMSLCompileRejects shows that the shim can fail: each kernel here is wrong MSL, and must be
// rejected by clang in at least one pass with the expected message. Each is compiled alone after
// the prelude and common.h, whose helpers it does not all call, so unused functions are no error
// here; the first case, correct, shows that nothing else is.
func TestMSLCompileRejects(t *testing.T) {
	clang := clangxx(t)
	head := kernels.Prelude("prelude.metal") + "\n" + kernels.Prelude("common.h") + "\n"
	const sig = "[[max_total_threads_per_threadgroup(32)]] kernel void bad"
	t.Run("a correct kernel", func(t *testing.T) {
		t.Parallel()
		output, bad := compileMSL(t, clang, head+sig+`(device float* x [[buffer(0)]], ERRPTR err [[buffer(1)]], ushort lane [[thread_index_in_simdgroup]]) {
	float v = SHFL_XOR(x[lane], 1);
	if (v > 0.0f) report(err, 1, 2, 3);
	x[lane] = FMA(v, 2.0f, 1.0f);
}
`, "-Wno-unused-function")
		if len(bad) > 0 {
			t.Errorf("rejected: %q\n%s", bad, output)
		}
	})
	for _, c := range []struct{ name, src, want string }{
		{"cast from device to thread", sig + `(device float* x [[buffer(0)]]) {
	thread float* p = (thread float*)x;
	p[0] = 1.0f;
}`, "mismatching address spaces"},
		{"device pointer as thread pointer", sig + `(device float* x [[buffer(0)]]) {
	float* p = x;
	p[0] = 1.0f;
}`, "cannot initialize a variable"},
		{"cast from threadgroup to device", sig + `(device float* x [[buffer(0)]], uint3 l [[thread_position_in_threadgroup]]) {
	SHARED float s[32];
	s[l.x] = 1.0f;
	device float* p = (device float*)s;
	x[0] = p[0];
}`, "mismatching address spaces"},
		{"plain store to an atomic", sig + `(ERRPTR err [[buffer(0)]]) {
	err[1] = 5;
}`, "no viable overloaded '='"},
		{"plain load from an atomic", sig + `(ERRPTR err [[buffer(0)]], device int* x [[buffer(1)]]) {
	x[0] = err[0];
}`, "incompatible type"},
		{"double", sig + `(device float* x [[buffer(0)]]) {
	double d = x[0];
	x[0] = (float)d;
}`, "attempt to use a poisoned identifier"},
		{"an unsuffixed floating literal", sig + `(device float* x [[buffer(0)]]) {
	x[0] = x[0] * 0.5;
}`, "double precision constant"},
		{"a parameter named half", sig + `(device float* x [[buffer(0)]], constant int& half [[buffer(1)]]) {
	x[0] = (float)half;
}`, "is a keyword"},
		{"write through a const pointer", sig + `(const device float* x [[buffer(0)]]) {
	x[0] = 1.0f;
}`, "read-only variable is not assignable"},
		{"unknown attribute", sig + `(device float* x [[bufer(0)]]) {
	x[0] = 1.0f;
}`, "unknown attribute"},
		{"memory order MSL lacks", sig + `(ERRPTR err [[buffer(0)]]) {
	atomic_store_explicit(err, 1, memory_order_seq_cst);
}`, "undeclared identifier 'memory_order_seq_cst'"},
		{"threadgroup memory outside a kernel", `FUNC float f(int i) {
	SHARED float s[32];
	s[i] = 1.0f;
	return s[0];
}
` + sig + `(device float* x [[buffer(0)]]) {
	x[0] = f(0);
}`, "non-kernel function variable cannot be declared in local address space"},
		{"min of int and uint", sig + `(device int* x [[buffer(0)]]) {
	x[0] = min(x[1], 2u);
}`, "no matching function for call to 'min'"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			output, bad := compileMSL(t, clang, head+c.src+"\n", "-Wno-unused-function")
			if len(bad) == 0 {
				t.Fatalf("the shim accepted it:\n%s", output)
			}
			if !strings.Contains(output, c.want) {
				t.Errorf("rejected, but without %q:\n%s", c.want, output)
			}
		})
	}
}

// TestMSLAttributesRejects shows that the attribute check can fail.
func TestMSLAttributesRejects(t *testing.T) {
	const sig = "[[max_total_threads_per_threadgroup(%d)]] kernel void bad(%s)"
	for _, c := range []struct {
		name, args string
		threads    int
		want       string
	}{
		{"buffers out of order", "device float* x [[buffer(1)]], device float* y [[buffer(0)]]", 32, "want [[buffer(0)]]"},
		{"a buffer index twice", "device float* x [[buffer(0)]], device float* y [[buffer(0)]]", 32, "want [[buffer(1)]]"},
		{"a gap", "device float* x [[buffer(0)]], constant int& n [[buffer(2)]]", 32, "want [[buffer(1)]]"},
		{"a thread pointer", "float* x [[buffer(0)]]", 32, "want a device pointer"},
		{"a lane index of the wrong type", "device float* x [[buffer(0)]], float l [[thread_index_in_simdgroup]]", 32, "has type float"},
		{"an attribute twice", "uint3 a [[threadgroup_position_in_grid]], uint3 b [[threadgroup_position_in_grid]]", 32, "twice"},
		{"positions of different widths", "uint3 g [[threadgroup_position_in_grid]], uint l [[thread_position_in_threadgroup]]", 32, "another position"},
		{"an attribute tfd does not use", "uint3 g [[thread_position_in_grid]]", 32, "does not use"},
		{"no attribute", "device float* x", 32, "is not \"type name [[attribute]]\""},
		{"too many threads", "device float* x [[buffer(0)]]", 2048, "outside 1..1024"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ks, errs := parseMetalKernels(fmt.Sprintf(sig, c.threads, c.args) + "\n{\n}\n")
			for _, k := range ks {
				errs = append(errs, checkAttributes(k)...)
			}
			var msgs []string
			for _, err := range errs {
				msgs = append(msgs, err.Error())
			}
			if !strings.Contains(strings.Join(msgs, "\n"), c.want) {
				t.Errorf("errors %q, want one containing %q", msgs, c.want)
			}
		})
	}
}
