// Package kernels holds tfd's GPU kernels, each defined once in a small dialect of C and emitted
// as CUDA C (for NVRTC) and as Metal Shading Language. See README.md for the dialect.
//
// A kernel is declared in a .kern file under src/ by a header line and a body:
//
//	kernel add(out float dst, in float a, in float b, int n) threads(256)
//	{
//		int i = GROUP_X * 256 + LOCAL_X;
//		if (i < n) dst[i] = ADD(a[i], b[i]);
//	}
//
// The generator writes each backend's signature from the header (buffer address spaces, Metal's
// buffer indices and thread-position arguments, CUDA's extern "C" and launch bounds); the body is
// copied as written and compiled against the backend's prelude (prelude.cuh, prelude.metal), which
// defines the dialect's names, followed by common.h. A header may end with
// variants(NAME: v1 v2 …; …): the kernel is emitted once per combination, with $NAME replaced by
// the value in the name, the parameters and the body. threads(N, G) asks CUDA to fit G groups on
// a multiprocessor (__launch_bounds__(N, G): registers capped, ptxas spilling past the cap).
package kernels

import (
	"embed"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
)

//go:embed prelude.cuh prelude_tma.cuh prelude.metal common.h src/*.kern
var files embed.FS

// ParamKind says how a kernel parameter is passed.
type ParamKind uint8

const (
	// Out is a buffer the kernel may write.
	Out ParamKind = iota + 1
	// In is a buffer the kernel only reads.
	In
	// Scalar is a value of 4 or 8 bytes (int, uint, float, ulong).
	Scalar
	// Err is the error word, four int32: [code, a, b, unused]; the first report wins.
	Err
	// Map is a buffer the kernel reads through the copy engine: on CUDA a tensor map of it
	// (CUtensorMap, 128 bytes passed by value; the backend makes it with cuTensorMapEncodeTiled),
	// on Metal the buffer itself.
	Map
)

// Param is one kernel parameter.
type Param struct {
	Kind ParamKind
	Type string // the element type of a buffer, or the scalar's type; "" for Err
	Name string
}

// Kernel is one emitted kernel: a variant of a definition, with its variables substituted.
type Kernel struct {
	Name     string
	Params   []Param
	Threads  int    // the threadgroup size every launch uses
	Resident int    // threads(N, G)'s G, or 0: CUDA's launch bound, which caps registers so G groups fit an SM
	Dynamic  bool   // the body declares DYNAMIC_SHARED: on CUDA a launch says its bytes (Launch.Shared)
	Body     string // the body, braces included
	File     string // the .kern file it came from
}

var scalarTypes = map[string]bool{"int": true, "uint": true, "float": true, "ulong": true}

var (
	loadOnce sync.Once
	all      []Kernel
	loadErr  error
)

// All returns every kernel, in name order. It panics if the embedded sources do not parse, which
// the package's tests rule out.
func All() []Kernel {
	loadOnce.Do(func() { all, loadErr = parseAll(files) })
	if loadErr != nil {
		panic(loadErr)
	}
	return all
}

// Lookup returns the kernel with the given name.
func Lookup(name string) (Kernel, bool) {
	ks := All()
	i := sort.Search(len(ks), func(i int) bool { return ks[i].Name >= name })
	if i < len(ks) && ks[i].Name == name {
		return ks[i], true
	}
	return Kernel{}, false
}

// CUDA returns the whole CUDA C translation unit: the prelude, common.h and every kernel.
func CUDA() string {
	return emit(cudaSignature, cudaPreludes...)
}

// cudaPreludes are the CUDA prelude's files, in order.
var cudaPreludes = []string{"prelude.cuh", "prelude_tma.cuh"}

// Metal returns the whole Metal Shading Language source: the prelude, common.h and every kernel.
// It has not yet been compiled by Apple's compiler; the package's tests compile it with clang
// against a shim and run every kernel on the CPU (see README.md, "What is verified").
func Metal() string {
	return emit(metalSignature, "prelude.metal")
}

// Prelude returns the named backend prelude or common.h, as embedded.
func Prelude(name string) string {
	b, err := files.ReadFile(name)
	if err != nil {
		panic("kernels: missing embedded file " + name) // fixed at build time
	}
	return string(b)
}

func emit(signature func(Kernel) string, preludes ...string) string {
	var b strings.Builder
	for _, p := range preludes {
		b.WriteString(Prelude(p))
		b.WriteString("\n")
	}
	b.WriteString(Prelude("common.h"))
	for _, k := range All() {
		fmt.Fprintf(&b, "\n// %s, from %s\n%s\n%s\n", k.Name, k.File, signature(k), waitFirst(k.Body))
	}
	return b.String()
}

// waitFirst starts a kernel's body with GRID_WAIT and GRID_RELEASE (the CUDA prelude says what
// they do) unless the body calls GRID_WAIT itself, after work that reads nothing a kernel writes.
func waitFirst(body string) string {
	if strings.Contains(commentRE.ReplaceAllString(body, ""), "GRID_WAIT()") {
		return body
	}
	return "{\n\tGRID_WAIT();\n\tGRID_RELEASE();" + strings.TrimPrefix(body, "{")
}

func cudaSignature(k Kernel) string {
	params := make([]string, len(k.Params))
	for i, p := range k.Params {
		switch p.Kind {
		case Out:
			params[i] = p.Type + "* " + p.Name
		case In:
			params[i] = "const " + p.Type + "* " + p.Name
		case Scalar:
			params[i] = p.Type + " " + p.Name
		case Err:
			params[i] = "ERRPTR " + p.Name
		case Map:
			params[i] = "const __grid_constant__ tfd_tensor_map " + p.Name
		}
	}
	bounds := strconv.Itoa(k.Threads)
	if k.Resident > 0 {
		bounds += ", " + strconv.Itoa(k.Resident)
	}
	return fmt.Sprintf("extern \"C\" __global__ void __launch_bounds__(%s) %s(%s)", bounds, k.Name, strings.Join(params, ", "))
}

// metalSignature binds parameter i to [[buffer(i)]]: scalars are set with setBytes, buffers with
// setBuffer, in declaration order. The thread-position arguments follow.
func metalSignature(k Kernel) string {
	params := make([]string, 0, len(k.Params)+3)
	for i, p := range k.Params {
		var s string
		switch p.Kind {
		case Out:
			s = "device " + p.Type + "* " + p.Name
		case In, Map:
			s = "const device " + p.Type + "* " + p.Name
		case Scalar:
			s = "constant " + p.Type + "& " + p.Name
		case Err:
			s = "ERRPTR " + p.Name
		}
		params = append(params, fmt.Sprintf("%s [[buffer(%d)]]", s, i))
	}
	body := commentRE.ReplaceAllString(k.Body, "")
	for _, a := range metalThreadArgs {
		if a.uses.MatchString(body) {
			params = append(params, a.param)
		}
	}
	return fmt.Sprintf("[[max_total_threads_per_threadgroup(%d)]] kernel void %s(%s)", k.Threads, k.Name, strings.Join(params, ", "))
}

// metalThreadArgs are the thread-position arguments a Metal kernel may take, each with the dialect
// names (prelude.metal) that read it. A kernel gets only those its body uses: Metal would accept
// the rest, but an unused parameter is a warning, and the MSL checks build with -Werror. Lane and
// SIMD-group indices come from Metal's own attributes rather than from the thread index, so they
// stay right whatever the SIMD width (the kernels still assume 32; see README.md).
var metalThreadArgs = []struct {
	uses  *regexp.Regexp
	param string
}{
	{regexp.MustCompile(`\bGROUP_[XY]\b`), "uint3 tfd_group [[threadgroup_position_in_grid]]"},
	{regexp.MustCompile(`\b(LOCAL_X|WGT_READY)\b`), "uint3 tfd_local [[thread_position_in_threadgroup]]"}, // Metal's WGT_READY copies with every thread
	{regexp.MustCompile(`\bGROUP_SIZE_X\b`), "uint3 tfd_size [[threads_per_threadgroup]]"},
	{regexp.MustCompile(`\b(LANE|MMA_LOAD_[ABX]|MMA_LOAD_A_PACKED|MMA_B_OF|MMA_FETCH_A_PACKED|MMA_FETCH_X|MMA_[AX]_OF|WGT_LOAD_A|WGT_STEP)\b`), "ushort tfd_lane [[thread_index_in_simdgroup]]"}, // the matrix unit's loads pass LANE
	{regexp.MustCompile(`\bWARP\b`), "ushort tfd_simd [[simdgroup_index_in_threadgroup]]"},
}

var (
	headerRE  = regexp.MustCompile(`^kernel\s+([A-Za-z_$][A-Za-z0-9_$]*)\s*\((.*)\)\s*threads\((\d+)(?:\s*,\s*(\d+))?\)\s*(?:variants\((.*)\))?\s*$`)
	variantRE = regexp.MustCompile(`\$[A-Za-z_][A-Za-z0-9_]*`)
	identRE   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_$]*$`)
	commentRE = regexp.MustCompile(`//[^\n]*`)
	dynamicRE = regexp.MustCompile(`\bDYNAMIC_SHARED\(`)
)

func parseAll(fsys fs.FS) ([]Kernel, error) {
	names, err := fs.Glob(fsys, "src/*.kern")
	if err != nil {
		return nil, err
	}
	var ks []Kernel
	for _, name := range names {
		src, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		got, err := parseFile(name, string(src))
		if err != nil {
			return nil, err
		}
		ks = append(ks, got...)
	}
	sort.Slice(ks, func(i, j int) bool { return ks[i].Name < ks[j].Name })
	for i := 1; i < len(ks); i++ {
		if ks[i].Name == ks[i-1].Name {
			return nil, fmt.Errorf("kernels: %s is defined twice (%s, %s)", ks[i].Name, ks[i-1].File, ks[i].File)
		}
	}
	return ks, nil
}

// parseFile reads the kernels of one .kern file. A definition is a header line starting with
// "kernel", then a body from a line "{" to the next line "}" (both at the start of the line).
func parseFile(file, src string) ([]Kernel, error) {
	lines := strings.Split(src, "\n")
	var ks []Kernel
	for i := 0; i < len(lines); i++ {
		line := strings.TrimRight(lines[i], " \t\r")
		if !strings.HasPrefix(line, "kernel ") {
			continue
		}
		where := fmt.Sprintf("%s:%d", file, i+1)
		m := headerRE.FindStringSubmatch(line)
		if m == nil {
			return nil, fmt.Errorf("kernels: %s: bad kernel header %q", where, line)
		}
		if i+1 >= len(lines) || strings.TrimRight(lines[i+1], " \t\r") != "{" {
			return nil, fmt.Errorf("kernels: %s: kernel %s: the body must start with a line \"{\"", where, m[1])
		}
		end := -1
		for j := i + 2; j < len(lines); j++ {
			if strings.TrimRight(lines[j], " \t\r") == "}" {
				end = j
				break
			}
		}
		if end < 0 {
			return nil, fmt.Errorf("kernels: %s: kernel %s: no closing line \"}\"", where, m[1])
		}
		body := strings.Join(lines[i+1:end+1], "\n")
		threads, _ := strconv.Atoi(m[3])
		if threads <= 0 || threads > 1024 {
			return nil, fmt.Errorf("kernels: %s: kernel %s: threads(%d) outside 1..1024", where, m[1], threads)
		}
		resident, _ := strconv.Atoi(m[4])
		variants, err := parseVariants(m[5])
		if err != nil {
			return nil, fmt.Errorf("kernels: %s: kernel %s: %w", where, m[1], err)
		}
		for _, env := range variants {
			k, err := instantiate(file, m[1], m[2], body, threads, env)
			k.Resident = resident
			if err != nil {
				return nil, fmt.Errorf("kernels: %s: %w", where, err)
			}
			ks = append(ks, k)
		}
		i = end
	}
	return ks, nil
}

// parseVariants turns "W: bf16 f16; R: 1 2" into every combination of the variables' values; no
// variants is one empty combination.
func parseVariants(spec string) ([]map[string]string, error) {
	combos := []map[string]string{{}}
	if strings.TrimSpace(spec) == "" {
		return combos, nil
	}
	for _, part := range strings.Split(spec, ";") {
		name, values, ok := strings.Cut(part, ":")
		name = strings.TrimSpace(name)
		vals := strings.Fields(values)
		if !ok || !identRE.MatchString(name) || len(vals) == 0 {
			return nil, fmt.Errorf("bad variants %q: want NAME: v1 v2 …; …", part)
		}
		var next []map[string]string
		for _, c := range combos {
			for _, v := range vals {
				n := make(map[string]string, len(c)+1)
				for k, x := range c {
					n[k] = x
				}
				n[name] = v
				next = append(next, n)
			}
		}
		combos = next
	}
	return combos, nil
}

// instantiate substitutes env's variables ($NAME) into the name, parameters and body. Longer names
// go first, so that $WX is never read as $W followed by X.
func instantiate(file, name, params, body string, threads int, env map[string]string) (Kernel, error) {
	vars := make([]string, 0, len(env))
	for v := range env {
		vars = append(vars, v)
	}
	sort.Slice(vars, func(i, j int) bool { return len(vars[i]) > len(vars[j]) })
	subst := func(s string) string {
		for _, v := range vars {
			s = strings.ReplaceAll(s, "$"+v, env[v])
		}
		return s
	}
	k := Kernel{Name: subst(name), Threads: threads, Body: subst(body), File: file}
	k.Dynamic = dynamicRE.MatchString(commentRE.ReplaceAllString(k.Body, ""))
	for _, p := range strings.Split(subst(params), ",") {
		f := strings.Fields(p)
		var q Param
		switch {
		case len(f) == 3 && (f[0] == "out" || f[0] == "in" || f[0] == "map"):
			q = Param{Kind: map[string]ParamKind{"out": Out, "in": In, "map": Map}[f[0]], Type: f[1], Name: f[2]}
		case len(f) == 2 && f[0] == "err":
			q = Param{Kind: Err, Name: f[1]}
		case len(f) == 2 && scalarTypes[f[0]]:
			q = Param{Kind: Scalar, Type: f[0], Name: f[1]}
		default:
			return Kernel{}, fmt.Errorf("kernel %s: bad parameter %q: want \"out T name\", \"in T name\", \"map T name\", \"err name\" or a scalar \"int|uint|float|ulong name\"", k.Name, strings.TrimSpace(p))
		}
		if !identRE.MatchString(q.Name) || (q.Type != "" && !identRE.MatchString(q.Type)) {
			return Kernel{}, fmt.Errorf("kernel %s: bad parameter %q", k.Name, strings.TrimSpace(p))
		}
		k.Params = append(k.Params, q)
	}
	for _, s := range []string{k.Name, k.Body, params} {
		if v := variantRE.FindString(subst(s)); v != "" {
			return Kernel{}, fmt.Errorf("kernel %s: undefined variant variable %s", k.Name, v)
		}
	}
	return k, nil
}
