package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"tfd/batch"
	"tfd/compute"
	"tfd/engine"
	"tfd/engine/enginetest"
	"tfd/models"
)

// The bundled model's prefill and decode speed on the CPU backend:
//
//	go test ./engine -run '^$' -bench . -benchtime 3x
const bundledDir = "models/gopher"

// quantizations are the ways the benchmarks load the bundled model: its BF16 weights as they
// are, and quantized at load. Each benchmark runs them side by side (-count interleaves them).
var quantizations = []struct {
	name string
	q    engine.Quantization
}{{"bf16", engine.NoQuantization}, {"q8", engine.QuantizeQ8}, {"q4", engine.QuantizeQ4}}

// BenchmarkPrefill runs a 256-token prompt in one forward and reports prompt tokens per second.
func BenchmarkPrefill(b *testing.B) {
	for _, q := range quantizations {
		b.Run(q.name, func(b *testing.B) {
			m := enginetest.Load(b, openCPU(b), bundledDir, engine.Options{MaxRows: 256, Quantize: q.q})
			enginetest.BenchPrefill(b, m, 256)
		})
	}
}

// BenchmarkDecode runs single-row forwards, each one token further, after a 128-token prompt
// (positions wrap back to 128 at the end of the context), and reports tokens per second.
func BenchmarkDecode(b *testing.B) {
	for _, q := range quantizations {
		b.Run(q.name, func(b *testing.B) { benchDecode(b, q.q) })
	}
}

func benchDecode(b *testing.B, q engine.Quantization) {
	m := enginetest.Load(b, openCPU(b), bundledDir, engine.Options{MaxRows: 128, Quantize: q})
	const promptLen = 128
	rows := make([]batch.Row, promptLen)
	for i := range rows {
		rows[i] = batch.Row{Pos: i, Token: int32(i * 7 % m.Vocab()), Logits: i == promptLen-1}
	}
	logits, err := m.Forward(context.Background(), rows)
	if err != nil {
		b.Fatal(err)
	}
	pos := promptLen
	b.ResetTimer()
	for range b.N {
		row := []batch.Row{{Pos: pos, Token: batch.Argmax(logits), Logits: true}}
		if logits, err = m.Forward(context.Background(), row); err != nil {
			b.Fatal(err)
		}
		if pos++; pos == m.Context() {
			pos = promptLen
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tok/s")
}

// BenchmarkPrefillNoHead is BenchmarkPrefill on the bundled model's F16 GGUF export, which has no
// MTP head (GGUF has no name for one), so that a forward's last layer runs for the rows asked for
// alone (prune.go) as it does for most models people run; the bundled model's own head reads
// every row's last hidden state.
func BenchmarkPrefillNoHead(b *testing.B) {
	path := filepath.Join(b.TempDir(), "gopher-f16.gguf")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	err = engine.ExportGGUF(engine.Source{FS: models.FS(), Name: models.Name}, compute.F16, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		b.Fatal(err)
	}
	m, err := engine.Load(context.Background(), engine.Source{Dir: path}, openCPU(b), engine.Options{MaxRows: 256})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(m.Close)
	if m.MTP() != nil {
		b.Fatal("the GGUF export has an MTP head")
	}
	enginetest.BenchPrefill(b, m, 256)
}

// BenchmarkPrefillHead runs a 256-token prompt in one forward and then the MTP head over it, as a
// stream that drafts with the head has its prompt run (the head's keys and values at every
// position, the draft logits of the newest), and reports prompt tokens per second.
func BenchmarkPrefillHead(b *testing.B) {
	m := enginetest.Load(b, openCPU(b), bundledDir, engine.Options{MaxRows: 256})
	const n = 256
	rows := make([]batch.Row, n)
	for i := range rows {
		rows[i] = batch.Row{Pos: i, Token: int32(i % m.Vocab()), Logits: i == n-1}
	}
	draft := make([]batch.DraftRow, n-1)
	for i := range draft {
		draft[i] = batch.DraftRow{Pos: i, Token: rows[i+1].Token, Source: i, Logits: i == n-2}
	}
	head := m.MTP()
	b.ResetTimer()
	for range b.N {
		if _, err := m.Forward(context.Background(), rows); err != nil {
			b.Fatal(err)
		}
		if _, err := head.Draft(context.Background(), draft); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "tok/s")
}
