package cpu

import (
	"fmt"
	"testing"

	"tfd/compute"
	"tfd/compute/computetest"
)

// BenchmarkQuantMatMul compares MatMul with Q8_0 and Q4_0 weights against BF16 weights on the
// layers of a Qwen3-0.6B-shaped model (hidden 1024, q heads 16×128, MLP 3072), for one row
// (decode) and small batches; the dtypes of one shape and row count run side by side. GB/s counts
// the weight bytes streamed as each dtype keeps them, Gw/s the weights (multiply-adds per row).
// Run with -cpu 1,2 for one and two threads.
func BenchmarkQuantMatMul(b *testing.B) {
	for _, s := range []struct {
		name    string
		in, out int
	}{{"gate", 1024, 3072}, {"down", 3072, 1024}, {"q", 1024, 2048}} {
		for _, rows := range []int{1, 2, 4, 16, 64} {
			for _, dt := range []compute.DType{compute.BF16, compute.Q8_0, compute.Q4_0} {
				b.Run(fmt.Sprintf("%s-%dx%d/rows=%d/%v", s.name, s.out, s.in, rows, dt), func(b *testing.B) {
					benchQuantMatMul(b, dt, s.in, s.out, rows)
				})
			}
		}
	}
}

// BenchmarkAffineMatMul is BenchmarkQuantMatMul's decode of the gate layer with MLX weights
// (BF16 scales, groups of 64) beside Q4_0: 4 and 8 bits run in assembly, 6 bits in Go.
func BenchmarkAffineMatMul(b *testing.B) {
	dts := []compute.DType{compute.Q4_0}
	for _, bits := range []int{4, 8, 6} {
		affine, _ := compute.Affine(bits, 64, compute.BF16)
		dts = append(dts, affine)
	}
	for _, dt := range dts {
		b.Run(dt.String(), func(b *testing.B) { benchQuantMatMul(b, dt, 1024, 3072, 1) })
	}
}

// BenchmarkQuantMatMulCold is BenchmarkQuantMatMul's one-row gate layer with the weights read
// from memory rather than the caches, as a decode step of a real model reads them: each op takes
// the next of enough copies of the matrix (96 MiB of them in all) that none is cached when its
// turn comes again.
func BenchmarkQuantMatMulCold(b *testing.B) {
	for _, dt := range []compute.DType{compute.BF16, compute.Q8_0, compute.Q4_0} {
		b.Run(dt.String(), func(b *testing.B) { benchQuantMatMulCopies(b, dt, 1024, 3072, 1, 96<<20) })
	}
}

func benchQuantMatMul(b *testing.B, dtype compute.DType, in, out, rows int) {
	benchQuantMatMulCopies(b, dtype, in, out, rows, 0)
}

// benchQuantMatMulCopies runs MatMul over copies of one matrix of dtype, at least one and as many
// as total bytes of weights take, in turn.
func benchQuantMatMulCopies(b *testing.B, dtype compute.DType, in, out, rows, total int) {
	be := newTest(b)
	x := ften(b, be, computetest.Randn(1, rows*in), rows, in)
	var ws []*tensor
	var bytes float64
	if dtype.Quantized() {
		m := quantized(b, dtype, out, in, 2)
		bytes = float64(len(m.data))
		for range max(1, total/len(m.data)) {
			ws = append(ws, m.upload(b, be))
		}
	} else {
		v := truncated(computetest.Randn(2, out*in), dtype)
		bytes = float64(dtype.Size() * in * out)
		for range max(1, total/int(bytes)) {
			ws = append(ws, hten(b, be, dtype, v, out, in))
		}
	}
	dst := ften(b, be, nil, rows, out)
	b.SetBytes(int64(bytes))
	b.ResetTimer()
	i := 0
	for b.Loop() {
		be.MatMul(dst, x, ws[i%len(ws)], nil, rows)
		i++
	}
	sec := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(bytes/sec/1e9, "GB/s")
	b.ReportMetric(float64(in*out*rows)/sec/1e9, "Gw/s")
}

// BenchmarkQDots measures the kernels alone, on one group of four weight rows of 1024 elements
// held in the L1 cache: the arithmetic rate without memory, per kernel kind, one, two or four rows
// (four with AVX2 and VNNI only).
func BenchmarkQDots(b *testing.B) {
	for _, dt := range []compute.DType{compute.Q8_0, compute.Q4_0} {
		for _, nr := range []int{1, 2, 4} {
			for _, kind := range []string{"avx2", "vnni", "neon", "sdot"} {
				switch {
				case nr == 4 && (kind == "neon" || kind == "sdot"):
					continue
				case kind == "avx2" || kind == "vnni":
					if !useQuantAsm || kind == "vnni" && !hasVNNI {
						continue
					}
				case kind == "neon" || kind == "sdot":
					if !hasNEON || kind == "sdot" && !hasSDOT {
						continue
					}
				}
				b.Run(fmt.Sprintf("%v/rows=%d/%s", dt, nr, kind), func(b *testing.B) {
					savedVNNI, savedSDOT := useVNNI, useSDOT
					useVNNI, useSDOT = kind == "vnni", kind == "sdot"
					defer func() { useVNNI, useSDOT = savedVNNI, savedSDOT }()
					const in = 1024
					be := newTest(b)
					q := quantized(b, dt, 8, in, 1).upload(b, be).q
					act := make([]actBlock, nr*in/32)
					x := computetest.Randn(3, nr*in)
					(&quantizeActs{dst: act, x: x, in: in}).run(nil, 0, nr)
					w, sb := q.group(0)
					var res [32]float32
					for b.Loop() {
						if nr == 4 {
							qdots4(res[:], 8, q, 0, 1, act, in/32)
						} else {
							qdots((*[16]float32)(res[:16]), q, w, sb, act, in/32, nr)
						}
					}
					b.ReportMetric(float64(q.width*in*nr)*float64(b.N)/b.Elapsed().Seconds()/1e9, "Gmac/s")
				})
			}
		}
	}
}
