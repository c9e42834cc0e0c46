package cuda

import (
	"fmt"
	"testing"

	"tfd/compute"
	"tfd/compute/computetest"
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
