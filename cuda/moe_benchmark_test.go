package cuda

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"

	"tfd/compute"
	"tfd/compute/computetest"
	"tfd/engine"
)

// BenchmarkMoE measures a mixture-of-experts checkpoint: the folder named by TFD_BENCH_MODEL,
// such as the random-init Qwen3-30B-A3B-shaped one tools/bench/make_30b_a3b.py writes. It skips
// without it, and for a dense checkpoint (BenchmarkEight measures those).
//
//	TFD_BENCH_MODEL=/dev/shm/q30b ./bin/cuda.test -test.run '^$' -test.bench MoE -test.benchtime 1s
//
// The cases are BenchmarkEight's, at the positions tools/bench/peer.py times: decode is one
// stream decoding greedily after a 128-token prompt, and reports the weight bytes one token reads
// (the k experts it is routed to of each layer, not all of them) and those bytes times tokens per
// second; streams=N is one decode row for each of N sessions per forward (benchStreams). With
// random router weights the routing is near uniform, so 64 rows of a layer reach nearly all of
// its experts.
func BenchmarkMoE(b *testing.B) {
	dir := os.Getenv("TFD_BENCH_MODEL")
	if dir == "" {
		b.Skip("TFD_BENCH_MODEL names no model folder; tools/bench/make_30b_a3b.py writes one")
	}
	const (
		span    = 512 // slots per decode session; positions 128..511
		streams = 64  // the most decode sessions
	)
	c, _, err := engine.Inspect(engine.Source{Dir: dir}, engine.NoQuantization)
	if err != nil {
		b.Fatal(err)
	}
	if c.MoE.Experts == 0 {
		b.Skipf("%s is a dense model: BenchmarkEight measures it", dir)
	}
	perToken, err := weightBytesPerToken(dir, c.MoE)
	if err != nil {
		b.Fatal(err)
	}
	g := openCUDA(b)
	m, err := engine.Load(context.Background(), engine.Source{Dir: dir}, g, engine.Options{MaxRows: engine.ForwardRows(g, c), LogitRows: engine.DefaultMaxRows, Slots: streams * span})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(m.Close)
	b.Logf("%s: %d layers (%d sparse), hidden %d, %d heads (%d kv), %d experts of %d, %d a token, vocab %d; %.2f GB of weights read per token; MaxRows %d",
		dir, c.Layers, c.MoE.SparseLayers(c.Layers), c.Hidden, c.Heads, c.KVHeads, c.MoE.Experts, c.MoE.Intermediate,
		c.MoE.PerToken, c.Vocab, float64(perToken)/1e9, m.MaxRows())

	b.Run("decode", func(b *testing.B) {
		benchDecode(b, m, 0, 128)
		tps := float64(b.N) / b.Elapsed().Seconds()
		b.ReportMetric(float64(perToken)/1e9, "GB/tok")
		b.ReportMetric(tps*float64(perToken)/1e9, "GB/s")
	})
	for _, n := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("streams=%d", n), func(b *testing.B) { benchStreams(b, m, n, span, logitsRead) })
	}
}

// BenchmarkExpertMatMul times one ExpertMatMul of a Qwen3-30B-A3B layer's experts (128 of
// them, bf16): gate or up ([128, 768, 2048], each pair reading its row's hidden state) and down
// ([128, 2048, 768]), for the pairs of 1, 8 and 64 rows of 8 experts each, routed uniformly at
// random as a random router routes. It reports the bytes of the experts the pairs reach (each
// read once at best) per second, to set against BenchmarkMatVec's: what BenchmarkMoE's experts
// cost at each stream count, without a checkpoint.
func BenchmarkExpertMatMul(b *testing.B) {
	const experts, k, hidden, inter = 128, 8, 2048, 768
	g := openCUDA(b)
	setGraphs(g, false) // the kernel's own speed: b.N launches with no sync between
	for _, m := range []struct {
		name    string
		out, in int
	}{{"gate", inter, hidden}, {"down", hidden, inter}} {
		// The values do not change the speed: a repeating pattern of small bf16 numbers.
		data := make([]byte, experts*m.out*m.in*2)
		for i := 0; i < len(data); i += 2 {
			data[i], data[i+1] = byte(i>>1), 0x3c
		}
		w, err := g.Upload(compute.BF16, []int{experts, m.out, m.in}, data)
		if err != nil {
			b.Fatal(err)
		}
		for _, rows := range []int{1, 8, 64} {
			b.Run(fmt.Sprintf("%s/rows=%d", m.name, rows), func(b *testing.B) {
				benchExpertMatMul(b, g, w, rows, k, experts, m.out, m.in)
			})
		}
	}
}

// benchExpertMatMul runs ExpertMatMul on w for rows rows of k distinct experts each; gate-like
// matrices (in = the hidden size) take a row's input for all its k pairs (share k), down a row's
// own input per pair.
func benchExpertMatMul(b *testing.B, g compute.Backend, w compute.Tensor, rows, k, experts, out, in int) {
	r := rand.New(rand.NewPCG(uint64(rows), 17))
	pairs := rows * k
	ids := make([]int32, 0, pairs)
	reached := map[int32]bool{}
	for range rows {
		for _, e := range r.Perm(experts)[:k] {
			ids = append(ids, int32(e))
			reached[int32(e)] = true
		}
	}
	share := k
	if out > in {
		share = 1 // down: one input row a pair
	}
	groups := computetest.UploadI32(b, g, make([]int32, experts+1+pairs))
	g.GroupByExpert(groups, computetest.UploadI32(b, g, ids), pairs, experts)
	x := computetest.UploadF32(b, g, computetest.Randn(2, (pairs+share-1)/share*in), (pairs+share-1)/share, in)
	dst, err := g.Alloc(compute.F32, pairs, out)
	if err != nil {
		b.Fatal(err)
	}
	g.ExpertMatMul(dst, x, w, nil, groups, pairs, share) // warm up
	if err := g.Sync(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		g.ExpertMatMul(dst, x, w, nil, groups, pairs, share)
	}
	if err := g.Sync(); err != nil {
		b.Fatal(err)
	}
	bytes := float64(len(reached) * out * in * 2)
	b.ReportMetric(float64(len(reached)), "experts")
	b.ReportMetric(bytes*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
}
