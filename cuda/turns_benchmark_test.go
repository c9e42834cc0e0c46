package cuda

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"tfd/daemon/bench/turns"
	"tfd/engine"
	"tfd/engine/enginetest"
)

// BenchmarkCachedTurn times the first token of a conversation's fourth turn with the prompt cache
// off, from its memory and from its spill folder after a restart (package turns, as `tfd bench
// --conversation` does), on the folder TFD_BENCH_MODEL names (the 8B-shaped checkpoint of
// tools/bench/make_8b.py) with a conversation of 3,000 tokens, or on the bundled model with 1,600.
// It runs once whatever -test.benchtime says and logs the table.
//
//	TFD_BENCH_MODEL=/tmp/q8b ./bin/cuda.test -test.run '^$' -test.bench CachedTurn -test.v
func BenchmarkCachedTurn(b *testing.B) {
	src, tokens := engine.Source{Dir: filepath.Join(enginetest.RepoRoot(b), "models/gopher")}, 1600
	if dir := os.Getenv("TFD_BENCH_MODEL"); dir != "" {
		src, tokens = engine.Source{Dir: dir}, 3000
	}
	g := openCUDA(b)
	session := turns.Session(tokens)
	m, err := engine.Load(context.Background(), src, g, engine.Options{Context: session, MaxRows: daemonRows(b, g, src), LogitRows: engine.DefaultMaxRows, Slots: session})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(m.Close)
	var results []turns.Result
	for b.Loop() {
		if results, err = turns.Run(context.Background(), m, []int{session}, tokens, 3, slog.New(slog.DiscardHandler)); err != nil {
			b.Fatal(err)
		}
	}
	var table bytes.Buffer
	turns.Write(&table, m.Name(), "cuda", tokens, 3, results)
	b.Log("\n" + table.String())
	for _, r := range results {
		b.ReportMetric(float64(r.TTFT.Microseconds())/1000, "ms/"+map[string]string{"cache off": "off", "memory hit": "memory", "disk hit after a restart": "disk"}[r.Name])
	}
}
