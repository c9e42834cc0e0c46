package cpu

import (
	"fmt"
	"testing"

	"tfd/compute"
	"tfd/compute/computetest"
)

// BenchmarkMatMul reports, per shape and row count, the weight bytes streamed per second (b.SetBytes:
// the MB/s column, and GB/s) and the arithmetic rate (GFLOP/s, 2 per multiply-add).
func BenchmarkMatMul(b *testing.B) {
	for _, s := range []struct{ in, out int }{{384, 1024}, {384, 8192}, {1024, 384}, {4096, 4096}} {
		for _, rows := range []int{1, 64} {
			b.Run(fmt.Sprintf("%dx%d/rows=%d", s.out, s.in, rows), func(b *testing.B) {
				benchMatMul(b, compute.F32, s.in, s.out, rows)
			})
		}
	}
}

// BenchmarkMatMulHalf is BenchmarkMatMul with 16-bit weights (BenchmarkMatMul's, truncated),
// widened in the kernels; GB/s counts the 16-bit bytes streamed.
func BenchmarkMatMulHalf(b *testing.B) {
	for _, dtype := range halfTypes {
		for _, s := range []struct{ in, out int }{{384, 1024}, {384, 8192}, {1024, 384}, {4096, 4096}} {
			for _, rows := range []int{1, 64} {
				b.Run(fmt.Sprintf("%v/%dx%d/rows=%d", dtype, s.out, s.in, rows), func(b *testing.B) {
					benchMatMul(b, dtype, s.in, s.out, rows)
				})
			}
		}
	}
}

// BenchmarkMatMulGo is BenchmarkMatMul's first shape with the pure-Go kernels, which are what
// machines without AVX2/FMA (and arm64) run, for each weight dtype.
func BenchmarkMatMulGo(b *testing.B) {
	saved := useAsm
	useAsm = false
	defer func() { useAsm = saved }()
	for _, dtype := range []compute.DType{compute.F32, compute.BF16, compute.F16} {
		for _, rows := range []int{1, 64} {
			name := fmt.Sprintf("%v/1024x384/rows=%d", dtype, rows)
			if dtype == compute.F32 {
				name = fmt.Sprintf("1024x384/rows=%d", rows) // as before 16-bit weights
			}
			b.Run(name, func(b *testing.B) { benchMatMul(b, dtype, 384, 1024, rows) })
		}
	}
}

func benchMatMul(b *testing.B, dtype compute.DType, in, out, rows int) {
	be := newTest(b)
	x := ften(b, be, computetest.Randn(1, rows*in), rows, in)
	w := ften(b, be, computetest.Randn(2, out*in), out, in)
	if dtype != compute.F32 {
		w = hten(b, be, dtype, truncated(w.f, dtype), out, in)
	}
	dst := ften(b, be, nil, rows, out)
	bytes := float64(dtype.Size() * in * out)
	b.SetBytes(int64(bytes))
	b.ResetTimer()
	for b.Loop() {
		be.MatMul(dst, x, w, nil, rows)
	}
	sec := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(bytes/sec/1e9, "GB/s")
	b.ReportMetric(float64(2*in*out*rows)/sec/1e9, "GFLOP/s")
}

// BenchmarkAttention is one layer's attention of a 14-head, 2-kv-head, 64-dim model: one decode row
// at position ctx-1, or a 64-row prefill chunk ending there.
func BenchmarkAttention(b *testing.B) {
	for _, dt := range []compute.DType{compute.F32, compute.F16} {
		for _, ctx := range []int{512, 4096} {
			for _, rows := range []int{1, 64} {
				b.Run(fmt.Sprintf("kv=%v/ctx=%d/rows=%d", dt, ctx, rows), func(b *testing.B) {
					be := newTest(b)
					const kvHeads, heads, hd = 2, 14, 64
					spec := kvSpec(1, kvHeads, hd, ctx)
					spec.DType = dt
					kvi, _ := be.NewKV(spec)
					k, v := computetest.Randn(1, ctx*kvHeads*hd), computetest.Randn(2, ctx*kvHeads*hd)
					if p := kvi.(*kvPool); p.half() {
						narrowKV(p.kh[0], k)
						narrowKV(p.vh[0], v)
					} else {
						copy(p.k[0], k)
						copy(p.v[0], v)
					}
					q, dst := ften(b, be, computetest.Randn(3, rows*heads*hd), rows, heads*hd), ften(b, be, nil, rows, heads*hd)
					pos := make([]int32, rows)
					for r := range pos {
						pos[r] = int32(ctx - rows + r)
					}
					bases, positions := iten(b, be, make([]int32, rows), rows), iten(b, be, pos, rows)
					for b.Loop() {
						be.Attention(dst, q, kvi, 0, bases, positions, nil, rows, heads, 0.125)
					}
				})
			}
		}
	}
}

// BenchmarkSmallOp measures the fixed cost of an op that wakes the pool: an Add of 64 Ki floats.
func BenchmarkSmallOp(b *testing.B) {
	be := newTest(b)
	const n = 1 << 16
	x := ften(b, be, computetest.Randn(1, n), 1, n)
	for b.Loop() {
		be.Add(x, x, x, 1)
	}
}
