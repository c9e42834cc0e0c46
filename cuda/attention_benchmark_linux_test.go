package cuda

import (
	"fmt"
	"math"
	"testing"

	"tfd/compute"
	"tfd/compute/computetest"
	"tfd/kernels"
)

// The 8B checkpoint's attention: 32 query heads of 128 elements, 8 kv heads.
const (
	heads8B   = 32
	kvHeads8B = 8
	hd8B      = 128
)

// pool8B returns a one-layer F32 pool of the 8B's attention shape holding slots slots of random
// keys and values (seeds seed and seed+1), freed when the benchmark ends.
func pool8B(b *testing.B, g compute.Backend, slots int, seed uint64) compute.KV {
	const st = kvHeads8B * hd8B
	kv, err := g.NewKV(compute.KVSpec{Layers: 1, KVHeads: kvHeads8B, HeadDim: hd8B, Slots: slots})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { g.FreeKV(kv) })
	slotOf := make([]int32, slots)
	for i := range slotOf {
		slotOf[i] = int32(i)
	}
	k, v := computetest.UploadF32(b, g, computetest.Randn(seed, slots*st), slots, st),
		computetest.UploadF32(b, g, computetest.Randn(seed+1, slots*st), slots, st)
	zeros, at := computetest.UploadI32(b, g, make([]int32, slots)), computetest.UploadI32(b, g, slotOf)
	g.KVWrite(kv, 0, k, v, zeros, at, slots)
	if err := g.Sync(); err != nil {
		b.Fatal(err)
	}
	for _, t := range []compute.Tensor{k, v, zeros, at} {
		g.Free(t)
	}
	return kv
}

// BenchmarkPrefillAttention times one layer's attention of the 8B checkpoint's shape (32 query
// heads of 128, 8 kv heads, an F32 pool) for a 4,096-token prompt as BenchmarkEight's prefill
// runs it, without loading a checkpoint: random keys and values in a pool of 4,096 slots, and
// q for a forward of 256 rows at positions at … at+255 of one session (attention_tile_H, the
// kernel such rows take), or the whole prompt's 16 forwards one after another ("prompt"). It
// reports µs a pass (one launch, or the prompt's 16), and the fused multiply-adds of the scores
// and of the values' sums per second (2·heads·hd a key a row), against which the CUDA cores'
// F32 rate is 33.5 T on an H200. Graphs off, no sync between launches.
//
//	./bin/cuda.test -test.run '^$' -test.bench PrefillAttention -test.benchtime 20x
func BenchmarkPrefillAttention(b *testing.B) {
	const (
		prompt  = 4096
		rows    = 256
		heads   = heads8B
		kvHeads = kvHeads8B
		hd      = hd8B
		qw      = heads * hd
	)
	g := openCUDA(b)
	setGraphs(g, false)
	kv := pool8B(b, g, prompt, 50)
	q := computetest.UploadF32(b, g, computetest.Randn(52, rows*qw), rows, qw)
	dst := computetest.UploadF32(b, g, make([]float32, rows*qw), rows, qw)
	bases := computetest.UploadI32(b, g, make([]int32, rows))
	scale := float32(1 / math.Sqrt(hd))
	// forward f's positions: 256·f … 256·f+255.
	positions := make([]compute.Tensor, prompt/rows)
	for f := range positions {
		p := make([]int32, rows)
		for i := range p {
			p[i] = int32(f*rows + i)
		}
		positions[f] = computetest.UploadI32(b, g, p)
	}
	if l := kernels.AttentionLaunch(rows, heads, heads/kvHeads, hd, kernels.KVF32); l.Split.Kernel != "attention_tile_128_f32" {
		b.Logf("256 rows of one session take %s", l.Split.Kernel)
	}
	for _, c := range []struct {
		name     string
		forwards []int
	}{
		{"at=0", []int{0}},
		{"at=1792", []int{7}},
		{"at=3840", []int{15}},
		{"prompt", []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}},
	} {
		keys := 0 // (row, key) pairs of one pass over c's forwards
		for _, f := range c.forwards {
			keys += rows*f*rows + rows*(rows+1)/2
		}
		b.Run(fmt.Sprintf("rows=%d,%s", rows, c.name), func(b *testing.B) {
			attend := func() {
				for _, f := range c.forwards {
					g.Attention(dst, q, kv, 0, bases, positions[f], nil, rows, heads, scale)
				}
			}
			s := timeAttention(b, g, attend)
			b.ReportMetric(s*1e6, "µs/pass")
			b.ReportMetric(float64(keys)*2*heads*hd/s/1e12, "TFMA/s")
		})
	}
}

// BenchmarkDecodeAttention times one layer's attention of the 8B checkpoint's shape (32 query
// heads of 128, 8 kv heads, an F32 pool) for a round of decoding streams as BenchmarkEight's
// streams=N runs it, without loading a checkpoint: rows sessions of random keys and values, each
// row at position at of its own session (so the rows share no keys, and the round takes
// attention_warp, not the tiles). It reports µs a launch and the bytes of keys and values a
// second the launch reads (each kv head once: four query heads share one).
//
//	./bin/cuda.test -test.run '^$' -test.bench DecodeAttention -test.benchtime 200x
func BenchmarkDecodeAttention(b *testing.B) {
	const (
		st = kvHeads8B * hd8B
		qw = heads8B * hd8B
	)
	g := openCUDA(b)
	setGraphs(g, false)
	for _, c := range []struct{ rows, at int }{{1, 130}, {32, 130}, {64, 130}, {64, 1000}, {1, 4000}} {
		b.Run(fmt.Sprintf("rows=%d,at=%d", c.rows, c.at), func(b *testing.B) {
			n := c.at + 1 // keys a row: session r's are slots r·n … r·n+n−1
			kv := pool8B(b, g, c.rows*n, 60)
			bs, ps := make([]int32, c.rows), make([]int32, c.rows)
			for r := range bs {
				bs[r], ps[r] = int32(r*n), int32(c.at)
			}
			q := computetest.UploadF32(b, g, computetest.Randn(59, c.rows*qw), c.rows, qw)
			dst := computetest.UploadF32(b, g, make([]float32, c.rows*qw), c.rows, qw)
			bases, positions := computetest.UploadI32(b, g, bs), computetest.UploadI32(b, g, ps)
			scale := float32(1 / math.Sqrt(hd8B))
			attend := func() { g.Attention(dst, q, kv, 0, bases, positions, nil, c.rows, heads8B, scale) }
			s := timeAttention(b, g, attend)
			b.ReportMetric(s*1e6, "µs/launch")
			b.ReportMetric(float64(c.rows*n*2*st*4)/s/1e9, "GB/s")
		})
	}
}

// timeAttention runs attend once to warm up, then b.N times, and returns the seconds one took,
// the GPU's work waited for at both ends.
func timeAttention(b *testing.B, g compute.Backend, attend func()) float64 {
	attend()
	if err := g.Sync(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		attend()
	}
	if err := g.Sync(); err != nil {
		b.Fatal(err)
	}
	return b.Elapsed().Seconds() / float64(b.N)
}
