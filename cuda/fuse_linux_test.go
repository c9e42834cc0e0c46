package cuda

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"tfd/batch"
	"tfd/compute"
	"tfd/compute/computetest"
	"tfd/engine"
	"tfd/engine/enginetest"
	"tfd/kernels"
)

// TestSiLUMulMatMulEqualsOps checks SiLUMulMatMul (mma_split_silu_wg feeding the warpgroup's tile)
// against SiLUMul then MatMul on the GPU, bit for bit, with a bias, for rows in whole tiles and
// ragged ones; that it takes them on a GPU with wgmma and declines one row; and that it leaves
// gate and up as they were.
func TestSiLUMulMatMulEqualsOps(t *testing.T) {
	b := openCUDA(t)
	const in, out = 2048, 1000
	w := uploadBF16(t, b, 20, out, in)
	bias := computetest.UploadF32(t, b, computetest.Randn(21, out), out)
	for _, rows := range []int{1, 64, 100} {
		gv, uv := computetest.Randn(uint64(2*rows), rows*in), computetest.Randn(uint64(2*rows+1), rows*in)
		gate, up := computetest.UploadF32(t, b, gv, rows, in), computetest.UploadF32(t, b, uv, rows, in)
		got := allocF32(t, b, rows, out)
		fused := b.(compute.SiLUMulMatMuler).SiLUMulMatMul(got, gate, up, w, bias, rows)
		if want := b.(*backend).wgmma && rows >= kernels.WGFrom; fused != want {
			t.Fatalf("%d rows: SiLUMulMatMul reports %v, want %v", rows, fused, want)
		}
		if !fused {
			continue
		}
		computetest.SameBits(t, fmt.Sprintf("%d rows: gate after SiLUMulMatMul", rows), readF32(t, b, gate, rows*in), gv)
		computetest.SameBits(t, fmt.Sprintf("%d rows: up after SiLUMulMatMul", rows), readF32(t, b, up, rows*in), uv)
		prod, want := allocF32(t, b, rows, in), allocF32(t, b, rows, out)
		b.SiLUMul(prod, gate, up, rows)
		b.MatMul(want, prod, w, bias, rows)
		computetest.SameBits(t, fmt.Sprintf("%d rows: SiLUMulMatMul against SiLUMul then MatMul", rows), readF32(t, b, got, rows*out), readF32(t, b, want, rows*out))
	}
}

// TestFoldedQuartersEqualOps checks a one-matrix matmul in quarters followed by AddRMSNorm of its
// output, the norm adding the quarters itself (rmsnorm_row with quarters set), against the same
// with mma_sum_quarters launched (TFD_CUDA_FOLD_QUARTERS=0), bit for bit: the matmul's output,
// the residual and the norm's output, with a bias and without, for rows in whole tiles and
// ragged ones; and that a matmul whose output goes elsewhere first still gets its sum.
func TestFoldedQuartersEqualOps(t *testing.T) {
	b, c := openFolding(t)
	const in, d = 2048, 4096
	w := uploadBF16(t, b, 40, d, in)
	bias := computetest.UploadF32(t, b, computetest.Randn(41, d), d)
	norm := computetest.UploadF32(t, b, computetest.Randn(42, d), d)
	for _, rows := range []int{64, 100} {
		for _, withBias := range []bool{true, false} {
			xv, rv := computetest.Randn(uint64(rows), rows*in), computetest.Randn(uint64(rows+1), rows*d)
			run := func(fold, between bool) (out, res, h []float32) {
				c.foldQuarters = fold
				x, r := computetest.UploadF32(t, b, xv, rows, in), computetest.UploadF32(t, b, rv, rows, d)
				o, err := b.Alloc(compute.F32, rows, d)
				if err != nil {
					t.Fatal(err)
				}
				hn, err := b.Alloc(compute.F32, rows, d)
				if err != nil {
					t.Fatal(err)
				}
				var bt compute.Tensor
				if withBias {
					bt = bias
				}
				b.MatMul(o, x, w, bt, rows)
				if fold && !between && c.pendingSum.l.Kernel == "" {
					t.Fatalf("%d rows: the matmul's quarters were summed before the norm", rows)
				}
				if between {
					b.Add(hn, o, o, rows) // reads the matmul's output: its sum must have run
				}
				b.AddRMSNorm(hn, r, o, norm, rows, 1e-6)
				return readF32(t, b, o, rows*d), readF32(t, b, r, rows*d), readF32(t, b, hn, rows*d)
			}
			wantOut, wantRes, wantH := run(false, false)
			for _, between := range []bool{false, true} {
				gotOut, gotRes, gotH := run(true, between)
				what := fmt.Sprintf("%d rows, bias %v, an op between %v", rows, withBias, between)
				computetest.SameBits(t, what+": the matmul's output", gotOut, wantOut)
				computetest.SameBits(t, what+": the residual", gotRes, wantRes)
				computetest.SameBits(t, what+": the norm's output", gotH, wantH)
			}
		}
	}
}

// TestFoldedQuartersKeepEngineBits runs prompts of 64 and 100 rows through the bundled model (a
// Qwen3 of BF16 weights, heads of 64 with q and k norms, so every fold runs: the norms add o's and
// down's quarters, the SwiGLU's split gate's and up's, qk_rope_write q's, k's and v's) with the
// ops after the matmuls adding their quarters and without, and demands the same logits, every
// row's, bit for bit.
func TestFoldedQuartersKeepEngineBits(t *testing.T) {
	b, c := openFolding(t)
	m := enginetest.Load(t, b, "models/gopher", engine.Options{MaxRows: 128, Slots: 1024})
	run := func(on bool) [][]float32 {
		c.foldQuarters = on
		r := rand.New(rand.NewPCG(7, 8))
		var out [][]float32
		for i, n := range []int{64, 100} {
			rows := make([]batch.Row, n)
			for p := range rows {
				rows[p] = batch.Row{Base: 256 * i, Pos: p, Token: int32(r.IntN(m.Vocab())), Logits: true}
			}
			logits, err := m.Forward(context.Background(), rows)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, slices.Clone(logits))
		}
		return out
	}
	want := run(false)
	got := run(true)
	for i := range got {
		computetest.SameBits(t, fmt.Sprintf("prompt %d, folded against launched", i), got[i], want[i])
	}
}

// TestFoldedGateUpEqualOps checks a gate and up matmul in quarters followed by SiLUMulMatMul of its
// outputs, the split adding the quarters itself (mma_split_silu_wg with quarters set), against the
// same with mma_sum_quarters launched (TFD_CUDA_FOLD_QUARTERS=0), bit for bit: gate, up and the
// down projection's output, with biases on gate and up and without, for rows in whole tiles and
// ragged ones; and that a gate and up read by another op first still get their sum.
func TestFoldedGateUpEqualOps(t *testing.T) {
	b, c := openFolding(t)
	const hidden, inter = 1024, 2048
	wg, wu, wd := uploadBF16(t, b, 50, inter, hidden), uploadBF16(t, b, 51, inter, hidden), uploadBF16(t, b, 52, hidden, inter)
	bg, bu := computetest.UploadF32(t, b, computetest.Randn(53, inter), inter), computetest.UploadF32(t, b, computetest.Randn(54, inter), inter)
	for _, rows := range []int{64, 100} {
		if !kernels.UsesWGQuarters(rows, [3]int{inter, inter}, c.sms) {
			t.Fatalf("%d rows of a %d-output gate and up: no quarters on this GPU's %d SMs", rows, inter, c.sms)
		}
		for bi, biases := range [][3]compute.Tensor{{}, {bg, bu}, {nil, bu}} {
			xv := computetest.Randn(uint64(rows), rows*hidden)
			run := func(fold, between bool) (gate, up, out []float32) {
				c.foldQuarters = fold
				x := computetest.UploadF32(t, b, xv, rows, hidden)
				g, u, o, scratch := allocF32(t, b, rows, inter), allocF32(t, b, rows, inter), allocF32(t, b, rows, hidden), allocF32(t, b, rows, inter)
				b.(compute.MultiMatMul).MatMuls([3]compute.Tensor{g, u}, x, [3]compute.Tensor{wg, wu}, biases, rows)
				if fold && c.pendingSum.l.Kernel == "" {
					t.Fatalf("%d rows: the gate and up matmul's quarters were summed before the split", rows)
				}
				if between {
					b.Add(scratch, g, u, rows) // reads gate and up: their sum must have run
				}
				if !b.(compute.SiLUMulMatMuler).SiLUMulMatMul(o, g, u, wd, nil, rows) {
					t.Fatalf("%d rows: SiLUMulMatMul declined", rows)
				}
				// What may be pending now is the down projection's own sum, never gate's and up's.
				if p := c.pendingSum; p.l.Kernel != "" && p.dst[0] == ptr(c.asTensor(g, "test", "gate")) {
					t.Fatalf("%d rows: gate and up's sum still pending after SiLUMulMatMul", rows)
				}
				return readF32(t, b, g, rows*inter), readF32(t, b, u, rows*inter), readF32(t, b, o, rows*hidden)
			}
			wantG, wantU, wantO := run(false, false)
			for _, between := range []bool{false, true} {
				gotG, gotU, gotO := run(true, between)
				what := fmt.Sprintf("%d rows, biases %s, an op between %v", rows, [...]string{"none", "both", "up's"}[bi], between)
				computetest.SameBits(t, what+": gate", gotG, wantG)
				computetest.SameBits(t, what+": up", gotU, wantU)
				computetest.SameBits(t, what+": the down projection", gotO, wantO)
			}
		}
	}
}

// TestFoldedQKVEqualOps checks a q, k and v matmul in quarters followed by QKRoPEWrite of its
// outputs, qk_rope_write adding the quarters itself, against the same with mma_sum_quarters
// launched (TFD_CUDA_FOLD_QUARTERS=0), bit for bit: q, k and v, and the attention over the keys
// and values written, with biases and without, for rows in whole tiles and ragged ones.
func TestFoldedQKVEqualOps(t *testing.T) {
	b, c := openFolding(t)
	const hidden, heads, kvHeads, hd = 1024, 8, 2, 128
	qn, kn := heads*hd, kvHeads*hd
	wq, wk, wv := uploadBF16(t, b, 60, qn, hidden), uploadBF16(t, b, 61, kn, hidden), uploadBF16(t, b, 62, kn, hidden)
	bq, bk, bv := computetest.UploadF32(t, b, computetest.Randn(63, qn), qn), computetest.UploadF32(t, b, computetest.Randn(64, kn), kn), computetest.UploadF32(t, b, computetest.Randn(65, kn), kn)
	qNorm, kNorm := computetest.UploadF32(t, b, computetest.Randn(66, hd), hd), computetest.UploadF32(t, b, computetest.Randn(67, hd), hd)
	freqs := make([]float32, hd/2)
	for j := range freqs {
		freqs[j] = float32(1 / math.Pow(1e6, float64(2*j)/float64(hd)))
	}
	invFreq := computetest.UploadF32(t, b, freqs, hd/2)
	for _, rows := range []int{64, 100} {
		if !kernels.UsesWGQuarters(rows, [3]int{qn, kn, kn}, c.sms) {
			t.Fatalf("%d rows of q, k and v of %d, %d and %d outputs: no quarters on this GPU's %d SMs", rows, qn, kn, kn, c.sms)
		}
		pos := make([]int32, rows)
		for i := range pos {
			pos[i] = int32(i)
		}
		positions, bases := computetest.UploadI32(t, b, pos), computetest.UploadI32(t, b, make([]int32, rows))
		for bi, biases := range [][3]compute.Tensor{{}, {bq, bk, bv}, {nil, nil, bv}} {
			xv := computetest.Randn(uint64(rows), rows*hidden)
			run := func(fold bool) (q, k, v, att []float32) {
				c.foldQuarters = fold
				kv, err := b.NewKV(compute.KVSpec{Layers: 1, KVHeads: kvHeads, HeadDim: hd, Slots: rows})
				if err != nil {
					t.Fatal(err)
				}
				defer b.FreeKV(kv)
				x := computetest.UploadF32(t, b, xv, rows, hidden)
				qt, kt, vt, out := allocF32(t, b, rows, qn), allocF32(t, b, rows, kn), allocF32(t, b, rows, kn), allocF32(t, b, rows, qn)
				b.(compute.MultiMatMul).MatMuls([3]compute.Tensor{qt, kt, vt}, x, [3]compute.Tensor{wq, wk, wv}, biases, rows)
				if fold && c.pendingSum.l.Kernel == "" {
					t.Fatalf("%d rows: the q, k and v matmul's quarters were summed before QKRoPEWrite", rows)
				}
				if !b.(compute.QKRoPEWriter).QKRoPEWrite(qt, kt, vt, qNorm, kNorm, positions, invFreq, kv, 0, bases, positions, rows, heads, 1e-6) {
					t.Fatalf("%d rows: QKRoPEWrite declined", rows)
				}
				if fold && c.pendingSum.l.Kernel != "" {
					t.Fatalf("%d rows: a sum still pending after QKRoPEWrite", rows)
				}
				b.Attention(out, qt, kv, 0, bases, positions, nil, rows, heads, float32(1/math.Sqrt(hd)))
				return readF32(t, b, qt, rows*qn), readF32(t, b, kt, rows*kn), readF32(t, b, vt, rows*kn), readF32(t, b, out, rows*qn)
			}
			wantQ, wantK, wantV, wantA := run(false)
			gotQ, gotK, gotV, gotA := run(true)
			what := fmt.Sprintf("%d rows, biases %s", rows, [...]string{"none", "all", "v's"}[bi])
			computetest.SameBits(t, what+": q", gotQ, wantQ)
			computetest.SameBits(t, what+": k", gotK, wantK)
			computetest.SameBits(t, what+": v", gotV, wantV)
			computetest.SameBits(t, what+": attention over the keys and values written", gotA, wantA)
		}
	}
}

// readF32 reads the first n floats of x.
func readF32(t *testing.T, b compute.Backend, x compute.Tensor, n int) []float32 {
	t.Helper()
	got := make([]float32, n)
	if err := b.ReadFloat32(x, got); err != nil {
		t.Fatal(err)
	}
	return got
}

// allocF32 allocates an F32 tensor of rows rows of n.
func allocF32(t *testing.T, b compute.Backend, rows, n int) compute.Tensor {
	t.Helper()
	x, err := b.Alloc(compute.F32, rows, n)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// uploadBF16 uploads a BF16 matrix of outs rows of in, random from seed.
func uploadBF16(t *testing.T, b compute.Backend, seed uint64, outs, in int) compute.Tensor {
	t.Helper()
	w, err := b.Upload(compute.BF16, []int{outs, in}, computetest.Encode(compute.BF16, computetest.Randn(seed, outs*in)))
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// openFolding opens a cuda backend for a test of the quarters' folds, or skips the test where the
// GPU has no warpgroup tile (so no quarters); the test may switch c.foldQuarters, which is put
// back when it ends.
func openFolding(t *testing.T) (compute.Backend, *backend) {
	b := openCUDA(t)
	c := b.(*backend)
	if !c.wgmma {
		t.Skip("no warpgroup tile on this GPU: no quarters to fold")
	}
	on := c.foldQuarters
	t.Cleanup(func() { c.foldQuarters = on })
	return b, c
}
