// Command speed times tfd against llama.cpp on the same GGUF files: the bundled model and a
// Qwen3-0.6B-shaped checkpoint of random weights (tools/qwen3shape), each written as Q8_0 and Q4_0
// (engine.ExportGGUF), at 1 and 2 threads, each run pinned with taskset to cores 0 (…N−1): a
// prefill of 256 prompt ids, a greedy decode of 128 tokens after them, then 8 streams of 32-id
// prompts decoding 32 tokens each together (one row a stream a forward; the aggregate tok/s), the
// process's peak RSS, and the CPU time of each phase (tokens per CPU-second: on a shared machine a
// run's wall time is mostly its wait for a CPU). llama.cpp runs through node-llama-cpp (../speed.mjs), tfd on its cpu
// backend in a process of its own (this command, re-run with -worker). Runs are interleaved,
// round by round, the side that goes first alternating, and the medians over rounds are reported,
// since the machine is shared and noisy; a run still going after -limit is stopped and counted
// as stalled.
//
//	go run ./tools/llamacpp/speed -node-llama-cpp /tmp/nlc/node_modules/node-llama-cpp/dist/index.js -rounds 3 -json docs/performance-cpu.json
//
// The 0.6B-shaped checkpoint (1.2 GB) and its GGUF files are kept in -qwen3-0.6b's folder and
// reused. The JSON holds every run, the medians and, per model, a summary of tfd / llama.cpp
// ratios named by format, figure and threads (q8_0_decode_t1: above 1 is tfd faster;
// q8_0_rss_t1: below 1 is tfd smaller).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/pprof"
	"strconv"
	"syscall"
	"time"

	"tfd/batch"
	"tfd/compute"
	_ "tfd/cpu"
	"tfd/engine"
)

// result is one run of one side, as both sides print it.
type result struct {
	Threads   int     `json:"threads"`
	Prompt    int     `json:"prompt"`
	Tokens    int     `json:"tokens"`
	PromptTPS float64 `json:"prompt_tps"`
	DecodeTPS float64 `json:"decode_tps"`
	// Streams decoding together, StreamTokens each, AggregateTPS all of them a second.
	Streams      int     `json:"streams"`
	StreamTokens int     `json:"stream_tokens"`
	AggregateTPS float64 `json:"aggregate_tps"`
	PeakRSSKiB   int64   `json:"peak_rss_kib"`
	// The process's CPU time (user and system, all threads, getrusage) in each timed phase: on a
	// shared machine a run waits for its CPUs, and the tokens per CPU-second say what the work
	// cost apart from that wait (a thread that spins while it waits counts, though).
	PromptCPU    float64 `json:"prompt_cpu_s"`
	DecodeCPU    float64 `json:"decode_cpu_s"`
	AggregateCPU float64 `json:"aggregate_cpu_s"`
}

// run is one measured run in the JSON.
type run struct {
	Round   int    `json:"round"`
	Model   string `json:"model"`
	Format  string `json:"format"`
	Side    string `json:"side"`
	Stalled bool   `json:"stalled,omitempty"` // stopped at -limit; no figures
	result
}

// A stream's prompt: streamPrompt ids of the prompt from id streamStride·s on, decoding at most
// streamSlots−streamPrompt tokens in a session of streamSlots KV slots (the pool of the single
// run holds the eight sessions).
const (
	streamPrompt = 32
	streamStride = 16
	streamSlots  = 128
)

func main() {
	worker := flag.Bool("worker", false, "internal: run tfd once on -gguf and print its figures")
	ggufPath := flag.String("gguf", "", "with -worker: the GGUF file")
	idsPath := flag.String("ids", "", "with -worker: the prompt ids (a JSON array)")
	nlc := flag.String("node-llama-cpp", "", "node-llama-cpp's dist/index.js; empty: resolve \"node-llama-cpp\" from tools/llamacpp")
	rounds := flag.Int("rounds", 5, "interleaved rounds")
	threadList := flag.String("threads", "1,2", "thread counts, comma-separated")
	modelList := flag.String("models", "gopher,qwen3-0.6b", "models, comma-separated: gopher (the bundled one), qwen3-0.6b")
	qwenDir := flag.String("qwen3-0.6b", filepath.Join(os.TempDir(), "tfd-qwen3-0.6b"), "the folder of the random Qwen3-0.6B-shaped checkpoint and its GGUF files, written unless there")
	prompt := flag.Int("prompt", 256, "prompt ids to prefill")
	n := flag.Int("n", 128, "tokens to decode")
	streams := flag.Int("streams", 8, "streams decoding together")
	streamTokens := flag.Int("stream-tokens", 32, "tokens each stream decodes")
	out := flag.String("json", "", "write every run, the medians and the summary to this file (rewritten after each run)")
	limit := flag.Duration("limit", 5*time.Minute, "stop a run that takes longer and count it as stalled")
	cpuProfile := flag.String("cpuprofile", "", "with -worker: write a CPU profile of the run to this file")
	flag.Parse()
	if *worker && *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "speed:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	var err error
	switch {
	case *streamTokens > streamSlots-streamPrompt:
		err = fmt.Errorf("-stream-tokens %d: at most %d", *streamTokens, streamSlots-streamPrompt)
	case *worker:
		err = runTFD(*ggufPath, *idsPath, *n, *streams, *streamTokens)
	default:
		err = compare(config{nlc: *nlc, rounds: *rounds, threads: *threadList, models: *modelList, qwenDir: *qwenDir,
			prompt: *prompt, n: *n, streams: *streams, streamTokens: *streamTokens, out: *out, limit: *limit})
	}
	if err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "speed:", err)
		os.Exit(1)
	}
}

// runTFD loads the file on the cpu backend (one worker per GOMAXPROCS), warms up as speed.mjs
// does, times the prefill and the decode of one sequence, then the streams' decode, and prints its
// figures.
func runTFD(path, idsPath string, n, streams, streamTokens int) error {
	var ids []int32
	data, err := os.ReadFile(idsPath)
	if err == nil {
		err = json.Unmarshal(data, &ids)
	}
	if err != nil {
		return err
	}
	if need := (streams-1)*streamStride + streamPrompt + 1; len(ids) < need || streams*streamSlots > 1024 {
		return fmt.Errorf("%d streams need %d prompt ids and %d KV slots; have %d and 1024", streams, need, streams*streamSlots, len(ids))
	}
	b, err := compute.Open("cpu")
	if err != nil {
		return err
	}
	defer b.Close()
	m, err := engine.Load(context.Background(), engine.Source{Dir: path}, b, engine.Options{Context: 1024, MaxRows: max(len(ids), streams*streamPrompt)})
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
			token, pos = batch.Argmax(logits), pos+1
		}
		return nil
	}
	if err := prefill(ids[:32]); err != nil {
		return err
	}
	if err := decode(32, ids[32], 4); err != nil {
		return err
	}
	start, cpu0 := time.Now(), cpuSeconds()
	if err := prefill(ids); err != nil {
		return err
	}
	prefillSeconds, cpu1 := time.Since(start).Seconds(), cpuSeconds()
	start = time.Now()
	if err := decode(len(ids), ids[0], n); err != nil {
		return err
	}
	decodeSeconds, cpu2 := time.Since(start).Seconds(), cpuSeconds()
	aggregateSeconds, aggregateCPU, err := decodeStreams(ctx, m, ids, streams, streamTokens)
	if err != nil {
		return err
	}
	rss, err := peakRSS()
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(result{Threads: runtime.GOMAXPROCS(0), Prompt: len(ids), Tokens: n,
		PromptTPS: float64(len(ids)) / prefillSeconds, DecodeTPS: float64(n) / decodeSeconds,
		Streams: streams, StreamTokens: streamTokens, AggregateTPS: float64(streams*streamTokens) / aggregateSeconds,
		PeakRSSKiB: rss, PromptCPU: cpu1 - cpu0, DecodeCPU: cpu2 - cpu1, AggregateCPU: aggregateCPU})
}

// decodeStreams prefills the streams' prompts in one forward (untimed), each stream a session of
// streamSlots slots, then decodes tokens greedily in all of them together, one row a stream a
// forward, and returns the seconds the decode took, on the clock and of CPU time.
func decodeStreams(ctx context.Context, m *engine.Model, ids []int32, streams, tokens int) (wall, cpu float64, err error) {
	var rows []batch.Row
	for s := range streams {
		for i, id := range ids[s*streamStride : s*streamStride+streamPrompt] {
			rows = append(rows, batch.Row{Base: s * streamSlots, Pos: i, Token: id, Logits: i == streamPrompt-1})
		}
	}
	if _, err := m.Forward(ctx, rows); err != nil {
		return 0, 0, err
	}
	rows = rows[:streams]
	for s := range rows {
		// The first token each stream decodes from is the prompt's next id, as speed.mjs takes it.
		rows[s] = batch.Row{Base: s * streamSlots, Pos: streamPrompt, Token: ids[s*streamStride+streamPrompt], Logits: true}
	}
	start, cpu0 := time.Now(), cpuSeconds()
	for range tokens {
		logits, err := m.Forward(ctx, rows)
		if err != nil {
			return 0, 0, err
		}
		vocab := len(logits) / streams
		for s := range rows {
			rows[s].Token = batch.Argmax(logits[s*vocab : (s+1)*vocab])
			rows[s].Pos++
		}
	}
	return time.Since(start).Seconds(), cpuSeconds() - cpu0, nil
}

// cpuSeconds returns the CPU time the process has used, user and system, as node's
// process.cpuUsage reports it for speed.mjs (both read getrusage).
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err) // RUSAGE_SELF with a valid pointer cannot fail
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
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
