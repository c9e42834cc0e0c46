package cuda

import (
	"fmt"
	"testing"

	"tfd/compute"
	"tfd/compute/computetest"
)

// BenchmarkQuantMatVec multiplies an 8192×8192 matrix of each quantized format (and BF16, for
// comparison) by 1 and 16 rows, and an 8B model's smallest and longest (1024×4096, 4096×12288)
// by 1, and reports the weights' bytes read per second, as
// BenchmarkMatVec does: b.N launches (the activations' quantization and the product) with one
// Sync at the end, graphs off.
func BenchmarkQuantMatVec(b *testing.B) {
	affine, err := compute.Affine(4, 64, compute.BF16)
	if err != nil {
		b.Fatal(err)
	}
	for _, dt := range []compute.DType{compute.BF16, compute.Q8_0, compute.Q4_0, affine} {
		for _, s := range []struct{ out, in, rows int }{{8192, 8192, 1}, {8192, 8192, 16}, {1024, 4096, 1}, {4096, 12288, 1}} {
			var data []byte
			out, in, rows := s.out, s.in, s.rows
			b.Run(fmt.Sprintf("%v/%dx%d/rows=%d", dt, out, in, rows), func(b *testing.B) {
				if data == nil {
					if dt == compute.BF16 {
						data = computetest.Encode(dt, computetest.Randn(1, out*in))
					} else {
						data = computetest.QuantizedWeights(b, dt, out, in, 1)
					}
				}
				benchWeightBytes(b, dt, data, out, in, rows)
			})
		}
	}
}

// benchWeightBytes times MatMul of rows rows with the out×in weights data of dtype dt and reports
// the weights' bytes read per second.
func benchWeightBytes(b *testing.B, dt compute.DType, data []byte, out, in, rows int) {
	g := openCUDA(b)
	setGraphs(g, false)
	w, err := g.Upload(dt, []int{out, in}, data)
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
	b.ReportMetric(float64(len(data))*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
}
