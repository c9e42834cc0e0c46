package cuda

import (
	"context"
	"os"
	"testing"

	"tfd/engine"
)

// BenchmarkEightQuantized measures one stream decoding greedily after a 128-token prompt on the
// 8B-class checkpoint that TFD_BENCH_MODEL names (tools/bench/make_8b.py), as BenchmarkEight's
// decode, with its weights as they are (bf16) and quantized at load to q8 and q4, one after
// another; it reports the weight bytes as loaded beside tok/s. It skips without the model.
//
//	TFD_BENCH_MODEL=/tmp/q8b ./cuda.test -test.run '^$' -test.bench EightQuantized -test.benchtime 64x
func BenchmarkEightQuantized(b *testing.B) {
	dir := os.Getenv("TFD_BENCH_MODEL")
	if dir == "" {
		b.Skip("TFD_BENCH_MODEL names no model folder; tools/bench/make_8b.py writes one")
	}
	g := openCUDA(b)
	for _, q := range []engine.Quantization{engine.NoQuantization, engine.QuantizeQ8, engine.QuantizeQ4} {
		name := string(q)
		if name == "" {
			name = "bf16"
		}
		_, info, err := engine.Inspect(engine.Source{Dir: dir}, q)
		if err != nil {
			b.Fatal(err)
		}
		// Loaded once, outside b.Run, which calls its function again for each b.N.
		m, err := engine.Load(context.Background(), engine.Source{Dir: dir}, g, engine.Options{Slots: 512, Quantize: q})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name, func(b *testing.B) {
			benchDecode(b, m, 0, 128)
			b.ReportMetric(float64(info.Bytes)/1e9, "GB-loaded")
		})
		m.Close()
	}
}
