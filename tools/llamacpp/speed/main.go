// Command speed times tfd against llama.cpp on the same GGUF files: the bundled model written as
// Q8_0 and Q4_0 (engine.ExportGGUF), at 1 and 2 threads, each run pinned with taskset to cores
// 0 (…N−1): a prefill of 256 prompt ids, a greedy decode of 128 tokens after them, and the
// process's peak RSS. llama.cpp runs through node-llama-cpp (../speed.mjs), tfd on its cpu backend
// in a process of its own (this command, re-run with -worker). Runs are interleaved, round by
// round, the side that goes first alternating, and the medians over rounds are reported, since
// the machine is shared and noisy.
//
//	go run ./tools/llamacpp/speed -node-llama-cpp /tmp/nlc/node_modules/node-llama-cpp/dist/index.js -rounds 5 -json docs/performance-cpu.json
//
// The JSON holds every run, the medians and a summary of tfd / llama.cpp ratios named by format,
// figure and threads (q8_0_decode_t1: above 1 is tfd faster; q8_0_rss_t1: below 1 is tfd
// smaller).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"time"

	"tfd/batch"
	"tfd/compute"
	_ "tfd/cpu"
	"tfd/engine"
)

// result is one run of one side, as both sides print it.
type result struct {
	Threads    int     `json:"threads"`
	Prompt     int     `json:"prompt"`
	Tokens     int     `json:"tokens"`
	PromptTPS  float64 `json:"prompt_tps"`
	DecodeTPS  float64 `json:"decode_tps"`
	PeakRSSKiB int64   `json:"peak_rss_kib"`
}

// run is one measured run in the JSON.
type run struct {
	Round  int    `json:"round"`
	Format string `json:"format"`
	Side   string `json:"side"`
	result
}

func main() {
	worker := flag.Bool("worker", false, "internal: run tfd once on -gguf and print its figures")
	ggufPath := flag.String("gguf", "", "with -worker: the GGUF file")
	idsPath := flag.String("ids", "", "with -worker: the prompt ids (a JSON array)")
	nlc := flag.String("node-llama-cpp", "", "node-llama-cpp's dist/index.js; empty: resolve \"node-llama-cpp\" from tools/llamacpp")
	rounds := flag.Int("rounds", 5, "interleaved rounds")
	threadList := flag.String("threads", "1,2", "thread counts, comma-separated")
	prompt := flag.Int("prompt", 256, "prompt ids to prefill")
	n := flag.Int("n", 128, "tokens to decode")
	out := flag.String("json", "", "write every run, the medians and the summary to this file")
	flag.Parse()
	var err error
	if *worker {
		err = runTFD(*ggufPath, *idsPath, *n)
	} else {
		err = compare(*nlc, *rounds, *threadList, *prompt, *n, *out)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "speed:", err)
		os.Exit(1)
	}
}

// runTFD loads the file on the cpu backend (one worker per GOMAXPROCS), warms up as speed.mjs
// does, and prints its figures.
func runTFD(path, idsPath string, n int) error {
	var ids []int32
	data, err := os.ReadFile(idsPath)
	if err == nil {
		err = json.Unmarshal(data, &ids)
	}
	if err != nil {
		return err
	}
	b, err := compute.Open("cpu")
	if err != nil {
		return err
	}
	defer b.Close()
	m, err := engine.Load(context.Background(), engine.Source{Dir: path}, b, engine.Options{Context: 1024, MaxRows: len(ids)})
	if err != nil {
		return err
	}
	defer m.Close()
	ctx := context.Background()
	prefill := func(ids []int32) error {
		rows := make([]batch.Row, len(ids))
		for i, id := range ids {
			rows[i] = batch.Row{Pos: i, Token: id, Logits: i == len(ids)-1}
		}
		_, err := m.Forward(ctx, rows)
		return err
	}
	decode := func(pos int, token int32, n int) error {
		for range n {
			logits, err := m.Forward(ctx, []batch.Row{{Pos: pos, Token: token, Logits: true}})
			if err != nil {
				return err
			}
			token, pos = argmax(logits), pos+1
		}
		return nil
	}
	if err := prefill(ids[:32]); err != nil {
		return err
	}
	if err := decode(32, ids[32], 4); err != nil {
		return err
	}
	start := time.Now()
	if err := prefill(ids); err != nil {
		return err
	}
	prefillSeconds := time.Since(start).Seconds()
	start = time.Now()
	if err := decode(len(ids), ids[0], n); err != nil {
		return err
	}
	decodeSeconds := time.Since(start).Seconds()
	rss, err := peakRSS()
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(result{Threads: runtime.GOMAXPROCS(0), Prompt: len(ids), Tokens: n,
		PromptTPS: float64(len(ids)) / prefillSeconds, DecodeTPS: float64(n) / decodeSeconds, PeakRSSKiB: rss})
}

func argmax(logits []float32) int32 {
	best := 0
	for i, l := range logits {
		if l > logits[best] {
			best = i
		}
	}
	return int32(best)
}

var hwm = regexp.MustCompile(`VmHWM:\s+(\d+) kB`)

// peakRSS returns the process's peak resident set (VmHWM), in KiB.
func peakRSS() (int64, error) {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	m := hwm.FindSubmatch(status)
	if m == nil {
		return 0, fmt.Errorf("/proc/self/status has no VmHWM")
	}
	return strconv.ParseInt(string(m[1]), 10, 64)
}
