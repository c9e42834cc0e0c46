package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"tfd/compute"
	"tfd/engine"
	"tfd/engine/tokenizer"
	"tfd/models"
	"tfd/tools/qwen3shape"
)

// formats are the GGUF types compared, by ggml's names.
var formats = []struct {
	name  string
	dtype compute.DType
}{{"q8_0", compute.Q8_0}, {"q4_0", compute.Q4_0}}

// source is what the prompt ids are made of: Go, the bundled model's kind of text.
const source = "package main\n\nimport (\n\t\"fmt\"\n\t\"os\"\n)\n\n// main prints its arguments, one a line.\nfunc main() {\n\tfor i, arg := range os.Args[1:] {\n\t\tfmt.Printf(\"%d: %s\\n\", i, arg)\n\t}\n}\n"

// config is the comparison's flags.
type config struct {
	nlc, threads, models, qwenDir, out       string
	rounds, prompt, n, streams, streamTokens int
	limit                                    time.Duration // a run that takes longer is stopped and counted as stalled
	print                                    bool          // report prints the table (at the end), besides writing the JSON
}

// modelNames are the models compare knows, by -models' names.
var modelNames = []string{"gopher", "qwen3-0.6b"}

// compare writes the GGUF files and the prompt ids, runs both sides round by round, and prints
// (and writes) the medians.
func compare(c config) error {
	var threads []int
	for _, f := range strings.Split(c.threads, ",") {
		t, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || t < 1 || t > runtime.NumCPU() {
			return fmt.Errorf("-threads %q: want counts from 1 to %d", c.threads, runtime.NumCPU())
		}
		threads = append(threads, t)
	}
	var names []string
	for _, f := range strings.Split(c.models, ",") {
		name := strings.TrimSpace(f)
		if !slices.Contains(modelNames, name) {
			return fmt.Errorf("-models %q: want names among %s", c.models, strings.Join(modelNames, ", "))
		}
		names = append(names, name)
	}
	tmp, err := os.MkdirTemp("", "tfd-speed-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	paths := map[string]string{} // by model/format
	for _, name := range names {
		for _, f := range formats {
			path, err := writeGGUF(name, f.name, f.dtype, tmp, c.qwenDir)
			if err != nil {
				return err
			}
			paths[name+"/"+f.name] = path
		}
	}
	idsPath := filepath.Join(tmp, "ids.json")
	if err := writeIDs(idsPath, c.prompt); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "..", "speed.mjs")
	var runs []run
	for r := range c.rounds {
		for _, name := range names {
			for _, f := range formats {
				for _, t := range threads {
					sides := []string{"tfd", "llama.cpp"}
					if r%2 == 1 {
						slices.Reverse(sides)
					}
					for _, s := range sides {
						path, n, streams, tokens := paths[name+"/"+f.name], fmt.Sprint(c.n), fmt.Sprint(c.streams), fmt.Sprint(c.streamTokens)
						cmd := pinned(t, self, "-worker", "-gguf", path, "-ids", idsPath, "-n", n, "-streams", streams, "-stream-tokens", tokens)
						cmd.Env = append(os.Environ(), fmt.Sprintf("GOMAXPROCS=%d", t))
						if s == "llama.cpp" {
							cmd = pinned(t, "node", script, path, idsPath, fmt.Sprint(t), n, streams, tokens)
							cmd.Env = os.Environ()
							if c.nlc != "" {
								cmd.Env = append(cmd.Env, "NODE_LLAMA_CPP="+c.nlc)
							}
						}
						res, err := measure(cmd, c.limit)
						if errors.Is(err, errStalled) {
							runs = append(runs, run{Round: r, Model: name, Format: f.name, Side: s, Stalled: true, result: result{Threads: t}})
							fmt.Fprintf(os.Stderr, "round %d %s %s %d thread(s) %-9s stalled: stopped after %v\n", r, name, f.name, t, s, c.limit)
							if err := report(runs, names, threads, c); err != nil {
								return err
							}
							continue
						}
						if err != nil {
							return err
						}
						if res.Threads != t {
							return fmt.Errorf("%s ran %d threads, want %d", s, res.Threads, t)
						}
						runs = append(runs, run{Round: r, Model: name, Format: f.name, Side: s, result: res})
						// The JSON is rewritten after every run, so a run stopped early keeps what it measured.
						if err := report(runs, names, threads, c); err != nil {
							return err
						}
						fmt.Fprintf(os.Stderr, "round %d %s %s %d thread(s) %-9s prompt %7.1f tok/s  decode %6.1f tok/s  %d streams %6.1f tok/s  peak RSS %4d MiB  CPU s %.1f %.1f %.1f\n",
							r, name, f.name, t, s, res.PromptTPS, res.DecodeTPS, res.Streams, res.AggregateTPS, res.PeakRSSKiB>>10, res.PromptCPU, res.DecodeCPU, res.AggregateCPU)
					}
				}
			}
		}
	}
	c.print = true
	return report(runs, names, threads, c)
}

// writeGGUF writes the model as a GGUF file of dtype and returns its path: the bundled model into
// tmp; the 0.6B-shaped checkpoint (written first if need be) into its folder, unless there already.
func writeGGUF(name, format string, dtype compute.DType, tmp, qwenDir string) (string, error) {
	src := engine.Source{FS: models.FS(), Name: models.Name}
	path := filepath.Join(tmp, models.Name+"-"+format+".gguf")
	if name == "qwen3-0.6b" {
		if err := qwen3shape.Write(qwenDir, models.FS()); err != nil {
			return "", err
		}
		src, path = engine.Source{Dir: qwenDir}, filepath.Join(qwenDir, "qwen3-0.6b-"+format+".gguf")
		if _, err := os.Stat(path); err == nil {
			return path, nil
		}
	}
	f, err := os.Create(path + ".part")
	if err != nil {
		return "", err
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	if err := engine.ExportGGUF(src, dtype, w); err != nil {
		return "", err
	}
	if err := w.Flush(); err != nil {
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	return path, os.Rename(path+".part", path)
}

// writeIDs writes the first n ids of source, repeated, as the bundled tokenizer encodes it.
func writeIDs(path string, n int) error {
	raw, err := fs.ReadFile(models.FS(), "tokenizer.json")
	if err != nil {
		return err
	}
	tok, err := tokenizer.Load(raw)
	if err != nil {
		return err
	}
	var ids []int32
	for len(ids) < n {
		ids = append(ids, tok.Encode(source)...)
	}
	data, err := json.Marshal(ids[:n])
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// pinned returns the command pinned to cores 0 … threads−1.
func pinned(threads int, name string, args ...string) *exec.Cmd {
	cores := "0"
	if threads > 1 {
		cores = fmt.Sprintf("0-%d", threads-1)
	}
	return exec.Command("taskset", append([]string{"-c", cores, name}, args...)...)
}

// errStalled is measure's error for a run stopped at its time limit.
var errStalled = errors.New("stalled")

// measure runs cmd, stopping it after limit (errStalled), and reads the figures it prints.
func measure(cmd *exec.Cmd, limit time.Duration) (result, error) {
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		return result{}, fmt.Errorf("%s: %w", strings.Join(cmd.Args, " "), err)
	}
	timer := time.AfterFunc(limit, func() { cmd.Process.Kill() }) // taskset has exec'd the command: this is its process
	err := cmd.Wait()
	if !timer.Stop() {
		return result{}, errStalled
	}
	if err != nil {
		return result{}, fmt.Errorf("%s: %w\n%s", strings.Join(cmd.Args, " "), err, stderr.String())
	}
	var res result
	lines := bytes.Split(bytes.TrimSpace(stdout.Bytes()), []byte("\n"))
	if err := json.Unmarshal(lines[len(lines)-1], &res); err != nil {
		return result{}, fmt.Errorf("%s printed %q: %w", strings.Join(cmd.Args, " "), stdout.String(), err)
	}
	return res, nil
}

func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// sideKey names a side in the JSON's keys.
var sideKey = map[string]string{"tfd": "tfd", "llama.cpp": "llamacpp"}

// figures are what each run measures, by the names the summary uses.
var figures = []struct {
	name  string
	label func(c config) string
	get   func(result) float64
}{
	{"decode", func(c config) string { return fmt.Sprintf("decode %d tokens, tok/s", c.n) }, func(r result) float64 { return r.DecodeTPS }},
	{"prompt", func(c config) string { return fmt.Sprintf("prompt %d tokens, tok/s", c.prompt) }, func(r result) float64 { return r.PromptTPS }},
	{"aggregate", func(c config) string { return fmt.Sprintf("%d streams × %d tokens, tok/s", c.streams, c.streamTokens) }, func(r result) float64 { return r.AggregateTPS }},
	{"rss", func(config) string { return "peak RSS, MiB" }, func(r result) float64 { return float64(r.PeakRSSKiB) / 1024 }},
	{"decode_cpu", func(config) string { return "decode, tok per CPU-second" }, func(r result) float64 { return float64(r.Tokens) / r.DecodeCPU }},
	{"prompt_cpu", func(config) string { return "prompt, tok per CPU-second" }, func(r result) float64 { return float64(r.Prompt) / r.PromptCPU }},
	{"aggregate_cpu", func(config) string { return "streams, tok per CPU-second" }, func(r result) float64 {
		return float64(r.Streams*r.StreamTokens) / r.AggregateCPU
	}},
}

// report prints the medians as a Markdown table and writes the JSON.
func report(runs []run, names []string, threads []int, c config) error {
	medians := map[string]map[string]float64{}
	summary := map[string]map[string]float64{}
	stalled := map[string]int{}
	for _, r := range runs {
		if r.Stalled {
			stalled[fmt.Sprintf("%s/%s_t%d_%s", r.Model, r.Format, r.Threads, sideKey[r.Side])]++
		}
	}
	table := "| model | format | threads | figure | tfd | llama.cpp | tfd / llama.cpp |\n| --- | --- | ---: | --- | ---: | ---: | ---: |\n"
	for _, name := range names {
		medians[name], summary[name] = map[string]float64{}, map[string]float64{}
		for _, f := range formats {
			for _, t := range threads {
				for _, fig := range figures {
					var m [2]float64
					var have [2]bool
					for i, side := range []string{"tfd", "llama.cpp"} {
						var xs []float64
						for _, r := range runs {
							if r.Model == name && r.Format == f.name && r.Threads == t && r.Side == side && !r.Stalled {
								xs = append(xs, fig.get(r.result))
							}
						}
						if have[i] = len(xs) > 0; have[i] {
							m[i] = median(xs)
							medians[name][fmt.Sprintf("%s_%s_t%d_%s", f.name, fig.name, t, sideKey[side])] = m[i]
						}
					}
					key := fmt.Sprintf("%s_%s_t%d", f.name, fig.name, t)
					cells := [3]string{"stalled", "stalled", "—"}
					for i := range m {
						if have[i] {
							cells[i] = fmt.Sprintf("%.1f", m[i])
						}
					}
					if have[0] && have[1] {
						summary[name][key] = m[0] / m[1]
						cells[2] = fmt.Sprintf("%.2f", m[0]/m[1])
					}
					table += fmt.Sprintf("| %s | %s | %d | %s | %s | %s | %s |\n", name, f.name, t, fig.label(c), cells[0], cells[1], cells[2])
				}
			}
		}
	}
	if c.print {
		fmt.Print(table)
	}
	if c.out == "" {
		return nil
	}
	data, err := json.MarshalIndent(map[string]any{
		"date":    time.Now().UTC().Format(time.DateOnly),
		"models":  "gopher: the bundled model; qwen3-0.6b: Qwen3-0.6B's shapes, random weights (tools/qwen3shape); both written as GGUF by engine.ExportGGUF",
		"machine": fmt.Sprintf("%d CPUs (%s/%s), shared", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH),
		"method": fmt.Sprintf("%d interleaved rounds, the side that goes first alternating; each run a fresh process pinned with taskset to cores 0..threads-1: "+
			"a warm-up, a prefill of %d prompt ids, a greedy decode of %d tokens after them, then %d streams of %d-id prompts decoding %d tokens each together "+
			"(aggregate tok/s), peak RSS as VmHWM (llama.cpp's includes node's own), and each phase's process CPU time (getrusage; *_cpu figures: tokens per CPU-second); medians over rounds. "+
			"A run still going after %v is stopped and counted in stalled (model/format_threads_side), its figures left out of the medians. "+
			"summary, per model: tfd / llama.cpp of the medians (above 1 is tfd faster; for rss below 1 is tfd smaller)",
			c.rounds, c.prompt, c.n, c.streams, streamPrompt, c.streamTokens, c.limit),
		"runs":    runs,
		"stalled": stalled,
		"medians": medians,
		"summary": summary,
	}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(c.out, append(data, '\n'), 0o644)
}
