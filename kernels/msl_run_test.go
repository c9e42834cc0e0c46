package kernels_test

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"tfd/kernels"
)

// The MSL runner (mslcheck/runner) is a C++ program built here with clang++ from the Metal
// emission, the executing shim (mslcheck/shim_exec) and a table of entry points generated below;
// tfd itself stays free of cgo. The test talks to it through a pipe and files: each buffer is a
// file, each launch a line (see mslcheck/runner/main.cpp).

// execFlags build the runner: no contraction, so MUL and ADD round separately as on a GPU with
// contraction off; no strict aliasing, as the kernels read bf16 weights through uint4 vectors;
// misaligned loads trap (a 16-byte vector load needs a 16-byte-aligned address on a GPU too).
var execFlags = []string{"-std=c++20", "-O2", "-mf16c", "-ffp-contract=off", "-fno-strict-aliasing",
	"-fsanitize=alignment", "-fsanitize-trap=alignment", "-Wall", "-Wextra", "-Werror"}

var (
	runnerOnce  sync.Once
	runnerDir   string // removed by TestMain
	runnerBin   string
	runnerErr   error
	runnerLines []string // of its kernels' source, for the runner's reports of "line N"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if runnerDir != "" {
		os.RemoveAll(runnerDir)
	}
	os.Exit(code)
}

// runner returns the path of the MSL runner, built on first use for every test of the process.
func runner(t *testing.T) string {
	t.Helper()
	clang := clangxx(t)
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skipf("the MSL runner's fibers are x86-64 Linux code; this is %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	runnerOnce.Do(func() {
		if runnerDir, runnerErr = os.MkdirTemp("", "tfd-msl-"); runnerErr == nil {
			runnerBin, runnerErr = buildRunner(clang, runnerDir)
		}
	})
	if runnerErr != nil {
		t.Fatal(runnerErr)
	}
	return runnerBin
}

// buildRunner writes the runner's kernel file and builds the runner into dir, returning its path.
func buildRunner(clang, dir string) (string, error) {
	bad, err := os.ReadFile(filepath.Join("mslcheck", "exec_bad.metal"))
	if err != nil {
		return "", err
	}
	src, err := execSource(kernels.Metal() + "\n" + string(bad))
	if err != nil {
		return "", err
	}
	gen := filepath.Join(dir, "kernels.cpp")
	if err := os.WriteFile(gen, []byte(src), 0o644); err != nil {
		return "", err
	}
	runnerLines = strings.Split(src, "\n")
	inc := []string{"-I", filepath.Join("mslcheck", "shim_exec")}
	// Three objects, built side by side; the kernels' pragma (Metal's) is unknown to clang.
	objs := []struct{ src, flag string }{
		{gen, "-Wno-unknown-pragmas"},
		{filepath.Join("mslcheck", "runner", "sched.cpp"), ""},
		{filepath.Join("mslcheck", "runner", "main.cpp"), ""},
	}
	var wg sync.WaitGroup
	errs := make([]error, len(objs))
	for i, o := range objs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			args := append(append(append([]string{}, execFlags...), inc...), "-c", o.src, "-o", filepath.Join(dir, fmt.Sprintf("%d.o", i)))
			if o.flag != "" {
				args = append(args, o.flag)
			}
			if out, err := exec.Command(clang, args...).CombinedOutput(); err != nil {
				errs[i] = fmt.Errorf("clang++ %s: %v\n%s", o.src, err, out)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return "", err
		}
	}
	bin := filepath.Join(dir, "runner")
	args := []string{"-o", bin, "-pthread"}
	for i := range objs {
		args = append(args, filepath.Join(dir, fmt.Sprintf("%d.o", i)))
	}
	if out, err := exec.Command(clang, args...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("linking the runner: %v\n%s", err, out)
	}
	return bin, nil
}

var (
	sharedDeclRE = regexp.MustCompile(`(?m)^(\s*)SHARED\s+([A-Za-z_][A-Za-z0-9_ ]*?)\s+([A-Za-z_][A-Za-z0-9_]*)\s*\[([^\]]+)\]\s*;`)
	sharedUseRE  = regexp.MustCompile(`(?m)^[^#\n]*\bSHARED\b`)
	// Metal's DYNAMIC_SHARED(name, bytes) is a static array of uint4s (prelude.metal).
	dynamicDeclRE = regexp.MustCompile(`(?m)^(\s*)DYNAMIC_SHARED\(\s*([A-Za-z_][A-Za-z0-9_]*)\s*,([^;]+)\)\s*;`)
)

// execSource turns an MSL source into the runner's kernel file: threadgroup declarations, and
// Metal's DYNAMIC_SHARED, become TFD_SHARED (memory of the group being run), and a thunk per
// kernel binds its arguments, buffer i to args[i] and each thread-position attribute to the
// thread's position.
func execSource(msl string) (string, error) {
	src := sharedDeclRE.ReplaceAllString(msl, "${1}TFD_SHARED(${2}, ${3}, ${4});")
	src = dynamicDeclRE.ReplaceAllString(src, "${1}TFD_SHARED(uint4, ${2}, (${3}) / 16);")
	if m := sharedUseRE.FindString(src); m != "" {
		return "", fmt.Errorf("SHARED used other than as \"SHARED T name[N];\": %q", m)
	}
	ks, errs := parseMetalKernels(src)
	if len(errs) > 0 {
		return "", errs[0]
	}
	pos := map[string]string{
		"threadgroup_position_in_grid":   "tp.group",
		"thread_position_in_threadgroup": "tp.local",
		"threads_per_threadgroup":        "tp.size",
		"thread_index_in_simdgroup":      "tp.lane",
		"simdgroup_index_in_threadgroup": "tp.simd",
	}
	var b strings.Builder
	b.WriteString("#include <metal_stdlib>\n" + src + "\n// Generated by kernels/msl_run_test.go.\nnamespace {\n")
	var table strings.Builder
	for _, k := range ks {
		var args, sizes []string
		for _, a := range k.Args {
			switch {
			case a.Buffer() >= 0 && strings.HasSuffix(a.Type, "&"):
				t := strings.TrimSuffix(a.Type, "&")
				args = append(args, fmt.Sprintf("*(%s*)a[%d]", t, a.Buffer()))
				sizes = append(sizes, fmt.Sprintf("int(sizeof(%s))", t))
			case a.Buffer() >= 0:
				args = append(args, fmt.Sprintf("(%s)a[%d]", a.Type, a.Buffer()))
				sizes = append(sizes, "0")
			case pos[a.Attr] != "":
				args = append(args, fmt.Sprintf("(%s)%s", a.Type, pos[a.Attr]))
			default:
				return "", fmt.Errorf("%s: no value for [[%s]]", k.Name, a.Attr)
			}
		}
		fmt.Fprintf(&b, "void thunk_%s(void* const* a, const tfd_exec::ThreadPos& tp) {\n\t(void)a;\n\t%s(%s);\n}\n", k.Name, k.Name, strings.Join(args, ", "))
		fmt.Fprintf(&b, "const int sizes_%s[] = {%s};\n", k.Name, strings.Join(append(sizes, "-1"), ", "))
		fmt.Fprintf(&table, "\t{\"%s\", thunk_%s, %d, sizes_%s, %d},\n", k.Name, k.Name, len(sizes), k.Name, k.MaxThreads)
	}
	fmt.Fprintf(&b, "} // namespace\n\nconst tfd_exec::KernelInfo tfd_exec::kernel_table[] = {\n%s};\nconst int tfd_exec::kernel_count = %d;\n", table.String(), len(ks))
	return b.String(), nil
}

// mslRunner is one running runner process.
type mslRunner struct {
	dir    string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	stderr bytes.Buffer
	dead   error
	// Launched lists every kernel launched, in order.
	Launched []string
}

// startRunner starts the runner at bin, stopped when the test ends.
func startRunner(t *testing.T, bin string) *mslRunner {
	t.Helper()
	r := &mslRunner{dir: t.TempDir(), cmd: exec.Command(bin)}
	r.cmd.Stderr = &r.stderr
	var err error
	if r.stdin, err = r.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := r.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	r.stdout = bufio.NewReader(out)
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if r.dead == nil {
			fmt.Fprintln(r.stdin, "quit")
		}
		r.stdin.Close()
		r.cmd.Wait()
	})
	return r
}

// mbuf is a buffer bound to a kernel argument; a launch sends its bytes and reads them back.
type mbuf struct{ b []byte }

// command sends one line and returns the runner's answer: nil for "ok".
func (r *mslRunner) command(line string) error {
	if r.dead != nil {
		return r.dead
	}
	if _, err := fmt.Fprintln(r.stdin, line); err != nil {
		r.dead = fmt.Errorf("runner: %v (stderr: %s)", err, r.stderr.String())
		return r.dead
	}
	reply, err := r.stdout.ReadString('\n')
	reply = strings.TrimSpace(reply)
	if err != nil {
		r.dead = fmt.Errorf("runner ended: %q %v (stderr: %s)", reply, err, r.stderr.String())
		if strings.HasPrefix(reply, "fail ") {
			r.dead = fmt.Errorf("runner ended: %s", reply[len("fail "):])
		}
		return r.dead
	}
	if reply != "ok" {
		return fmt.Errorf("%s", explainLines(strings.TrimPrefix(reply, "fail ")))
	}
	return nil
}

var lineRE = regexp.MustCompile(`line (\d+)`)

// explainLines follows each "line N" of a runner's report with that line of the kernels' source.
func explainLines(msg string) string {
	return lineRE.ReplaceAllStringFunc(msg, func(m string) string {
		n, _ := strconv.Atoi(m[len("line "):])
		if n < 1 || n > len(runnerLines) {
			return m
		}
		return fmt.Sprintf("%s (%q)", m, strings.TrimSpace(runnerLines[n-1]))
	})
}

// launch runs l with args bound in the kernel's parameter order, checked against its definition:
// an *mbuf for a buffer or the error word, an int32, uint32, float32 or uint64 for a scalar of type
// int, uint, float or ulong.
func (r *mslRunner) launch(l kernels.Launch, args ...any) error {
	k, ok := kernels.Lookup(l.Kernel)
	if !ok {
		return fmt.Errorf("no kernel %s", l.Kernel)
	}
	if len(args) != len(k.Params) {
		return fmt.Errorf("%s takes %d arguments, got %d", k.Name, len(k.Params), len(args))
	}
	for i, p := range k.Params {
		want := map[string]string{"int": "int", "uint": "uint", "float": "float", "ulong": "ulong"}[p.Type]
		if p.Kind != kernels.Scalar {
			want = "buffer"
		}
		if got := argKind(args[i]); got != want {
			return fmt.Errorf("%s: argument %d (%s %s) is a %s, want a %s", k.Name, i, p.Type, p.Name, got, want)
		}
	}
	if l.Threads != k.Threads {
		return fmt.Errorf("%s: %d threads, the kernel is written for %d", k.Name, l.Threads, k.Threads)
	}
	return r.run(l.Kernel, l.Groups[0], l.Groups[1], l.Threads, args...)
}

// argKind says what a launch argument binds: a buffer, or a scalar of an MSL type.
func argKind(a any) string {
	switch a.(type) {
	case *mbuf:
		return "buffer"
	case int32:
		return "int"
	case uint32:
		return "uint"
	case float32:
		return "float"
	case uint64:
		return "ulong"
	}
	return fmt.Sprintf("%T", a)
}

// run launches any kernel of the runner, the wrong ones of exec_bad.metal included.
func (r *mslRunner) run(name string, gx, gy, threads int, args ...any) error {
	r.Launched = append(r.Launched, name)
	ids := map[*mbuf]int{}
	var paths []string
	var words []string
	for _, a := range args {
		switch v := a.(type) {
		case *mbuf:
			id, ok := ids[v]
			if !ok {
				id = len(ids)
				ids[v] = id
				path := filepath.Join(r.dir, fmt.Sprintf("b%d.bin", id))
				paths = append(paths, path)
				if err := os.WriteFile(path, v.b, 0o644); err != nil {
					return err
				}
				if err := r.command(fmt.Sprintf("buf %d %s", id, path)); err != nil {
					return err
				}
			}
			words = append(words, fmt.Sprintf("@%d", id))
		case int32:
			words = append(words, fmt.Sprintf("=%x", binary.LittleEndian.AppendUint32(nil, uint32(v))))
		case uint32:
			words = append(words, fmt.Sprintf("=%x", binary.LittleEndian.AppendUint32(nil, v)))
		case float32:
			words = append(words, fmt.Sprintf("=%x", binary.LittleEndian.AppendUint32(nil, math.Float32bits(v))))
		case uint64:
			words = append(words, fmt.Sprintf("=%x", binary.LittleEndian.AppendUint64(nil, v)))
		default:
			return fmt.Errorf("%s: argument of type %T", name, a)
		}
	}
	err := r.command(fmt.Sprintf("run %s %d %d %d %s", name, gx, gy, threads, strings.Join(words, " ")))
	if r.dead != nil {
		return err
	}
	// Read every buffer back, whether the launch failed or not: what it wrote may explain it.
	for v, id := range ids {
		got, rerr := os.ReadFile(paths[id])
		if rerr != nil {
			return rerr
		}
		copy(v.b, got)
	}
	return err
}

// TestMSLRunRejects shows that the run check can fail: each wrong kernel of exec_bad.metal must be
// caught, by the runner's answer or by what it leaves in memory.
func TestMSLRunRejects(t *testing.T) {
	bin := runner(t)
	floats := func(n int) *mbuf { return &mbuf{make([]byte, 4*n)} }
	hasNaN := func(b *mbuf) bool {
		for i := 0; i < len(b.b); i += 4 {
			if math.IsNaN(float64(math.Float32frombits(binary.LittleEndian.Uint32(b.b[i:])))) {
				return true
			}
		}
		return false
	}
	for _, c := range []struct {
		name    string
		threads int
		buf     *mbuf
		want    string             // in the runner's answer
		check   func(*mbuf) string // or, for a launch that succeeds, what is wrong with memory
	}{
		{"bad_unwritten_shared", 128, floats(128), "", func(b *mbuf) string {
			if hasNaN(b) {
				return ""
			}
			return "no NaN: the unwritten threadgroup memory was not garbage"
		}},
		{"bad_missing_barrier", 128, floats(128), "", func(b *mbuf) string {
			if hasNaN(b) {
				return ""
			}
			return "no NaN: a thread read its neighbour's memory before it was written, unnoticed"
		}},
		{"bad_barrier_after_return", 128, floats(128), "returned before the barrier", nil},
		{"bad_divergent_barriers", 128, floats(128), "different barriers", nil},
		{"bad_deadlock", 32, floats(32), "deadlock: thread 0: at the barrier of line", nil},
		{"bad_shuffle_returned", 32, floats(32), "which returned", nil},
		{"bad_report_once", 32, &mbuf{make([]byte, 16)}, "", func(b *mbuf) string {
			if binary.LittleEndian.Uint32(b.b) == 0 {
				return ""
			}
			return "the report survived a single weak compare-and-swap"
		}},
		{"bad_read_past_end", 32, floats(32), "0 bytes past the end of buffer @0 of 128 bytes", nil},
		{"bad_misaligned", 32, floats(4*32 + 4), "SIGILL (a misaligned load", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := startRunner(t, bin) // a fault ends the process
			err := r.run(c.name, 1, 1, c.threads, c.buf)
			switch {
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("runner: %v, want an error containing %q", err, c.want)
			case c.want == "" && err != nil:
				t.Errorf("runner: %v", err)
			case c.check != nil:
				if msg := c.check(c.buf); msg != "" {
					t.Error(msg)
				}
			}
			if err != nil {
				t.Logf("caught: %v", err)
			} else {
				t.Log("caught by what it left in memory")
			}
		})
	}
}
