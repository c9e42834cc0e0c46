// Command llamacpp compares tfd with llama.cpp on one GGUF file: greedy raw completions of the
// same prompts, token for token. llama.cpp runs through the npm package node-llama-cpp (its
// prebuilt CPU build, one thread, pinned to one core where taskset exists) by greedy.mjs; tfd
// runs the same file on its cpu backend, continuing llama.cpp's own tokenization of each prompt
// (and reporting whether tfd's tokenizer agrees with it). At the first token where the two
// differ it prints both sides' margins: each one's top logit over its runner-up, and tfd's logit
// gap between the two tokens chosen.
//
//	npm install --prefix /tmp/nlc node-llama-cpp@3.21.1   # with NODE_LLAMA_CPP_SKIP_DOWNLOAD=true NODE_LLAMA_CPP_GPU=false
//	go run ./tools/llamacpp -node-llama-cpp /tmp/nlc/node_modules/node-llama-cpp/dist/index.js
//
// Without -gguf it writes the bundled model as GGUF in -dtype (engine.ExportGGUF) first. It exits
// 1 when a prompt's tokens differ.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"tfd/batch"
	"tfd/compute"
	_ "tfd/cpu"
	"tfd/engine"
	"tfd/models"
)

// prompts are raw completions of the bundled model's kind (it was trained on Go's standard
// library).
var prompts = []string{
	"package main\n\nimport \"fmt\"\n\nfunc main() {\n\t",
	"// Copyright 2009 The Go Authors. All rights reserved.\n// Use of this source code is governed by a BSD-style\n",
	"func (b *Buffer) WriteString(s string) (n int, err error) {\n",
	"type Reader interface {\n\tRead(p []byte) (n int, err error)\n}\n\n",
	"for i := 0; i < len(s); i++ {\n\tif s[i] == '\\n' {",
}

// side is one runner's greedy continuation of one prompt.
type side struct {
	Text      string    `json:"text"`
	PromptIDs []int32   `json:"prompt_ids"`
	Tokens    []int32   `json:"tokens"`
	RunnersUp []int32   `json:"runners_up"`
	Margins   []float64 `json:"margins"`

	logits [][]float32 // tfd's, each step's
}

func main() {
	ggufPath := flag.String("gguf", "", "the GGUF file; empty: the bundled model written in -dtype")
	dtype := flag.String("dtype", "f16", "dtype of the bundled model's GGUF: f32, f16, bf16, q8_0, q4_0, q4_k or q6_k")
	nlc := flag.String("node-llama-cpp", "", "node-llama-cpp's dist/index.js; empty: resolve \"node-llama-cpp\" from tools/llamacpp")
	n := flag.Int("n", 32, "tokens to generate per prompt")
	out := flag.String("json", "", "also write both sides' results to this file")
	var o llamaOptions
	flag.StringVar(&o.kv, "kv", "F16", "llama.cpp's KV cache type: F16 (its default) or F32 (tfd's)")
	flag.StringVar(&o.fa, "fa", "auto", "llama.cpp's flash attention: auto (its default: on for the CPU), on or off")
	flag.Parse()
	o.kv = strings.ToUpper(o.kv)
	same, err := run(*ggufPath, *dtype, *nlc, o, *n, *out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "llamacpp:", err)
		os.Exit(2)
	}
	if !same {
		os.Exit(1)
	}
}

// llamaOptions are the llama.cpp settings that change its arithmetic.
type llamaOptions struct{ kv, fa string }

func run(ggufPath, dtype, nlc string, o llamaOptions, n int, out string) (bool, error) {
	tmp, err := os.MkdirTemp("", "tfd-llamacpp-")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(tmp)
	if ggufPath == "" {
		if ggufPath, err = exportBundled(tmp, dtype); err != nil {
			return false, err
		}
	}
	ref, err := runLlamaCpp(tmp, ggufPath, nlc, o, n)
	if err != nil {
		return false, err
	}
	b, err := compute.Open("cpu")
	if err != nil {
		return false, err
	}
	defer b.Close()
	m, err := engine.Load(context.Background(), engine.Source{Dir: ggufPath}, b, engine.Options{Context: 1024})
	if err != nil {
		return false, err
	}
	defer m.Close()
	fmt.Printf("%s: tfd (cpu backend) against llama.cpp (node-llama-cpp, 1 thread, %s KV cache, flash attention %s), %d greedy tokens per prompt\n",
		ggufPath, o.kv, o.fa, n)
	allSame := true
	var mine []side
	for i, r := range ref {
		s, err := greedy(m, r.Text, r.PromptIDs, n)
		if err != nil {
			return false, err
		}
		mine = append(mine, s)
		tokenized := slices.Equal(m.Tokenizer().Encode(r.Text), r.PromptIDs)
		allSame = report(i, m, r, s, tokenized) && allSame
	}
	if out != "" {
		data, err := json.MarshalIndent(map[string]any{"gguf": ggufPath, "kv": o.kv, "flash_attention": o.fa, "llama_cpp": ref, "tfd": mine}, "", " ")
		if err != nil {
			return false, err
		}
		if err := os.WriteFile(out, data, 0o644); err != nil {
			return false, err
		}
	}
	return allSame, nil
}

func exportBundled(dir, dtype string) (string, error) {
	dt, ok := map[string]compute.DType{"f32": compute.F32, "f16": compute.F16, "bf16": compute.BF16,
		"q8_0": compute.Q8_0, "q4_0": compute.Q4_0, "q4_k": compute.Q4_K, "q6_k": compute.Q6_K}[dtype]
	if !ok {
		return "", fmt.Errorf("-dtype %q: want f32, f16, bf16, q8_0, q4_0, q4_k or q6_k", dtype)
	}
	var buf bytes.Buffer
	if err := engine.ExportGGUF(engine.Source{FS: models.FS(), Name: models.Name}, dt, &buf); err != nil {
		return "", err
	}
	path := filepath.Join(dir, models.Name+"-"+dtype+".gguf")
	return path, os.WriteFile(path, buf.Bytes(), 0o644)
}

// runLlamaCpp runs greedy.mjs, pinned to one core where taskset exists.
func runLlamaCpp(tmp, ggufPath, nlc string, o llamaOptions, n int) ([]side, error) {
	_, self, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(self), "greedy.mjs")
	promptsPath := filepath.Join(tmp, "prompts.json")
	data, err := json.Marshal(prompts)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(promptsPath, data, 0o644); err != nil {
		return nil, err
	}
	args := []string{"node", script, ggufPath, promptsPath, fmt.Sprint(n), o.kv, o.fa}
	if taskset, err := exec.LookPath("taskset"); err == nil {
		args = append([]string{taskset, "-c", "0"}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = os.Environ()
	if nlc != "" {
		cmd.Env = append(cmd.Env, "NODE_LLAMA_CPP="+nlc)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	var res struct {
		Threads int    `json:"threads"`
		Results []side `json:"results"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		return nil, fmt.Errorf("reading greedy.mjs's output: %w\n%s", err, stdout.String())
	}
	if res.Threads != 1 {
		return nil, fmt.Errorf("llama.cpp ran %d threads, want 1", res.Threads)
	}
	return res.Results, nil
}

// greedy continues prompt greedily for n tokens, one row a forward, through end tokens, and keeps
// each step's logits and the margin of its top logit over the runner-up.
func greedy(m *engine.Model, text string, prompt []int32, n int) (side, error) {
	s := side{Text: text, PromptIDs: prompt}
	rows := make([]batch.Row, len(prompt))
	for i, tok := range prompt {
		rows[i] = batch.Row{Pos: i, Token: tok, Logits: i == len(prompt)-1}
	}
	ctx := context.Background()
	logits, err := m.Forward(ctx, rows)
	for pos := len(prompt); err == nil && len(s.Tokens) < n; pos++ {
		top, second := topTwo(logits)
		s.Tokens = append(s.Tokens, top)
		s.RunnersUp = append(s.RunnersUp, second)
		s.Margins = append(s.Margins, float64(logits[top]-logits[second]))
		s.logits = append(s.logits, slices.Clone(logits))
		if len(s.Tokens) < n {
			logits, err = m.Forward(ctx, []batch.Row{{Pos: pos, Token: top, Logits: true}})
		}
	}
	return s, err
}

// topTwo returns the largest logit's index and the runner-up's, ties to the lower index as
// llama.cpp's greedy sampler breaks them.
func topTwo(logits []float32) (top, second int32) {
	top, second = 0, 1
	if logits[1] > logits[0] {
		top, second = 1, 0
	}
	for i := 2; i < len(logits); i++ {
		switch l := logits[i]; {
		case l > logits[top]:
			top, second = int32(i), top
		case l > logits[second]:
			second = int32(i)
		}
	}
	return top, second
}

// report prints one prompt's comparison and whether the tokens agree.
func report(i int, m *engine.Model, ref, got side, tokenized bool) bool {
	tok := "tfd's tokenizer gives the same prompt ids"
	if !tokenized {
		tok = fmt.Sprintf("tfd's tokenizer gives %v, llama.cpp's %v", m.Tokenizer().Encode(ref.Text), ref.PromptIDs)
	}
	minMargin := slices.Min(got.Margins)
	at := -1 // the first step where the tokens differ
	for j := range min(len(ref.Tokens), len(got.Tokens)) {
		if ref.Tokens[j] != got.Tokens[j] {
			at = j
			break
		}
	}
	agreed := at
	if at < 0 {
		agreed = min(len(ref.Tokens), len(got.Tokens))
	}
	var worst float64 // the largest difference of the two sides' margins while they agree
	for j := range agreed {
		worst = max(worst, math.Abs(ref.Margins[j]-got.Margins[j]))
	}
	if at < 0 && len(ref.Tokens) == len(got.Tokens) {
		fmt.Printf("prompt %d (%d prompt tokens; %s): all %d tokens agree; smallest margin tfd %.4g, llama.cpp %.4g; "+
			"margins differ by %.3g at most\n  %q\n", i, len(ref.PromptIDs), tok, len(got.Tokens), minMargin,
			slices.Min(ref.Margins), worst, m.Tokenizer().Decode(got.Tokens))
		return true
	}
	if at < 0 {
		at = min(len(ref.Tokens), len(got.Tokens))
		fmt.Printf("prompt %d (%s): llama.cpp gave %d tokens, tfd %d; the first %d agree\n", i, tok, len(ref.Tokens), len(got.Tokens), at)
		return false
	}
	l := got.logits[at]
	fmt.Printf("prompt %d (%d prompt tokens; %s): the first %d tokens agree, then tfd %d (margin %.4g over %d), "+
		"llama.cpp %d (margin %.4g over %d); tfd's logits for the two: %.6g and %.6g (gap %.4g); "+
		"margins differed by %.3g at most before\n  agreed: %q\n",
		i, len(ref.PromptIDs), tok, at, got.Tokens[at], got.Margins[at], got.RunnersUp[at],
		ref.Tokens[at], ref.Margins[at], ref.RunnersUp[at], l[got.Tokens[at]], l[ref.Tokens[at]],
		l[got.Tokens[at]]-l[ref.Tokens[at]], worst, m.Tokenizer().Decode(got.Tokens[:at]))
	return false
}
