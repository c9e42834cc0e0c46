package cuda

import (
	"fmt"
	"strings"
	"testing"

	"tfd/compute"
	"tfd/compute/computetest"
)

// BenchmarkEightShapes runs the matmuls of one layer of an 8B model (Qwen3-8B's shapes) one launch
// at a time, as the forward does (q, k and v in one launch, gate and up in another), for 1, 8 and
// 16 rows, on the CUDA cores (TFD_CUDA_MMA=0, "lanes") and on the tensor cores with the weights
// packed ("mma"), and reports the weights' bytes read per second and the time of one launch. q
// and k alone and the 8192×8192 matrix of BenchmarkMatVec are there for comparison with the
// kernels' other benchmarks. No sync between launches, so they overlap as in a forward.
func BenchmarkEightShapes(b *testing.B) {
	shapes := []struct {
		name string
		outs []int // the outputs of each matrix in the launch; one x of in elements
		in   int
	}{
		{"q", []int{4096}, 4096},
		{"qkv", []int{4096, 1024, 1024}, 4096},
		{"k", []int{1024}, 4096},
		{"gateup", []int{14336, 14336}, 4096},
		{"down", []int{4096}, 14336},
		{"8192x8192", []int{8192}, 8192},
	}
	for _, rows := range []int{1, 8, 16} {
		for _, sh := range shapes {
			if rows > 1 && sh.name != "qkv" && sh.name != "gateup" {
				continue
			}
			for _, path := range []matmulPath{lanes, packed} {
				name := fmt.Sprintf("%s/rows=%d/%s", sh.name, rows, map[matmulPath]string{lanes: "lanes", packed: "mma"}[path])
				b.Run(name, func(b *testing.B) { benchMatMuls(b, path, sh.outs, sh.in, rows) })
			}
		}
	}
}

// benchMatMuls is benchMatMul for up to three BF16 matrices of outs[m] outputs sharing one x of
// in elements (one launch on the tensor cores, one a matrix on the CUDA cores).
func benchMatMuls(b *testing.B, path matmulPath, outs []int, in, rows int) {
	b.Setenv("TFD_CUDA_MMA", map[bool]string{true: "0", false: "1"}[path == lanes])
	g := openCUDA(b)
	setGraphs(g, false)
	var w, dst [3]compute.Tensor
	bytes := 0
	for m, out := range outs {
		key := [3]int{int(compute.BF16), out, in}
		if benchWeights[key] == nil {
			benchWeights[key] = computetest.Encode(compute.BF16, computetest.Randn(uint64(1+m), out*in))
		}
		t, err := uploadAs(g, compute.BF16, []int{out, in}, benchWeights[key], path == packed)
		if err != nil {
			b.Fatal(err)
		}
		w[m] = t
		if dst[m], err = g.Alloc(compute.F32, rows, out); err != nil {
			b.Fatal(err)
		}
		bytes += 2 * out * in
	}
	x := computetest.UploadF32(b, g, computetest.Randn(2, rows*in), rows, in)
	mm := g.(compute.MultiMatMul)
	mm.MatMuls(dst, x, w, [3]compute.Tensor{}, rows) // warm up
	if err := g.Sync(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		mm.MatMuls(dst, x, w, [3]compute.Tensor{}, rows)
	}
	if err := g.Sync(); err != nil {
		b.Fatal(err)
	}
	s := b.Elapsed().Seconds()
	b.ReportMetric(float64(bytes)*float64(b.N)/s/1e9, "GB/s")
	b.ReportMetric(s/float64(b.N)*1e6, "µs/launch")
	if rows > 1 {
		// 2·rows·in·Σouts multiply-adds' operations: rows times the weights' bytes.
		b.ReportMetric(float64(rows)*float64(bytes)*float64(b.N)/s/1e12, "TFLOP/s")
	}
}

// BenchmarkTileSizes measures the packed tensor-core matmul of a Qwen3-8B layer's matrices (the
// make_8b.py checkpoint's) at 16 to 256 rows with each tile size S the kernels have (1, 2, 4, and
// 64 for the warpgroup's tile, matmul_wg4_bf16_N, and a quarter of K a group, ",quarters":
// matmul_wg1_bf16_N; the same bits), to choose S by shape as well as rows; S = 2 also with x
// split in every group (",xsplit=0") rather than once (mma_split_x).
func BenchmarkTileSizes(b *testing.B) {
	shapes := []struct {
		name string
		outs []int
		in   int
	}{
		{"qkv", []int{4096, 1024, 1024}, 4096},
		{"o", []int{4096}, 4096},
		{"gateup", []int{12288, 12288}, 4096},
		{"down", []int{4096}, 12288},
	}
	for _, rows := range []int{16, 32, 64, 128, 256} {
		for _, sh := range shapes {
			for _, s := range []string{"1", "2", "2,xsplit=0", "4", "64", "64,quarters", "wgt=128:4", "wgt=128:1", "wgt=64:4", "wgt=64:1"} {
				b.Run(fmt.Sprintf("%s/rows=%d/S=%s", sh.name, rows, s), func(b *testing.B) {
					// wgt=N:P: the copy engine's tile (matmul_wgtP_bf16_N); the others not.
					tile := s
					wgt, ok := strings.CutPrefix(s, "wgt=")
					b.Setenv("TFD_CUDA_WGT", "0")
					if ok {
						b.Setenv("TFD_CUDA_WGT", wgt)
						tile = "64"
					}
					tile, noSplit := strings.CutSuffix(tile, ",xsplit=0")
					tile, quarters := strings.CutSuffix(tile, ",quarters")
					b.Setenv("TFD_CUDA_MMA_TILE", tile)
					if noSplit {
						b.Setenv("TFD_CUDA_XSPLIT", "0")
					}
					b.Setenv("TFD_CUDA_WG_QUARTERS", "0")
					if quarters {
						b.Setenv("TFD_CUDA_WG_QUARTERS", "1")
					}
					benchMatMuls(b, packed, sh.outs, sh.in, rows)
				})
			}
		}
	}
}
