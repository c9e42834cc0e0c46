package cuda

import (
	"context"
	"fmt"
	"testing"

	"tfd/batch"
	"tfd/compute"
	"tfd/compute/computetest"
	"tfd/engine"
	"tfd/engine/enginetest"
)

// Speed on the GPU, reported, never asserted:
//
//	./bin/cuda.test -test.run '^$' -test.bench . -test.benchtime 2s

const bundledDir = "models/gopher"

// BenchmarkDecode runs single-row forwards of the bundled model, each one token further, after a
// 128-token prompt, and reports tokens per second: with CUDA graphs (the default) and with every
// kernel launched on its own.
func BenchmarkDecode(b *testing.B) {
	g := openCUDA(b)
	m := enginetest.Load(b, g, bundledDir, engine.Options{MaxRows: 128})
	for _, on := range []bool{true, false} {
		b.Run(graphsName(on), func(b *testing.B) {
			setGraphs(g, on)
			defer setGraphs(g, true)
			benchDecode(b, m, 0, 128)
		})
	}
}

func graphsName(on bool) string {
	if on {
		return "graphs"
	}
	return "eager"
}

// benchDecode prefills promptLen tokens at base, then decodes greedily one row per forward,
// positions wrapping back to promptLen at the end of the context, and reports tokens per second.
func benchDecode(b *testing.B, m *engine.Model, base, promptLen int) {
	rows := make([]batch.Row, promptLen)
	for i := range rows {
		rows[i] = batch.Row{Base: base, Pos: i, Token: int32(i * 7 % m.Vocab()), Logits: i == promptLen-1}
	}
	var logits []float32
	for start := 0; start < promptLen; start += m.MaxRows() {
		var err error
		if logits, err = m.Forward(context.Background(), rows[start:min(start+m.MaxRows(), promptLen)]); err != nil {
			b.Fatal(err)
		}
	}
	pos := promptLen
	step := func() {
		row := []batch.Row{{Base: base, Pos: pos, Token: batch.Argmax(logits), Logits: true}}
		var err error
		if logits, err = m.Forward(context.Background(), row); err != nil {
			b.Fatal(err)
		}
		if pos++; pos == m.Context() {
			pos = promptLen
		}
	}
	step() // warm up: the first step runs without a graph, the second captures one
	step()
	b.ResetTimer()
	for range b.N {
		step()
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tok/s")
}

// BenchmarkStreams runs forwards of one decode row for each of 1, 8, 32 and 64 sessions of the
// bundled model and reports tokens per second over all of them (benchStreams).
func BenchmarkStreams(b *testing.B) {
	const span = 256
	g := openCUDA(b)
	m := enginetest.Load(b, g, bundledDir, engine.Options{MaxRows: 64, Slots: 64 * span})
	for _, n := range []int{1, 8, 32, 64} {
		b.Run(fmt.Sprintf("streams=%d", n), func(b *testing.B) { benchStreams(b, m, n, span, logitsRead) })
	}
}

// benchStreams runs forwards of one row for each of sessions sessions, session s at base s·span,
// all at one position that goes from 128 to span-1 and wraps, with tokens that change every step,
// and reports tokens per second over all rows. Every row asks for its logits, as a decode row of a
// sampled stream does (read = logitsRead), and greedy picks, where wanted, are taken by the host
// as the scheduler did before picks (hostPicks) or by the device (devicePicks, ForwardPicks). The
// sessions hold no prompt: their slots below 128 are what the pool held (zeros at first), which
// costs the attention kernel the same arithmetic as a real prompt.
// streamRead is what a benchStreams step reads of its rows.
type streamRead int

const (
	logitsRead  streamRead = iota // every row's logits
	hostPicks                     // every row's logits, then its greedy pick on the host
	devicePicks                   // every row's greedy pick, taken on the device
)

func benchStreams(b *testing.B, m *engine.Model, sessions, span int, read streamRead) {
	const start = 128
	rows := make([]batch.Row, sessions)
	step := func(n, pos int) {
		for s := range rows {
			rows[s] = batch.Row{Base: s * span, Pos: pos, Token: int32((n*31 + s*7) % m.Vocab()), Logits: read != devicePicks, Pick: read == devicePicks}
		}
		logits, _, err := m.ForwardPicks(context.Background(), rows)
		if err != nil {
			b.Fatal(err)
		}
		if read == hostPicks {
			v, sum := m.Vocab(), int32(0)
			for s := range rows {
				sum |= batch.Argmax(logits[s*v : (s+1)*v])
			}
			if sum < 0 {
				b.Fatal("a negative pick")
			}
		}
	}
	step(0, start) // warm up: the first forward of a shape runs without a graph, the second captures
	step(1, start+1)
	pos := start + 2
	b.ResetTimer()
	for n := range b.N {
		step(n, pos)
		if pos++; pos == span {
			pos = start
		}
	}
	b.ReportMetric(float64(sessions*b.N)/b.Elapsed().Seconds(), "tok/s")
}

// BenchmarkDecode8 runs forwards of 8 rows, one decode row for each of 8 sessions, and reports
// tokens per second over all of them.
func BenchmarkDecode8(b *testing.B) {
	const sessions, promptLen, span = 8, 128, 256
	m := enginetest.Load(b, openCUDA(b), bundledDir, engine.Options{MaxRows: promptLen, Slots: sessions * span})
	for s := range sessions {
		rows := make([]batch.Row, promptLen)
		for i := range rows {
			rows[i] = batch.Row{Base: s * span, Pos: i, Token: int32((i*7 + s) % m.Vocab())}
		}
		if _, err := m.Forward(context.Background(), rows); err != nil {
			b.Fatal(err)
		}
	}
	rows := make([]batch.Row, sessions)
	pos := promptLen
	b.ResetTimer()
	for n := range b.N {
		for s := range rows {
			rows[s] = batch.Row{Base: s * span, Pos: pos, Token: int32((n + s) % m.Vocab()), Logits: true}
		}
		if _, err := m.Forward(context.Background(), rows); err != nil {
			b.Fatal(err)
		}
		if pos++; pos == span {
			pos = promptLen
		}
	}
	b.ReportMetric(float64(sessions*b.N)/b.Elapsed().Seconds(), "tok/s")
}

// BenchmarkLaunch records 1000 one-element Adds and waits for them: the cost of one op on the
// worker and the GPU, which bounds a forward of many small kernels. eager launches each Add on its
// own; graphs replays the 1000 as one captured graph, as a repeated forward is.
func BenchmarkLaunch(b *testing.B) {
	g := openCUDA(b)
	x := computetest.UploadF32(b, g, []float32{1}, 1, 1)
	for _, on := range []bool{false, true} {
		b.Run(graphsName(on), func(b *testing.B) {
			setGraphs(g, on)
			defer setGraphs(g, true)
			for range 2 { // warm up: with graphs, the second time captures
				for range 1000 {
					g.Add(x, x, x, 1)
				}
				if err := g.Sync(); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for range b.N {
				for range 1000 {
					g.Add(x, x, x, 1)
				}
				if err := g.Sync(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(b.Elapsed().Seconds()/float64(1000*b.N)*1e6, "µs/op")
		})
	}
}

// BenchmarkPrefill runs a 256-token prompt of the bundled model in one forward and reports prompt
// tokens per second.
func BenchmarkPrefill(b *testing.B) {
	m := enginetest.Load(b, openCUDA(b), bundledDir, engine.Options{MaxRows: 256})
	enginetest.BenchPrefill(b, m, 256)
}

// BenchmarkPrefillSplit is BenchmarkPrefill with attention_split for every launch (what
// TFD_CUDA_ATTN_TILE=0 does), to set against attention_tile_H in one run.
func BenchmarkPrefillSplit(b *testing.B) {
	g := openCUDA(b)
	setAttentionTile(g, "0")
	m := enginetest.Load(b, g, bundledDir, engine.Options{MaxRows: 256})
	enginetest.BenchPrefill(b, m, 256)
}

// BenchmarkMatVec multiplies an 8192×8192 BF16 matrix by one row, the decode case, on the CUDA
// cores (TFD_CUDA_MMA=0), and reports the weights' bytes read per second. The run ends with one
// Sync, so launches overlap.
func BenchmarkMatVec(b *testing.B) { benchMatMul(b, lanes, compute.BF16, 8192, 8192, 1) }

// BenchmarkMatMul16 and BenchmarkMatMul256 are the same matrix against 16 and 256 rows, and
// BenchmarkMatMul4096 a 4096×4096 one against 4,096 rows (an 8B model's prefill of q or o).
func BenchmarkMatMul16(b *testing.B)   { benchMatMul(b, lanes, compute.BF16, 8192, 8192, 16) }
func BenchmarkMatMul256(b *testing.B)  { benchMatMul(b, lanes, compute.BF16, 8192, 8192, 256) }
func BenchmarkMatMul4096(b *testing.B) { benchMatMul(b, lanes, compute.BF16, 4096, 4096, 4096) }

// BenchmarkMatVecKV is an 8B model's k or v projection for one row (1024×4096), a matrix too
// small to fill the GPU on its own.
func BenchmarkMatVecKV(b *testing.B) { benchMatMul(b, lanes, compute.BF16, 1024, 4096, 1) }

// The MMA benchmarks run the same shapes on the tensor cores (TFD_CUDA_MMA=1) with the weights
// packed as Upload then packs them; the MMARowMajor ones on the tensor cores from row-major
// weights (matmul_mma_bf16_S, the kernel before the packed order).
func BenchmarkMatVecMMA(b *testing.B)     { benchMatMul(b, packed, compute.BF16, 8192, 8192, 1) }
func BenchmarkMatVecKVMMA(b *testing.B)   { benchMatMul(b, packed, compute.BF16, 1024, 4096, 1) }
func BenchmarkMatMul16MMA(b *testing.B)   { benchMatMul(b, packed, compute.BF16, 8192, 8192, 16) }
func BenchmarkMatMul256MMA(b *testing.B)  { benchMatMul(b, packed, compute.BF16, 8192, 8192, 256) }
func BenchmarkMatMul4096MMA(b *testing.B) { benchMatMul(b, packed, compute.BF16, 4096, 4096, 4096) }

func BenchmarkMatVecMMARowMajor(b *testing.B) { benchMatMul(b, rowMajor, compute.BF16, 8192, 8192, 1) }
func BenchmarkMatVecKVMMARowMajor(b *testing.B) {
	benchMatMul(b, rowMajor, compute.BF16, 1024, 4096, 1)
}
func BenchmarkMatMul16MMARowMajor(b *testing.B) {
	benchMatMul(b, rowMajor, compute.BF16, 8192, 8192, 16)
}
func BenchmarkMatMul256MMARowMajor(b *testing.B) {
	benchMatMul(b, rowMajor, compute.BF16, 8192, 8192, 256)
}
func BenchmarkMatMul4096MMARowMajor(b *testing.B) {
	benchMatMul(b, rowMajor, compute.BF16, 4096, 4096, 4096)
}

// matmulPath is where benchMatMul runs: the CUDA cores, or the tensor cores on packed or
// row-major weights.
type matmulPath int

const (
	lanes matmulPath = iota
	packed
	rowMajor
)

// benchWeights caches the encoded random weights of each shape: making them takes longer than
// the benchmark, which runs several times.
var benchWeights = map[[3]int][]byte{}

func benchMatMul(b *testing.B, path matmulPath, dt compute.DType, out, in, rows int) {
	if path == lanes {
		b.Setenv("TFD_CUDA_MMA", "0")
	} else {
		b.Setenv("TFD_CUDA_MMA", "1")
	}
	g := openCUDA(b)
	setGraphs(g, false) // the kernel's own speed: b.N launches with no sync between
	key := [3]int{int(dt), out, in}
	if benchWeights[key] == nil {
		benchWeights[key] = computetest.Encode(dt, computetest.Randn(1, out*in))
	}
	w, err := uploadAs(g, dt, []int{out, in}, benchWeights[key], path == packed)
	if err != nil {
		b.Fatal(err)
	}
	x := computetest.UploadF32(b, g, computetest.Randn(2, rows*in), rows, in)
	dst, err := g.Alloc(compute.F32, rows, out)
	if err != nil {
		b.Fatal(err)
	}
	g.MatMul(dst, x, w, nil, rows) // warm up
	if err := g.Sync(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		g.MatMul(dst, x, w, nil, rows)
	}
	if err := g.Sync(); err != nil {
		b.Fatal(err)
	}
	s := b.Elapsed().Seconds()
	bytes := float64(out * in * dt.Size())
	b.ReportMetric(bytes*float64(b.N)/s/1e9, "GB/s")
	b.ReportMetric(2*float64(out*in*rows)*float64(b.N)/s/1e12, "TFLOP/s")
}

// BenchmarkGreedyChain decodes the bundled model greedily as the lone driver does: one chain of
// forwards on the device, each step's argmax the next step's token, batch.ChainAhead steps kept
// enqueued so the next starts as the last ends, each step's token read back as it ends; every
// step replays one graph. Positions run from 128 to 2047 and round again; it reports tokens per
// second.
func BenchmarkGreedyChain(b *testing.B) {
	m := enginetest.Load(b, openCUDA(b), bundledDir, engine.Options{MaxRows: 128})
	const promptLen = 128
	rows := make([]batch.Row, promptLen-1)
	for i := range rows {
		rows[i] = batch.Row{Pos: i, Token: int32(i * 7 % m.Vocab())}
	}
	if _, err := m.Forward(context.Background(), rows); err != nil {
		b.Fatal(err)
	}
	chains := m.Chains()
	row := batch.Row{Pos: promptLen - 1, Token: 7}
	// chain runs n steps from row and moves row past them.
	chain := func(n int) {
		if err := chains.StartChain(context.Background(), row); err != nil {
			b.Fatal(err)
		}
		enqueued := 0
		for taken := range n {
			for ; enqueued < min(taken+batch.ChainAhead, n); enqueued++ {
				if err := chains.Step(); err != nil {
					b.Fatal(err)
				}
			}
			tok, err := chains.Token()
			if err != nil {
				b.Fatal(err)
			}
			row = batch.Row{Pos: row.Pos + 1, Token: tok}
		}
	}
	chain(4) // warm up: the first step runs without a graph, the second captures one
	b.ResetTimer()
	for done := 0; done < b.N; {
		n := min(b.N-done, m.Context()-row.Pos)
		chain(n)
		done += n
		if row.Pos == m.Context() {
			row.Pos = promptLen - 1
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tok/s")
}
