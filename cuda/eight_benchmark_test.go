package cuda

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"tfd/batch"
	"tfd/compute"
	"tfd/engine"
	"tfd/engine/safetensors"
)

// BenchmarkEight measures an 8B-class checkpoint: the folder named by TFD_BENCH_MODEL, such as
// the random-init Qwen3 that tools/bench/make_8b.py writes. It skips without it.
//
//	TFD_BENCH_MODEL=/tmp/q8b ./bin/cuda.test -test.run '^$' -test.bench Eight -test.benchtime 1s
//
// decode is one stream decoding greedily after a 128-token prompt; it also reports the weight
// bytes one token reads (every matrix but the embedding table, of which a token reads one row)
// and those bytes times tokens per second, to set against the matvec bandwidth of
// BenchmarkMatVec. streams=N is one decode row for each of N sessions per forward (benchStreams),
// every row's logits read back; ,picks and ,hostpick take greedy picks (below), and
// ,picks,attention_split and ,picks,whole_tiles the same without attention_warp or without the
// quarters of matmul_wg1_bf16_N;
// prefill=4096 is a 4096-token prompt in chunks of the engine's MaxRows, and
// prefill=4096,attention_split the same with attention_split for every attention launch. With
// TFD_BENCH_KV=f16 every session keeps its keys and values in F16 (sessions.kv_cache = "f16"), so
// two runs set the pools side by side. TFD_BENCH_MAX_ROWS sets the engine's MaxRows (by default
// the daemon's, engine.ForwardRows: 1,024 for a dense model on CUDA, 256 of them asking for
// logits at most); prefill=4096,rows=N then
// also runs the prompt in forwards of N rows for every N = 256, 512, … below it.
func BenchmarkEight(b *testing.B) {
	dir := os.Getenv("TFD_BENCH_MODEL")
	if dir == "" {
		b.Skip("TFD_BENCH_MODEL names no model folder; tools/bench/make_8b.py writes one")
	}
	const (
		span    = 512  // slots per decode session; positions 128..511
		streams = 64   // the most decode sessions
		prompt  = 4096 // the prefill benchmark's prompt
	)
	c, _, err := engine.Inspect(engine.Source{Dir: dir}, engine.NoQuantization)
	if err != nil {
		b.Fatal(err)
	}
	if c.MoE.Experts > 0 {
		b.Skipf("%s is a mixture of experts: BenchmarkMoE measures it", dir)
	}
	perToken, err := weightBytesPerToken(dir, c.MoE)
	if err != nil {
		b.Fatal(err)
	}
	g := openCUDA(b)
	opts := engine.Options{Slots: streams*span + prompt, KVCache: benchKVCache(b), MaxRows: cmp.Or(benchMaxRows(b), engine.ForwardRows(g, c)),
		LogitRows: engine.DefaultMaxRows}
	m, err := engine.Load(context.Background(), engine.Source{Dir: dir}, g, opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(m.Close)
	b.Logf("%s: %d layers, hidden %d, %d heads (%d kv), intermediate %d, vocab %d; %.2f GB of weights read per token; MaxRows %d",
		dir, c.Layers, c.Hidden, c.Heads, c.KVHeads, c.Intermediate, c.Vocab, float64(perToken)/1e9, m.MaxRows())

	b.Run("decode", func(b *testing.B) {
		benchDecode(b, m, 0, 128)
		tps := float64(b.N) / b.Elapsed().Seconds()
		b.ReportMetric(float64(perToken)/1e9, "GB/tok")
		b.ReportMetric(tps*float64(perToken)/1e9, "GB/s")
	})
	// "decode,qk_ops": the norms, RoPE and KV write of q and k as five ops, not one launch
	// (QKRoPEWrite).
	b.Run("decode,qk_ops", func(b *testing.B) {
		setQKRoPE(g, false)
		defer setQKRoPE(g, true)
		benchDecode(b, m, 0, 128)
	})
	for _, n := range []int{1, 2, 4, 8, 16, 32, 64} {
		b.Run(fmt.Sprintf("streams=%d", n), func(b *testing.B) { benchStreams(b, m, n, span, logitsRead) })
	}
	// ",staged": the logits read through the pinned stage and copied out of it on the CPU, not
	// copied by the GPU into the engine's page-locked buffer (HostFloat32).
	for _, n := range []int{1, 32, 64} {
		b.Run(fmt.Sprintf("streams=%d,staged", n), func(b *testing.B) {
			setStagedReads(g, true)
			defer setStagedReads(g, false)
			benchStreams(b, m, n, span, logitsRead)
		})
	}
	// ",picks": each row's greedy pick taken on the device and read back alone (ForwardPicks), as a
	// greedy stream's round runs; ",hostpick": each row's logits read back, then its pick taken on
	// the host, as it ran before picks.
	for _, n := range []int{1, 32, 64} {
		b.Run(fmt.Sprintf("streams=%d,picks", n), func(b *testing.B) { benchStreams(b, m, n, span, devicePicks) })
		b.Run(fmt.Sprintf("streams=%d,hostpick", n), func(b *testing.B) { benchStreams(b, m, n, span, hostPicks) })
	}
	// ",picks,attention_split": attention_split for 32 and 64 rows, against the default's
	// attention_warp; ",picks,whole_tiles": no quarters (kernels.UsesWGQuarters), the matmuls on
	// the tiles they took before.
	for _, n := range []int{32, 64} {
		b.Run(fmt.Sprintf("streams=%d,picks,attention_split", n), func(b *testing.B) {
			setAttentionWarp(g, "0")
			defer setAttentionWarp(g, "")
			benchStreams(b, m, n, span, devicePicks)
		})
		b.Run(fmt.Sprintf("streams=%d,picks,whole_tiles", n), func(b *testing.B) {
			setWGQuarters(g, "0")
			defer setWGQuarters(g, "")
			benchStreams(b, m, n, span, devicePicks)
		})
	}
	// ",attention_tile": attention_tile_H for 64 rows of 64 sessions, a pass over the keys a row,
	// against the default's attention_warp (kernels.AttentionTileShares).
	b.Run(fmt.Sprintf("streams=%d,attention_tile", streams), func(b *testing.B) {
		setAttentionTile(g, "1")
		defer setAttentionTile(g, "")
		benchStreams(b, m, streams, span, logitsRead)
	})
	for _, attention := range []string{"", ",attention_split"} {
		// ",attention_split": attention_split for every launch, against attention_tile_H.
		b.Run(fmt.Sprintf("prefill=%d%s", prompt, attention), func(b *testing.B) {
			if attention != "" {
				setAttentionTile(g, "0")
				setAttentionWarp(g, "0")
				defer setAttentionTile(g, "")
				defer setAttentionWarp(g, "")
			}
			benchPrefill(b, m, streams*span, prompt, m.MaxRows())
		})
	}
	for n := 256; n < m.MaxRows(); n *= 2 {
		b.Run(fmt.Sprintf("prefill=%d,rows=%d", prompt, n), func(b *testing.B) {
			benchPrefill(b, m, streams*span, prompt, n)
		})
	}
}

// benchMaxRows is TFD_BENCH_MAX_ROWS, or 0 where unset (then the rows the daemon would choose,
// engine.ForwardRows).
func benchMaxRows(b *testing.B) int {
	s := os.Getenv("TFD_BENCH_MAX_ROWS")
	if s == "" {
		return 0
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		b.Fatalf("TFD_BENCH_MAX_ROWS=%q: want a count of rows", s)
	}
	return n
}

// benchPrefill measures a prompt of the given length at slot base in forwards of chunk rows.
func benchPrefill(b *testing.B, m *engine.Model, base, prompt, chunk int) {
	rows := make([]batch.Row, prompt)
	for i := range rows {
		rows[i] = batch.Row{Base: base, Pos: i, Token: int32((i*7 + 3) % m.Vocab()), Logits: i == prompt-1}
	}
	b.ResetTimer()
	for range b.N {
		for start := 0; start < prompt; start += chunk {
			if _, err := m.Forward(context.Background(), rows[start:min(start+chunk, prompt)]); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(prompt*b.N)/b.Elapsed().Seconds(), "tok/s")
}

// weightBytesPerToken sums the bytes of the checkpoint's tensors that one decode token reads:
// all of them but the input embedding table, of which it reads one row, unless the embeddings
// are tied (no lm_head.weight), when the table is the head and read in full; and of a mixture's
// experts (moe; the zero value for a dense model) only the moe.PerToken of moe.Experts it is
// routed to.
func weightBytesPerToken(dir string, moe engine.MoEConfig) (int64, error) {
	ckpt, err := safetensors.Open(dir)
	if err != nil {
		return 0, err
	}
	defer ckpt.Close()
	var n, embed, experts int64
	for _, name := range ckpt.Names() {
		t, _ := ckpt.Tensor(name)
		switch {
		case strings.HasSuffix(name, "embed_tokens.weight"):
			embed += int64(len(t.Data))
		case moe.Experts > 0 && strings.Contains(name, ".mlp.experts."):
			experts += int64(len(t.Data))
		default:
			n += int64(len(t.Data))
		}
	}
	if experts > 0 {
		n += experts * int64(moe.PerToken) / int64(moe.Experts)
	}
	if _, ok := ckpt.Tensor("lm_head.weight"); !ok {
		n += embed
	}
	return n, nil
}

// benchKVCache is how a benchmark's sessions keep their keys and values: F16 where TFD_BENCH_KV
// is f16 (sessions.kv_cache = "f16"), else F32.
func benchKVCache(b *testing.B) compute.DType {
	switch kv := os.Getenv("TFD_BENCH_KV"); kv {
	case "", "f32":
		return compute.F32
	case "f16":
		return compute.F16
	default:
		b.Fatalf("TFD_BENCH_KV=%q: want f32 or f16", kv)
		return 0
	}
}
