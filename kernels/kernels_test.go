package kernels

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The CUDA emission is compiled by NVRTC in tfd/cuda's tests. The Metal emission is compiled and
// run with clang by the msl_*_test.go files; these tests check what needs no compiler.

// TestEveryKernelWaitsForTheOneBefore checks that every kernel body calls GRID_WAIT exactly once,
// and that a body calling it itself indexes or offsets no argument before it but its weights
// (choosing among pointers is no access), except inside a hint block: under programmatic dependent
// launch a kernel that read an activation, or wrote anything, before GRID_WAIT could race the
// kernel before it. A hint block is a block of the body's own, before GRID_WAIT, that asks for
// lines in L2 (PREFETCH_L2) and whose values die with it: it stores nothing and assigns only the
// variables it declares, so what it reads can aim a prefetch (which reads nothing into the kernel)
// and nothing else.
func TestEveryKernelWaitsForTheOneBefore(t *testing.T) {
	for _, k := range All() {
		body := commentRE.ReplaceAllString(waitFirst(k.Body), "")
		if n := strings.Count(body, "GRID_WAIT()"); n != 1 {
			t.Errorf("%s: GRID_WAIT %d times", k.Name, n)
			continue
		}
		before, _, _ := strings.Cut(body, "GRID_WAIT()")
		outside, hints := hintBlocks(before)
		for _, h := range hints {
			if why := hintBlockFault(h, k.Params); why != "" {
				t.Errorf("%s: a block before GRID_WAIT reads activations but %s", k.Name, why)
			}
		}
		for _, p := range k.Params {
			if p.Kind == Scalar || strings.HasPrefix(p.Name, "w") {
				continue // scalars and weights (w, w0, w1, w2) may be read first
			}
			if regexp.MustCompile(`\b` + p.Name + `\s*[\[+]`).MatchString(outside) {
				t.Errorf("%s: %s is used before GRID_WAIT", k.Name, p.Name)
			}
		}
	}
}

// hintBlocks splits the part of a body before GRID_WAIT into the text outside its hint blocks
// (the blocks one level in that call PREFETCH_L2) and those blocks.
func hintBlocks(before string) (outside string, hints []string) {
	depth, start := 0, -1
	var out strings.Builder
	last := 0
	for i, c := range before {
		switch c {
		case '{':
			depth++
			if depth == 2 {
				start = i
			}
		case '}':
			if depth == 2 && strings.Contains(before[start:i], "PREFETCH_L2") {
				out.WriteString(before[last:start])
				hints = append(hints, before[start:i+1])
				last = i + 1
			}
			depth--
		}
	}
	out.WriteString(before[last:])
	return out.String(), hints
}

var (
	declRE   = regexp.MustCompile(`\b(?:int|uint|ulong|float|bool)\s+(\w+)\s*=`)
	assignRE = regexp.MustCompile(`(\w+)\s*(?:[-+*/%&|^]|<<|>>)?=[^=]|(\w+)\s*(?:\+\+|--)|(?:\+\+|--)\s*(\w+)`)
	storeRE  = regexp.MustCompile(`[\])]\s*(?:[-+*/%&|^]|<<|>>)?=[^=]`)
)

// hintBlockFault says why a hint block could pass a value on or write memory, or "" if it cannot.
func hintBlockFault(block string, params []Param) string {
	if storeRE.MatchString(block) {
		return "stores through a pointer"
	}
	for _, p := range params {
		if p.Kind == Out && regexp.MustCompile(`\b`+p.Name+`\b`).MatchString(block) {
			return "names the output " + p.Name
		}
	}
	declared := map[string]bool{}
	for _, m := range declRE.FindAllStringSubmatch(block, -1) {
		declared[m[1]] = true
	}
	for _, m := range assignRE.FindAllStringSubmatch(block, -1) {
		v := m[1] + m[2] + m[3]
		if !declared[v] {
			return "assigns " + v + ", which it does not declare"
		}
	}
	return ""
}

// TestEveryKernelIsEmittedTwice checks that each kernel appears in both emissions with its
// parameters in the same order.
func TestEveryKernelIsEmittedTwice(t *testing.T) {
	cuda, metal := CUDA(), Metal()
	if len(All()) == 0 {
		t.Fatal("no kernels")
	}
	for _, k := range All() {
		if !strings.Contains(cuda, `extern "C" __global__ void __launch_bounds__(`) || !strings.Contains(cuda, " "+k.Name+"(") {
			t.Errorf("%s: missing from the CUDA emission", k.Name)
		}
		at := strings.Index(metal, "kernel void "+k.Name+"(")
		if at < 0 {
			t.Errorf("%s: missing from the Metal emission", k.Name)
			continue
		}
		sig, _, _ := strings.Cut(metal[at:], "\n")
		last := -1
		for i, p := range k.Params {
			at := strings.Index(sig, " "+p.Name+" [[buffer(")
			if at < 0 || at < last || !strings.Contains(sig, p.Name+" [[buffer("+strconv.Itoa(i)+")]]") {
				t.Errorf("%s: parameter %s is not buffer(%d) in order: %s", k.Name, p.Name, i, sig)
			}
			last = at
		}
	}
}

// TestPreludesDefineTheDialect checks that every upper-case name the kernel bodies and common.h
// use is defined by both preludes (or by common.h, or by the body itself), so the Metal prelude
// substitutes every macro the CUDA one does.
func TestPreludesDefineTheDialect(t *testing.T) {
	defines := func(src string) map[string]bool {
		m := map[string]bool{}
		for _, d := range regexp.MustCompile(`(?m)^\s*#define\s+([A-Za-z_][A-Za-z0-9_]*)`).FindAllStringSubmatch(src, -1) {
			m[d[1]] = true
		}
		return m
	}
	var cuda string
	for _, p := range cudaPreludes {
		cuda += Prelude(p)
	}
	cudaDefs, metalDefs, commonDefs := defines(cuda), defines(Prelude("prelude.metal")), defines(Prelude("common.h"))
	for name := range cudaDefs {
		if !metalDefs[name] {
			t.Errorf("prelude.cuh defines %s, prelude.metal does not", name)
		}
	}
	for name := range metalDefs {
		if !cudaDefs[name] {
			t.Errorf("prelude.metal defines %s, prelude.cuh does not", name)
		}
	}
	upper := regexp.MustCompile(`\b[A-Z][A-Z0-9_]*[A-Z0-9]\b`)
	// Names that are not macros of the dialect: none so far.
	check := func(where, src string, local map[string]bool) {
		for _, name := range upper.FindAllString(src, -1) {
			if !cudaDefs[name] && !commonDefs[name] && !local[name] {
				t.Errorf("%s uses %s, which no prelude defines", where, name)
			}
		}
	}
	check("common.h", code(Prelude("common.h")), commonDefs)
	for _, k := range All() {
		check(k.Name, code(k.Body), defines(k.Body))
	}
}

// TestBackendsKeepToTheirDialect checks that neither emission carries the other's spellings: a
// body that used CUDA's names directly would compile for CUDA and fail on Metal.
func TestBackendsKeepToTheirDialect(t *testing.T) {
	cudaOnly := []string{"__global__", "__shared__", "__syncthreads", "threadIdx", "blockIdx", "blockDim", "atomicCAS", "__shfl", "asm(", "__fmaf_rn", "__uint_as_float", "expf("}
	metalOnly := []string{"threadgroup", "device ", "simd_", "metal_stdlib", "as_type", "precise::", "[[buffer"}
	var bodies strings.Builder
	bodies.WriteString(code(Prelude("common.h")))
	for _, k := range All() {
		bodies.WriteString(code(k.Body))
	}
	for _, s := range append(slices.Clone(cudaOnly), metalOnly...) {
		if strings.Contains(bodies.String(), s) {
			t.Errorf("a kernel body or common.h uses %q: write it in the dialect", s)
		}
	}
	metal := code(Metal())
	for _, s := range cudaOnly {
		if strings.Contains(metal, s) {
			t.Errorf("the Metal emission contains %q", s)
		}
	}
	cuda := code(CUDA())
	for _, s := range metalOnly {
		if strings.Contains(cuda, s) {
			t.Errorf("the CUDA emission contains %q", s)
		}
	}
}

func TestVariants(t *testing.T) {
	for _, name := range []string{"matmul_bf16_1", "matmul_f16_16", "matmul_f32_4", "embed_bf16", "attention_split_f16", "qk_rope_write_128_f16", "rmsnorm_row"} {
		k, ok := Lookup(name)
		if !ok {
			t.Errorf("no kernel %s", name)
			continue
		}
		if strings.Contains(k.Body, "$") || strings.Contains(k.Name, "$") {
			t.Errorf("%s: variables left after substitution", name)
		}
	}
	if _, ok := Lookup("matmul_$W_$R"); ok {
		t.Error("the unexpanded definition is listed")
	}
	k, _ := Lookup("matmul_bf16_8")
	if !strings.Contains(k.Body, "float acc[8];") || !strings.Contains(k.Body, "LOAD8_bf16(") {
		t.Errorf("matmul_bf16_8 body not substituted:\n%s", k.Body)
	}
}

func TestParseErrors(t *testing.T) {
	for _, c := range []struct{ name, src, want string }{
		{"header", "kernel f(int n)\n{\n}\n", "bad kernel header"},
		{"param", "kernel f(inout float x) threads(32)\n{\n}\n", "bad parameter"},
		{"brace", "kernel f(int n) threads(32)\n  {\n}\n", "must start with a line"},
		{"unclosed", "kernel f(int n) threads(32)\n{\n  x;\n", "no closing line"},
		{"variable", "kernel f_$X(int n) threads(32)\n{\n}\n", "undefined variant variable"},
		{"threads", "kernel f(int n) threads(2048)\n{\n}\n", "outside 1..1024"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseFile("x.kern", c.src)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
}

// code returns src without its // comments.
func code(src string) string {
	return regexp.MustCompile(`//[^\n]*`).ReplaceAllString(src, "")
}

// TestResidentGroups checks threads(N, G): G is kept, CUDA's launch bound carries it, Metal's
// signature does not.
func TestResidentGroups(t *testing.T) {
	ks, err := parseFile("x.kern", "kernel f(out float d, int n) threads(128, 3)\n{\n\td[0] = 0.0f;\n}\n")
	if err != nil || len(ks) != 1 {
		t.Fatalf("parseFile: %v, %d kernels", err, len(ks))
	}
	if ks[0].Resident != 3 || ks[0].Threads != 128 {
		t.Errorf("threads(128, 3) parsed as %d threads, %d resident", ks[0].Threads, ks[0].Resident)
	}
	if got := cudaSignature(ks[0]); !strings.Contains(got, "__launch_bounds__(128, 3) f(") {
		t.Errorf("CUDA signature %q lacks __launch_bounds__(128, 3)", got)
	}
	if got := metalSignature(ks[0]); !strings.Contains(got, "max_total_threads_per_threadgroup(128)]]") {
		t.Errorf("Metal signature %q", got)
	}
	ks, err = parseFile("x.kern", "kernel f(int n) threads(64)\n{\n}\n")
	if err != nil || ks[0].Resident != 0 || !strings.Contains(cudaSignature(ks[0]), "__launch_bounds__(64) f(") {
		t.Errorf("threads(64): %v, %+v, %q", err, ks, cudaSignature(ks[0]))
	}
}

// TestHintBlocksPassNothingOn shows that the hint-block rule of TestEveryKernelWaitsForTheOneBefore
// can fail: a block that stores, names an output, or hands a value to a variable outside it is
// refused, and only blocks that prefetch count as hints.
func TestHintBlocksPassNothingOn(t *testing.T) {
	params := []Param{{Name: "dst", Kind: Out}, {Name: "bases", Kind: In}, {Name: "K", Kind: In}, {Name: "n", Kind: Scalar}}
	for _, c := range []struct{ block, fault string }{
		{"{\n\tint b = bases[0];\n\tfor (int i = 0; i < n; i += 4) PREFETCH_L2(K + b + i);\n}", ""},
		{"{\n\tint b = bases[0];\n\tPREFETCH_L2(K + b);\n\tscratch[0] = b;\n}", "stores through a pointer"},
		{"{\n\tint b = bases[0];\n\tPREFETCH_L2(dst + b);\n}", "names the output dst"},
		{"{\n\tint b = bases[0];\n\tkept = b;\n\tPREFETCH_L2(K + b);\n}", "assigns kept, which it does not declare"},
		{"{\n\tint b = bases[0];\n\tkept++;\n\tPREFETCH_L2(K + b);\n}", "assigns kept, which it does not declare"},
		{"{\n\tint b = bases[0];\n\t++kept;\n\tPREFETCH_L2(K + b);\n}", "assigns kept, which it does not declare"},
	} {
		if got := hintBlockFault(c.block, params); got != c.fault {
			t.Errorf("%q: got %q, want %q", c.block, got, c.fault)
		}
	}
	outside, hints := hintBlocks("{\n\tint r = 0;\n\t{\n\t\tint b = bases[r];\n\t}\n\t{\n\t\tPREFETCH_L2(K + bases[r]);\n\t}\n")
	if len(hints) != 1 || !strings.Contains(outside, "int b = bases[r]") || strings.Contains(outside, "PREFETCH_L2") {
		t.Errorf("hintBlocks: outside %q, hints %q", outside, hints)
	}
}
