package cuda

import (
	"fmt"
	"testing"

	"tfd/compute"
	"tfd/compute/computetest"
	"tfd/engine/enginetest"
	"tfd/kernels"
	"tfd/scheduler/schedulertest"
)

// BF16 matmuls run on the tensor cores by default, so every other test of this package checks
// them; these run the matmul checks, the engine against the oracle and shared rounds against solo
// replies on the CUDA cores (TFD_CUDA_MMA=0), each with the backend opened under it.

// onCUDACores sets TFD_CUDA_MMA=0 for the rest of the test, so that the backends it opens run
// BF16 matmuls on the CUDA cores (matmul_bf16_R).
func onCUDACores(t *testing.T) { t.Setenv("TFD_CUDA_MMA", "0") }

func TestMatMulMatchesCPUOnCUDACores(t *testing.T) {
	onCUDACores(t)
	computetest.CheckMatMul(t, newPair(t))
}

func TestMatMulIsBatchInvariantOnCUDACores(t *testing.T) {
	onCUDACores(t)
	computetest.CheckMatMulBatchInvariance(t, openCUDA(t))
}

func TestMatMulRowGroupsAgreeOnCUDACores(t *testing.T) {
	onCUDACores(t)
	computetest.CheckMatMulRowGroups(t, openCUDA(t))
}

func TestMatMulsEqualMatMulOnCUDACores(t *testing.T) {
	onCUDACores(t)
	computetest.CheckMultiMatMul(t, openCUDA(t))
}

func TestEngineMatchesOracleOnCUDACores(t *testing.T) {
	onCUDACores(t)
	enginetest.CheckBackend(t, openCUDA(t))
}

func TestSharedAndDraftedEqualSoloOnCUDACores(t *testing.T) {
	onCUDACores(t)
	schedulertest.CheckSharedAndDrafted(t, openCUDA(t))
}

// TestTensorCoresMoveBits checks the premise of the tests above and of the rest: by default a
// BF16 matmul runs on the tensor cores, and with TFD_CUDA_MMA=0 on another kernel, whose bits
// differ on random data.
func TestTensorCoresMoveBits(t *testing.T) {
	mma := computetest.MatMulOnce(t, openCUDA(t))
	onCUDACores(t)
	lanes := computetest.MatMulOnce(t, openCUDA(t))
	same := true
	for i := range lanes {
		same = same && lanes[i] == mma[i]
	}
	if same {
		t.Fatal("the default and TFD_CUDA_MMA=0 give the same bits: one of them did not run its kernel")
	}
}

// TestPackedWeightsKeepBits checks that BF16 matrices stored in the matrix unit's packed order,
// as Upload stores them with the tensor cores on, give the bits of the same matrices kept
// row-major, for every tile size (1, 7: S = 1; 16, 33: S = 2; 256: S = 4) and so both ways of
// streaming them (the SHARED ring for S = 1 and 2, registers for 4), with a ragged last band and
// three matrices in one launch, one with a bias; and that a packed table embeds as the row-major
// one does (a tied embedding).
func TestPackedWeightsKeepBits(t *testing.T) {
	b := openCUDA(t)
	const in = 4096
	outs := [3]int{1000, 256, 40} // 1000 and 40: bands of 8 and 8 rows past the matrix
	var packed, rowMajor [3]compute.Tensor
	for m, out := range outs {
		data := computetest.Encode(compute.BF16, computetest.Randn(uint64(10+m), out*in))
		p, err := b.Upload(compute.BF16, []int{out, in}, data)
		if err != nil {
			t.Fatal(err)
		}
		r, err := uploadAs(b, compute.BF16, []int{out, in}, data, false)
		if err != nil {
			t.Fatal(err)
		}
		if !isPacked(p) || isPacked(r) {
			t.Fatal("Upload with the tensor cores on did not pack the matrix, or upload(…, false) did")
		}
		packed[m], rowMajor[m] = p, r
	}
	bias := computetest.UploadF32(t, b, computetest.Randn(3, outs[1]), outs[1])
	for _, rows := range []int{1, 7, 16, 33, 256} {
		x := computetest.UploadF32(t, b, computetest.Randn(uint64(rows), rows*in), rows, in)
		biases := [3]compute.Tensor{nil, bias, nil}
		got, want := matMuls(t, b, x, packed, biases, outs, rows), matMuls(t, b, x, rowMajor, biases, outs, rows)
		for m := range outs {
			computetest.SameBits(t, fmt.Sprintf("%d rows, matrix %d packed against row-major", rows, m), got[m], want[m])
		}
		b.Free(x)
	}
	tokens := []int32{0, 999, 17, 504, 8}
	ids, err := b.Alloc(compute.I32, len(tokens))
	if err != nil {
		t.Fatal(err)
	}
	b.WriteInt32(ids, tokens)
	embed := func(table compute.Tensor) []float32 {
		x, err := b.Alloc(compute.F32, len(tokens), in)
		if err != nil {
			t.Fatal(err)
		}
		b.Embed(x, table, ids, len(tokens))
		got := make([]float32, len(tokens)*in)
		if err := b.ReadFloat32(x, got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	computetest.SameBits(t, "rows embedded from the packed table against the row-major one", embed(packed[0]), embed(rowMajor[0]))
}

// TestTileSizesKeepBits checks that kernels.MMATile's choice of S cannot move a bit: the same
// matmuls (three matrices in one launch, one with a bias, a ragged last band) with every S forced
// give the bits of S = 1, at row counts where the default picks each S.
func TestTileSizesKeepBits(t *testing.T) {
	b := openCUDA(t)
	defer setMMATile(b, 0)
	const in = 2048
	outs := [3]int{1000, 256, 40}
	var w [3]compute.Tensor
	for m, out := range outs {
		t0, err := b.Upload(compute.BF16, []int{out, in}, computetest.Encode(compute.BF16, computetest.Randn(uint64(20+m), out*in)))
		if err != nil {
			t.Fatal(err)
		}
		w[m] = t0
	}
	bias := computetest.UploadF32(t, b, computetest.Randn(4, outs[1]), outs[1])
	for _, rows := range []int{1, 9, 32, 70, 130} {
		x := computetest.UploadF32(t, b, computetest.Randn(uint64(30+rows), rows*in), rows, in)
		run := func(s int) [3][]float32 {
			setMMATile(b, s)
			return matMuls(t, b, x, w, [3]compute.Tensor{nil, bias, nil}, outs, rows)
		}
		want := run(1)
		for _, c := range []struct {
			s   int
			wgt string
		}{{0, ""}, {2, ""}, {4, ""}, {-2, ""}, {kernels.WGRows, "0"}, {-kernels.WGRows, "0"},
			{kernels.WGRows, "128:4"}, {kernels.WGRows, "128:1"}, {kernels.WGRows, "64:4"}, {kernels.WGRows, "64:1"}} {
			// -2: S = 2 splitting x in every group rather than once (mma_split_x); kernels.WGRows:
			// the warpgroup's tile (matmul_wg4_bf16_N, S = 4 where the GPU has no wgmma), and
			// -kernels.WGRows the same a quarter of K a group (matmul_wg1_bf16_N and
			// mma_sum_quarters); with wgt N:P, the copy engine's tile instead
			// (matmul_wgtP_bf16_N).
			s := c.s
			setSplitX(b, s > 0 || s == -kernels.WGRows)
			if s == -kernels.WGRows {
				setWGQuarters(b, "1")
			}
			setWGT(b, c.wgt)
			got := run(max(s, -s))
			setSplitX(b, true)
			setWGQuarters(b, "")
			setWGT(b, "")
			for m := range outs {
				computetest.SameBits(t, fmt.Sprintf("%d rows, matrix %d, S = %d, TFD_CUDA_WGT=%q against S = 1 (0: the default; -2: x split in every group; -%d: quarters)", rows, m, s, c.wgt, kernels.WGRows), got[m], want[m])
			}
		}
		b.Free(x)
	}
}

// matMuls runs the matrices w (of outs outputs each, with biases) on rows rows of x in one
// MatMuls and returns each matrix's output.
func matMuls(t *testing.T, b compute.Backend, x compute.Tensor, w, bias [3]compute.Tensor, outs [3]int, rows int) [3][]float32 {
	t.Helper()
	var dst [3]compute.Tensor
	for m, out := range outs {
		d, err := b.Alloc(compute.F32, rows, out)
		if err != nil {
			t.Fatal(err)
		}
		dst[m] = d
	}
	b.(compute.MultiMatMul).MatMuls(dst, x, w, bias, rows)
	var got [3][]float32
	for m, out := range outs {
		got[m] = make([]float32, rows*out)
		if err := b.ReadFloat32(dst[m], got[m]); err != nil {
			t.Fatal(err)
		}
		b.Free(dst[m])
	}
	return got
}
