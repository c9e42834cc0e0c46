package cuda

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"tfd/daemon/bench/replies"
	"tfd/daemon/config"
	"tfd/engine"
	"tfd/engine/enginetest"
	"tfd/scheduler"
)

// BenchmarkServed is `tfd bench` (package replies) on the CUDA backend, for the GPU machine, which
// runs test binaries but cannot take the tfd binary along with its bundled model: 1, 8, 32 and 64
// replies at once (128-token prompts, 128 tokens each), drafts off and as the default config
// drafts, served by the shared scheduler as the daemon serves them, greedy and sampled at
// temperature 0.7 and top_p 0.9 (the host draws those from each row's logits). It runs on the
// folder TFD_BENCH_MODEL names (the 8B-shaped checkpoint of tools/bench/make_8b.py), or on the
// bundled model, with keys and values as TFD_BENCH_KV says; once whatever -test.benchtime says,
// logging bench's tables and reporting each concurrency's tokens per second, drafts off.
//
//	TFD_BENCH_MODEL=/tmp/q8b ./bin/cuda.test -test.run '^$' -test.bench Served -test.v
func BenchmarkServed(b *testing.B) {
	src := engine.Source{Dir: filepath.Join(enginetest.RepoRoot(b), "models/gopher")}
	if dir := os.Getenv("TFD_BENCH_MODEL"); dir != "" {
		src = engine.Source{Dir: dir}
	}
	opts := replies.Options{Streams: []int{1, 8, 32, 64}, Prompt: 128, Tokens: 128}
	layout := opts.Layout()
	g := openCUDA(b)
	m, err := engine.Load(context.Background(), src, g, engine.Options{Context: layout[0], MaxRows: daemonRows(b, g, src), LogitRows: engine.DefaultMaxRows, Slots: layout[0] * len(layout), Sessions: len(layout), KVCache: benchKVCache(b)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(m.Close)
	mtp, ngram := config.Default().Drafts.Depths()
	on := scheduler.Drafts{MTP: mtp, NGram: ngram}
	for _, tc := range []struct {
		name     string
		sampling scheduler.Sampling
	}{
		{"greedy", scheduler.Sampling{}},
		{"top_p=0.9", scheduler.Sampling{Temperature: 0.7, TopP: 0.9}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			o := opts
			o.Sampling = tc.sampling
			var results []replies.Result
			for b.Loop() {
				if results, err = replies.Run(context.Background(), m, layout, o, on, nil); err != nil {
					b.Fatal(err)
				}
			}
			var table bytes.Buffer
			if err := replies.Write(&table, m.Name(), "cuda", o, results); err != nil {
				b.Fatal(err)
			}
			b.Log("\n" + table.String())
			for _, r := range results {
				if !r.Drafts {
					b.ReportMetric(r.Aggregate, fmt.Sprintf("tok/s,streams=%d", r.Streams))
				}
			}
		})
	}
}
