package kernels_test

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"tfd/kernels"
)

// The Metal Shading Language that kernels.Metal() emits is checked here without a Mac, with clang
// (see README.md, "What is verified"): msl_compile_test.go compiles it against a shim metal_stdlib
// that keeps MSL's rules, msl_run_test.go runs it on the CPU against an executing shim and compares
// every kernel with the cpu backend. Both need clang++; neither skips unless TFD_MSL_SKIP=1 says so
// explicitly, so CI (which installs clang) always runs them.

// clangxx returns the path of clang++, or fails the test saying how to get it. With TFD_MSL_SKIP=1
// in the environment it skips instead.
func clangxx(t *testing.T) string {
	t.Helper()
	if os.Getenv("TFD_MSL_SKIP") == "1" {
		t.Skip("TFD_MSL_SKIP=1: the MSL checks are skipped")
	}
	path, err := exec.LookPath("clang++")
	if err != nil {
		t.Fatalf("the MSL and CUDA compile checks need clang++ (install it: apt-get install -y clang; or set TFD_MSL_SKIP=1 to skip them): %v", err)
	}
	// clang reads the shims and the runner's sources, which go test does not see: reading them
	// here makes a change to any of them a change to the test's inputs, so no stale result is
	// taken from go test's cache.
	err = filepath.WalkDir("mslcheck", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			_, err = os.ReadFile(path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// mslArg is one argument of an emitted Metal kernel: its type (address space included), its name,
// and its attribute, e.g. "buffer(3)" or "thread_index_in_simdgroup".
type mslArg struct {
	Type, Name, Attr string
}

// mslKernel is a kernel's signature as the Metal emission spells it.
type mslKernel struct {
	Name       string
	MaxThreads int // from [[max_total_threads_per_threadgroup(n)]]
	Args       []mslArg
	Line       string
}

// Buffer returns the index of a [[buffer(i)]] argument, or -1.
func (a mslArg) Buffer() int {
	if !strings.HasPrefix(a.Attr, "buffer(") || !strings.HasSuffix(a.Attr, ")") {
		return -1
	}
	i, err := strconv.Atoi(a.Attr[len("buffer(") : len(a.Attr)-1])
	if err != nil {
		return -1
	}
	return i
}

var (
	mslKernelRE = regexp.MustCompile(`(?m)^(.*)\bkernel\s+void\s+([A-Za-z_][A-Za-z0-9_]*)\s*\((.*)\)\s*$`)
	mslMaxRE    = regexp.MustCompile(`^\[\[max_total_threads_per_threadgroup\((\d+)\)\]\]\s*$`)
	mslArgRE    = regexp.MustCompile(`^(.*[\s*&])([A-Za-z_][A-Za-z0-9_]*)\s*\[\[\s*([A-Za-z_][A-Za-z0-9_]*(?:\(\s*\d+\s*\))?)\s*\]\]$`)
)

// parseMetalKernels reads every kernel signature of an MSL source whose kernels are declared on
// one line each, as the generator writes them. It reports malformed signatures as errors.
func parseMetalKernels(src string) ([]mslKernel, []error) {
	var ks []mslKernel
	var errs []error
	for _, m := range mslKernelRE.FindAllStringSubmatch(src, -1) {
		k := mslKernel{Name: m[2], Line: m[0]}
		if mm := mslMaxRE.FindStringSubmatch(strings.TrimSpace(m[1])); mm != nil {
			k.MaxThreads, _ = strconv.Atoi(mm[1])
		} else {
			errs = append(errs, fmt.Errorf("%s: want [[max_total_threads_per_threadgroup(n)]] before kernel, got %q", k.Name, m[1]))
		}
		for _, a := range strings.Split(m[3], ",") {
			am := mslArgRE.FindStringSubmatch(strings.TrimSpace(a))
			if am == nil {
				errs = append(errs, fmt.Errorf("%s: argument %q is not \"type name [[attribute]]\"", k.Name, strings.TrimSpace(a)))
				continue
			}
			k.Args = append(k.Args, mslArg{Type: strings.Join(strings.Fields(am[1]), " "), Name: am[2], Attr: strings.ReplaceAll(am[3], " ", "")})
		}
		ks = append(ks, k)
	}
	return ks, errs
}

// threadAttrTypes are the thread-position attributes a kernel may take, with the types MSL allows
// for each (the Metal Shading Language Specification, "Attributes for kernel function input
// arguments").
var threadAttrTypes = map[string][]string{
	"threadgroup_position_in_grid":   {"uint", "uint2", "uint3", "ushort", "ushort2", "ushort3"},
	"thread_position_in_threadgroup": {"uint", "uint2", "uint3", "ushort", "ushort2", "ushort3"},
	"threads_per_threadgroup":        {"uint", "uint2", "uint3", "ushort", "ushort2", "ushort3"},
	"thread_index_in_simdgroup":      {"uint", "ushort"},
	"simdgroup_index_in_threadgroup": {"uint", "ushort"},
}

var bufferArgRE = regexp.MustCompile(`^(?:(?:const )?device [A-Za-z_][A-Za-z0-9_]*\*|constant [A-Za-z_][A-Za-z0-9_]*&|ERRPTR)$`)

// checkAttributes checks a kernel's attributes as Metal will read them: at most 1024 threads; every
// buffer argument a device pointer or a constant reference with [[buffer(i)]], the indices 0..n-1
// in order (a backend binds argument i at index i) and below Metal's 31 slots; every other
// argument one of the thread-position attributes, each once, with a type MSL allows for it, the
// grid positions all of one type.
func checkAttributes(k mslKernel) []error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{k.Name}, args...)...))
	}
	if k.MaxThreads < 1 || k.MaxThreads > 1024 {
		bad("max_total_threads_per_threadgroup(%d) outside 1..1024", k.MaxThreads)
	}
	next := 0
	seen := map[string]bool{}
	gridType := ""
	for _, a := range k.Args {
		if seen[a.Name] {
			bad("two arguments named %s", a.Name)
		}
		seen[a.Name] = true
		if i := a.Buffer(); i >= 0 {
			if i != next {
				bad("argument %s is [[buffer(%d)]], want [[buffer(%d)]]: indices must run 0..n-1 in order", a.Name, i, next)
			}
			if i > 30 {
				bad("argument %s: [[buffer(%d)]] is past Metal's 31 buffer slots", a.Name, i)
			}
			if !bufferArgRE.MatchString(a.Type) {
				bad("argument %s [[%s]] has type %q, want a device pointer or a constant reference", a.Name, a.Attr, a.Type)
			}
			next = i + 1
			continue
		}
		types, ok := threadAttrTypes[a.Attr]
		switch {
		case !ok:
			bad("argument %s has attribute [[%s]], which tfd does not use", a.Name, a.Attr)
		case seen["[["+a.Attr]:
			bad("attribute [[%s]] twice", a.Attr)
		case !slices.Contains(types, a.Type):
			bad("argument %s [[%s]] has type %s, want one of %v", a.Name, a.Attr, a.Type, types)
		}
		seen["[["+a.Attr] = true
		// MSL: the grid and threadgroup positions and sizes must have as many components as each
		// other (tfd uses one type for all).
		if ok && !strings.HasPrefix(a.Attr, "thread_index_") && !strings.HasPrefix(a.Attr, "simdgroup_") {
			if gridType != "" && gridType != a.Type {
				bad("argument %s [[%s]] is a %s, another position a %s", a.Name, a.Attr, a.Type, gridType)
			}
			gridType = a.Type
		}
	}
	return errs
}

// checkEmission checks the emitted kernels against their definitions: every kernel once, with
// each parameter at its own buffer index and the threads its launches use.
func checkEmission(ks []mslKernel) []error {
	var errs []error
	byName := map[string]mslKernel{}
	for _, k := range ks {
		if _, dup := byName[k.Name]; dup {
			errs = append(errs, fmt.Errorf("%s is emitted twice", k.Name))
		}
		byName[k.Name] = k
	}
	for _, def := range kernels.All() {
		k, ok := byName[def.Name]
		if !ok {
			errs = append(errs, fmt.Errorf("%s is not in the Metal emission", def.Name))
			continue
		}
		if k.MaxThreads != def.Threads {
			errs = append(errs, fmt.Errorf("%s: max_total_threads_per_threadgroup(%d), the definition says threads(%d)", k.Name, k.MaxThreads, def.Threads))
		}
		for i, p := range def.Params {
			if i >= len(k.Args) || k.Args[i].Name != p.Name || k.Args[i].Buffer() != i {
				errs = append(errs, fmt.Errorf("%s: parameter %s is not argument %d at [[buffer(%d)]]", k.Name, p.Name, i, i))
			}
		}
	}
	if len(ks) != len(kernels.All()) {
		errs = append(errs, fmt.Errorf("the Metal emission has %d kernels, kernels.All() %d", len(ks), len(kernels.All())))
	}
	return errs
}
