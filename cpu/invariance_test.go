package cpu

import (
	"math"
	"testing"

	"tfd/compute"
	"tfd/compute/computetest"
)

// Batch invariance, bit for bit: a row computed alone must equal the same row computed among 1, 2,
// 7 or 33 other rows, at the front, in the middle or at the back, with GOMAXPROCS 1 or many.
// Sizes are large enough that the pool splits the work and that MatMul rows cross row blocks.

// placements yields, for each number of other rows and each index of the row under test, a batch
// size and that index.
func placements(f func(rows, at int)) {
	for _, others := range []int{1, 2, 7, 33} {
		for _, at := range []int{0, others / 2, others} {
			f(others+1, at)
		}
	}
}

// batchRows returns rows×width random floats with row at replaced by the row under test.
func batchRows(seed uint64, rows, width, at int, row []float32) []float32 {
	all := computetest.Randn(seed, rows*width)
	copy(all[at*width:], row)
	return all
}

// invariant runs one op with the row alone and in every placement and GOMAXPROCS, and compares
// the row's output bits. op computes rows rows of input whose row at is the row under test and
// returns that row's output.
func invariant(t *testing.T, op func(rows, at int) []float32) {
	t.Helper()
	var alone []float32
	withProcs(1, func() { alone = append([]float32(nil), op(1, 0)...) })
	for _, procs := range procsToTry {
		withProcs(procs, func() {
			computetest.SameBits(t, name("alone", procs), op(1, 0), alone)
			placements(func(rows, at int) {
				computetest.SameBits(t, name(rows, at, procs), op(rows, at), alone)
			})
		})
	}
}

func TestMatMulInvariance(t *testing.T) {
	forWeightKernels(t, func(t *testing.T) {
		for _, c := range []struct {
			dtype compute.DType
			in    int
		}{{compute.F32, 389}, {compute.F32, 1100}, {compute.BF16, 389}, {compute.BF16, 1100}, {compute.F16, 389}, {compute.F16, 1100}} { // 1100: K-blocked
			t.Run(name(c.dtype, c.in), func(t *testing.T) {
				b := newTest(t)
				const out = 301
				in := c.in
				w, _ := weightTensor(t, b, c.dtype, 1, out, in)
				bias := ften(t, b, computetest.Randn(2, out), out)
				x := ften(t, b, nil, 34, in)
				dst := ften(t, b, nil, 34, out)
				row := computetest.Randn(3, in)
				invariant(t, func(rows, at int) []float32 {
					copy(x.f, batchRows(uint64(rows), rows, in, at, row))
					b.MatMul(dst, x, w, bias, rows)
					return dst.f[at*out : (at+1)*out]
				})
			})
		}
	})
}

func TestRMSNormInvariance(t *testing.T) {
	forKernels(t, func(t *testing.T) {
		b := newTest(t)
		const d = 2053
		w := ften(t, b, computetest.Randn(1, d), d)
		x, res, dst := ften(t, b, nil, 34, d), ften(t, b, nil, 34, d), ften(t, b, nil, 34, d)
		row, resRow := computetest.Randn(2, d), computetest.Randn(3, d)
		t.Run("RMSNorm", func(t *testing.T) {
			invariant(t, func(rows, at int) []float32 {
				copy(x.f, batchRows(uint64(rows), rows, d, at, row))
				b.RMSNorm(dst, x, w, rows, 1e-6)
				return dst.f[at*d : (at+1)*d]
			})
		})
		t.Run("AddRMSNorm", func(t *testing.T) {
			invariant(t, func(rows, at int) []float32 {
				copy(x.f, batchRows(uint64(rows), rows, d, at, row))
				copy(res.f, batchRows(uint64(rows+50), rows, d, at, resRow))
				b.AddRMSNorm(dst, res, x, w, rows, 1e-6)
				return append(dst.f[at*d:(at+1)*d:(at+1)*d], res.f[at*d:(at+1)*d]...)
			})
		})
	})
}

func TestRoPEInvariance(t *testing.T) {
	b := newTest(t)
	const heads, hd = 14, 64
	freqs := make([]float32, hd/2)
	for j := range freqs {
		freqs[j] = float32(math.Pow(1e6, -float64(2*j)/hd))
	}
	inv := ften(t, b, freqs, hd/2)
	x, pos := ften(t, b, nil, 34, heads*hd), iten(t, b, nil, 34)
	row := computetest.Randn(2, heads*hd)
	invariant(t, func(rows, at int) []float32 {
		copy(x.f, batchRows(uint64(rows), rows, heads*hd, at, row))
		for r := range rows {
			pos.i[r] = int32(r * 101)
		}
		pos.i[at] = 777
		b.RoPE(x, pos, inv, rows, heads)
		return x.f[at*heads*hd : (at+1)*heads*hd]
	})
}

func TestGatherInvariance(t *testing.T) {
	b := newTest(t)
	const d = 100
	src := ften(t, b, computetest.Randn(1, 40*d), 40, d)
	dst, idx := ften(t, b, nil, 34, d), iten(t, b, nil, 34)
	invariant(t, func(rows, at int) []float32 {
		for i := range rows {
			idx.i[i] = int32((i * 7) % 40)
		}
		idx.i[at] = 13
		b.Gather(dst, src, idx, rows)
		return dst.f[at*d : (at+1)*d]
	})
}

func TestAttentionInvariance(t *testing.T) {
	forKernels(t, func(t *testing.T) {
		b := newTest(t)
		const kvHeads, hd, heads, slots = 2, 68, 6, 600
		kv := newKV(t, b, 1, kvHeads, hd, slots)
		q, dst := ften(t, b, nil, 34, heads*hd), ften(t, b, nil, 34, heads*hd)
		bases, pos := iten(t, b, nil, 34), iten(t, b, nil, 34)
		row := computetest.Randn(2, heads*hd)
		invariant(t, func(rows, at int) []float32 {
			copy(q.f, batchRows(uint64(rows), rows, heads*hd, at, row))
			// Other rows come in runs of five of one session (bases 0, 200, 400), like prefill
			// chunks, at various positions; the row under test is session 200 at position 150, so
			// that it sometimes shares a run.
			for r := range rows {
				bases.i[r] = int32(r/5%3) * 200
				pos.i[r] = int32(r*37) % 199
			}
			bases.i[at], pos.i[at] = 200, 150
			b.Attention(dst, q, kv, 0, bases, pos, nil, rows, heads, 0.125)
			return dst.f[at*heads*hd : (at+1)*heads*hd]
		})
		if err := b.Sync(); err != nil {
			t.Fatal(err)
		}
	})
}
