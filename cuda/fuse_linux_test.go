package cuda

import (
	"context"
	"fmt"
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
	w, err := b.Upload(compute.BF16, []int{out, in}, computetest.Encode(compute.BF16, computetest.Randn(20, out*in)))
	if err != nil {
		t.Fatal(err)
	}
	bias := computetest.UploadF32(t, b, computetest.Randn(21, out), out)
	read := func(x compute.Tensor, n int) []float32 {
		got := make([]float32, n)
		if err := b.ReadFloat32(x, got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	alloc := func(rows, n int) compute.Tensor {
		x, err := b.Alloc(compute.F32, rows, n)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	for _, rows := range []int{1, 64, 100} {
		gv, uv := computetest.Randn(uint64(2*rows), rows*in), computetest.Randn(uint64(2*rows+1), rows*in)
		gate, up := computetest.UploadF32(t, b, gv, rows, in), computetest.UploadF32(t, b, uv, rows, in)
		got := alloc(rows, out)
		fused := b.(compute.SiLUMulMatMuler).SiLUMulMatMul(got, gate, up, w, bias, rows)
		if want := b.(*backend).wgmma && rows >= kernels.WGFrom; fused != want {
			t.Fatalf("%d rows: SiLUMulMatMul reports %v, want %v", rows, fused, want)
		}
		if !fused {
			continue
		}
		computetest.SameBits(t, fmt.Sprintf("%d rows: gate after SiLUMulMatMul", rows), read(gate, rows*in), gv)
		computetest.SameBits(t, fmt.Sprintf("%d rows: up after SiLUMulMatMul", rows), read(up, rows*in), uv)
		prod, want := alloc(rows, in), alloc(rows, out)
		b.SiLUMul(prod, gate, up, rows)
		b.MatMul(want, prod, w, bias, rows)
		computetest.SameBits(t, fmt.Sprintf("%d rows: SiLUMulMatMul against SiLUMul then MatMul", rows), read(got, rows*out), read(want, rows*out))
	}
}

// TestFoldedQuartersEqualOps checks a one-matrix matmul in quarters followed by AddRMSNorm of its
// output, the norm adding the quarters itself (rmsnorm_row with quarters set), against the same
// with mma_sum_quarters launched (TFD_CUDA_FOLD_QUARTERS=0), bit for bit: the matmul's output,
// the residual and the norm's output, with a bias and without, for rows in whole tiles and
// ragged ones; and that a matmul whose output goes elsewhere first still gets its sum.
func TestFoldedQuartersEqualOps(t *testing.T) {
	b := openCUDA(t)
	c := b.(*backend)
	if !c.wgmma {
		t.Skip("no warpgroup tile on this GPU: no quarters to fold")
	}
	defer func(on bool) { c.foldQuarters = on }(c.foldQuarters)
	const in, d = 2048, 4096
	w, err := b.Upload(compute.BF16, []int{d, in}, computetest.Encode(compute.BF16, computetest.Randn(40, d*in)))
	if err != nil {
		t.Fatal(err)
	}
	bias := computetest.UploadF32(t, b, computetest.Randn(41, d), d)
	norm := computetest.UploadF32(t, b, computetest.Randn(42, d), d)
	read := func(x compute.Tensor, n int) []float32 {
		got := make([]float32, n)
		if err := b.ReadFloat32(x, got); err != nil {
			t.Fatal(err)
		}
		return got
	}
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
				return read(o, rows*d), read(r, rows*d), read(hn, rows*d)
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

// TestFoldedQuartersKeepEngineBits runs prompts of 64 and 100 rows through the bundled model with
// the norms adding the quarters of o and down and without, and demands the same logits, every
// row's, bit for bit.
func TestFoldedQuartersKeepEngineBits(t *testing.T) {
	b := openCUDA(t)
	c := b.(*backend)
	if !c.wgmma {
		t.Skip("no warpgroup tile on this GPU: no quarters to fold")
	}
	defer func(on bool) { c.foldQuarters = on }(c.foldQuarters)
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
