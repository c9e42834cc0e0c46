package cuda

import (
	"context"
	"os"
	"testing"

	"tfd/engine"
)

// BenchmarkStepWithout measures where a one-row decode step of an 8B-class checkpoint (the folder
// named by TFD_BENCH_MODEL, as BenchmarkEight) spends its time, by leaving kinds of kernels out of
// every step (backend.leaveOut) and by launching heavy kernels that come to be neighbours one
// after the other (backend.serialHeavy, TFD_CUDA_SERIAL_HEAVY). The outputs are wrong wherever a
// kernel is left out, so each figure is an upper bound on what fusing that kernel away could
// give, not a speed tfd has (docs/performance.md, "Where a one-row step's time goes in the
// chain"). Each sub-benchmark is streams=1 of BenchmarkEight:
//
//	all                 the step as main runs it
//	all,serial          the same with TFD_CUDA_SERIAL_HEAVY's rule
//	less=K,serial       without the kernels named K…, the rule on
//	matmuls[,serial]    the matmuls alone: every other kernel left out, the embedding and the
//	                    last add and gather too (docs/performance.md's branch kept those three)
//
//	TFD_BENCH_MODEL=/tmp/q8b ./bin/cuda.test -test.run '^$' -test.bench StepWithout -test.benchtime 1s
func BenchmarkStepWithout(b *testing.B) {
	const span = 512
	be, m := loadWithout(b, span)
	light := []string{"rmsnorm", "qk_rope_write_", "rope", "kv_write_", "attention_", "silu_mul", "embed_", "gather", "add"}
	for _, c := range []struct {
		name   string
		leave  []string
		serial bool
	}{
		{"all", nil, false},
		{"all,serial", nil, true},
		{"less=silu_mul,serial", []string{"silu_mul"}, true},
		{"less=qk_rope_write,serial", []string{"qk_rope_write_"}, true},
		{"less=rmsnorm_row,serial", []string{"rmsnorm_row"}, true},
		{"less=attention_combine,serial", []string{"attention_combine"}, true},
		// The splits' kernel: attention_warp, or attention_split under TFD_CUDA_ATTN_WARP=0.
		{"less=attention_warp,serial", []string{"attention_warp_", "attention_split_"}, true},
		{"matmuls,serial", light, true},
		{"matmuls", light, false},
	} {
		b.Run(c.name, func(b *testing.B) {
			serial := be.serialHeavy
			be.leaveOut, be.serialHeavy = c.leave, c.serial
			defer func() { be.leaveOut, be.serialHeavy = nil, serial }()
			benchStreams(b, m, 1, span, logitsRead)
		})
	}
}

// BenchmarkPrefillWithout is BenchmarkStepWithout for BenchmarkEight's prefill: a 4,096-token
// prompt in forwards of the engine's MaxRows, as prefill=4096 runs it, with kinds of kernels
// left out of every forward, so that where a prefill's time goes comes from one command:
//
//	all                 the prefill as main runs it
//	less=attention      without attention_tile, _split, _warp and attention_combine
//	less=rmsnorm        without the norms
//	less=qk_rope_write  without the q/k norms, RoPE and KV write
//	matmuls             the matmuls alone, with the splits of x they read (mma_split_*,
//	                    mma_sum_quarters)
//
//	TFD_BENCH_MODEL=/tmp/q8b ./bin/cuda.test -test.run '^$' -test.bench PrefillWithout -test.benchtime 3x
func BenchmarkPrefillWithout(b *testing.B) {
	const prompt = 4096
	be, m := loadWithout(b, prompt)
	for _, c := range []struct {
		name  string
		leave []string
	}{
		{"all", nil},
		{"less=attention", []string{"attention_"}},
		{"less=rmsnorm", []string{"rmsnorm"}},
		{"less=qk_rope_write", []string{"qk_rope_write_"}},
		{"matmuls", []string{"rmsnorm", "qk_rope_write_", "rope", "kv_write_", "attention_", "silu_mul", "embed_", "gather", "add"}},
	} {
		b.Run(c.name, func(b *testing.B) {
			be.leaveOut = c.leave
			defer func() { be.leaveOut = nil }()
			benchPrefill(b, m, 0, prompt, m.MaxRows())
		})
	}
}

// loadWithout loads the checkpoint TFD_BENCH_MODEL names on the GPU with slots KV slots, for the
// benchmarks that leave kernels out of its forwards; it skips where no checkpoint is named.
func loadWithout(b *testing.B, slots int) (*backend, *engine.Model) {
	dir := os.Getenv("TFD_BENCH_MODEL")
	if dir == "" {
		b.Skip("TFD_BENCH_MODEL names no model folder; tools/bench/make_8b.py writes one")
	}
	g := openCUDA(b)
	src := engine.Source{Dir: dir}
	m, err := engine.Load(context.Background(), src, g, engine.Options{MaxRows: daemonRows(b, g, src), LogitRows: engine.DefaultMaxRows, Slots: slots})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(m.Close)
	return g.(*backend), m
}
