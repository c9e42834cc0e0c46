package main

import (
	"bytes"
	"encoding/json"
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
)

// formats are the GGUF types compared, by ggml's names.
var formats = []struct {
	name  string
	dtype compute.DType
}{{"q8_0", compute.Q8_0}, {"q4_0", compute.Q4_0}}

// source is what the prompt ids are made of: Go, the bundled model's kind of text.
const source = "package main\n\nimport (\n\t\"fmt\"\n\t\"os\"\n)\n\n// main prints its arguments, one a line.\nfunc main() {\n\tfor i, arg := range os.Args[1:] {\n\t\tfmt.Printf(\"%d: %s\\n\", i, arg)\n\t}\n}\n"

// compare writes the GGUF files and the prompt ids, runs both sides round by round, and prints
// (and writes) the medians.
func compare(nlc string, rounds int, threadList string, prompt, n int, out string) error {
	var threads []int
	for _, f := range strings.Split(threadList, ",") {
		t, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || t < 1 || t > runtime.NumCPU() {
			return fmt.Errorf("-threads %q: want counts from 1 to %d", threadList, runtime.NumCPU())
		}
		threads = append(threads, t)
	}
	tmp, err := os.MkdirTemp("", "tfd-speed-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	paths := map[string]string{}
	for _, f := range formats {
		var buf bytes.Buffer
		if err := engine.ExportGGUF(engine.Source{FS: models.FS(), Name: models.Name}, f.dtype, &buf); err != nil {
			return err
		}
		paths[f.name] = filepath.Join(tmp, models.Name+"-"+f.name+".gguf")
		if err := os.WriteFile(paths[f.name], buf.Bytes(), 0o644); err != nil {
			return err
		}
	}
	idsPath := filepath.Join(tmp, "ids.json")
	if err := writeIDs(idsPath, prompt); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "..", "speed.mjs")
	var runs []run
	for r := range rounds {
		for _, f := range formats {
			for _, t := range threads {
				sides := []string{"tfd", "llama.cpp"}
				if r%2 == 1 {
					slices.Reverse(sides)
				}
				for _, s := range sides {
					cmd := pinned(t, self, "-worker", "-gguf", paths[f.name], "-ids", idsPath, "-n", fmt.Sprint(n))
					cmd.Env = append(os.Environ(), fmt.Sprintf("GOMAXPROCS=%d", t))
					if s == "llama.cpp" {
						cmd = pinned(t, "node", script, paths[f.name], idsPath, fmt.Sprint(t), fmt.Sprint(n))
						cmd.Env = os.Environ()
						if nlc != "" {
							cmd.Env = append(cmd.Env, "NODE_LLAMA_CPP="+nlc)
						}
					}
					res, err := measure(cmd)
					if err != nil {
						return err
					}
					if res.Threads != t {
						return fmt.Errorf("%s ran %d threads, want %d", s, res.Threads, t)
					}
					runs = append(runs, run{r, f.name, s, res})
					fmt.Fprintf(os.Stderr, "round %d %s %d thread(s) %-9s prompt %7.1f tok/s  decode %6.1f tok/s  peak RSS %4d MiB\n",
						r, f.name, t, s, res.PromptTPS, res.DecodeTPS, res.PeakRSSKiB>>10)
				}
			}
		}
	}
	return report(runs, threads, rounds, prompt, n, out)
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

// measure runs cmd and reads the figures it prints.
func measure(cmd *exec.Cmd) (result, error) {
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
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

// report prints the medians as a Markdown table and writes the JSON.
func report(runs []run, threads []int, rounds, prompt, n int, out string) error {
	medians := map[string]float64{}
	summary := map[string]float64{}
	fmt.Printf("| format | threads | figure | tfd | llama.cpp | tfd / llama.cpp |\n| --- | ---: | --- | ---: | ---: | ---: |\n")
	for _, f := range formats {
		for _, t := range threads {
			for _, fig := range []struct {
				name, label string
				get         func(result) float64
			}{
				{"decode", fmt.Sprintf("decode %d tokens, tok/s", n), func(r result) float64 { return r.DecodeTPS }},
				{"prompt", fmt.Sprintf("prompt %d tokens, tok/s", prompt), func(r result) float64 { return r.PromptTPS }},
				{"rss", "peak RSS, MiB", func(r result) float64 { return float64(r.PeakRSSKiB) / 1024 }},
			} {
				var m [2]float64
				for i, side := range []string{"tfd", "llama.cpp"} {
					var xs []float64
					for _, r := range runs {
						if r.Format == f.name && r.Threads == t && r.Side == side {
							xs = append(xs, fig.get(r.result))
						}
					}
					m[i] = median(xs)
					medians[fmt.Sprintf("%s_%s_t%d_%s", f.name, fig.name, t, map[string]string{"tfd": "tfd", "llama.cpp": "llamacpp"}[side])] = m[i]
				}
				key := fmt.Sprintf("%s_%s_t%d", f.name, fig.name, t)
				summary[key] = m[0] / m[1]
				fmt.Printf("| %s | %d | %s | %.1f | %.1f | %.2f |\n", f.name, t, fig.label, m[0], m[1], summary[key])
			}
		}
	}
	if out == "" {
		return nil
	}
	data, err := json.MarshalIndent(map[string]any{
		"date":    time.Now().UTC().Format(time.DateOnly),
		"model":   models.Name + ", written as GGUF by engine.ExportGGUF",
		"machine": fmt.Sprintf("%d CPUs (%s/%s), shared", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH),
		"method": fmt.Sprintf("%d interleaved rounds, the side that goes first alternating; each run a fresh process pinned with taskset to cores 0..threads-1: "+
			"a warm-up, a prefill of %d prompt ids, a greedy decode of %d tokens after them, peak RSS as VmHWM (llama.cpp's includes node's own); medians over rounds. "+
			"summary: tfd / llama.cpp of the medians (above 1 is tfd faster; for rss below 1 is tfd smaller)", rounds, prompt, n),
		"runs":    runs,
		"medians": medians,
		"summary": summary,
	}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(out, append(data, '\n'), 0o644)
}
