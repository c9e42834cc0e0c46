package cpu

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"tfd/compute"
	"tfd/compute/computetest"
	"tfd/quant"
)

// TestRouteTopK: each row's experts in order of score, the lower expert first on a tie and NaN
// last, and weights within 1e-6 of the F64 softmax (renormalised over the chosen when asked).
func TestRouteTopK(t *testing.T) {
	b := newTest(t)
	nan := float32(math.NaN())
	for _, c := range []struct {
		name      string
		scores    []float32 // one row
		k         int
		normalize bool
	}{
		{"plain", []float32{0.1, 2, -1, 0.5, 3, 0.2}, 3, false},
		{"renormalised", []float32{0.1, 2, -1, 0.5, 3, 0.2}, 3, true},
		{"ties to the lower expert", []float32{1, 5, 2, 5, 5, 0}, 4, true},
		{"NaN last", []float32{nan, -3, nan, -4}, 4, false},
		{"all of them", computetest.Randn(1, 130), 130, true},
	} {
		t.Run(c.name, forKernelsFunc(func(t *testing.T) {
			experts := len(c.scores)
			ids, w := iten(t, b, nil, c.k), ften(t, b, nil, c.k)
			b.RouteTopK(ids, w, ften(t, b, c.scores, 1, experts), 1, experts, c.k, c.normalize)
			want := make([]int32, experts)
			for e := range want {
				want[e] = int32(e)
			}
			key := func(e int32) float32 {
				if v := c.scores[e]; v == v {
					return v
				}
				return float32(math.Inf(-1))
			}
			slices.SortStableFunc(want, func(a, b int32) int { return cmp.Compare(key(b), key(a)) })
			if !slices.Equal(ids.i, want[:c.k]) {
				t.Fatalf("experts %v, want %v", ids.i, want[:c.k])
			}
			if c.name == "NaN last" {
				return // the softmax of NaN is NaN
			}
			var sum, chosen float64
			for _, v := range c.scores {
				sum += math.Exp(float64(v - slices.Max(c.scores)))
			}
			p := make([]float64, c.k)
			for j, e := range want[:c.k] {
				p[j] = math.Exp(float64(c.scores[e]-slices.Max(c.scores))) / sum
				chosen += p[j]
			}
			mag := make([]float64, c.k)
			for j := range p {
				if c.normalize {
					p[j] /= chosen
				}
				mag[j] = p[j]
			}
			check(t, "weights", w.f, p, mag, 1e-6)
		}))
	}
}

// forKernelsFunc is forKernels as a subtest body.
func forKernelsFunc(f func(t *testing.T)) func(t *testing.T) {
	return func(t *testing.T) { forKernels(t, f) }
}

// TestGroupByExpert: the runs' starts, each run's pairs ascending, an id outside the experts
// left out and reported.
func TestGroupByExpert(t *testing.T) {
	b := newTest(t)
	ids := []int32{2, 0, 2, 5, 3, 0, 2}
	groups := iten(t, b, nil, 4+1+len(ids))
	b.GroupByExpert(groups, iten(t, b, ids, len(ids)), len(ids), 4)
	if err := b.Sync(); err == nil {
		t.Error("expert 5 of 4: no error")
	}
	want := []int32{
		0, 2, 2, 5, 6, // where the runs of experts 0 … 3 start, and where the last ends
		1, 5, // expert 0
		0, 2, 6, // expert 2 (expert 1 has none)
		4, // expert 3
		0, // past the runs: left alone (pair 3's expert 5 is none)
	}
	if !slices.Equal(groups.i, want) {
		t.Errorf("groups %v, want %v", groups.i, want)
	}
}

// TestExpertMatMulIsMatMul: each pair's row is, bit for bit, MatMul of its x row and its expert's
// matrix (and its expert's bias, in the cases with one), with every kernel and weight dtype and
// lengths that take each path of MatMul (tails, widened 16-bit blocks, K-blocked tiles), whatever
// GOMAXPROCS.
func TestExpertMatMulIsMatMul(t *testing.T) {
	forKernels(t, func(t *testing.T) {
		for _, dt := range []compute.DType{compute.F32, compute.BF16, compute.F16} {
			for _, c := range []struct {
				in, out, pairs, experts, share int
				bias                           bool
			}{
				{100, 7, 9, 4, 3, false}, {1024, 40, 40, 4, 1, false}, {2048, 20, 64, 8, 8, false},
				{100, 7, 9, 4, 3, true}, {1024, 40, 40, 4, 1, true},
			} {
				t.Run(fmt.Sprint(dt, c), func(t *testing.T) {
					testExpertMatMulIsMatMul(t, dt, c.in, c.out, c.pairs, c.experts, c.share, c.bias)
				})
			}
		}
	})
}

func testExpertMatMulIsMatMul(t *testing.T, dt compute.DType, in, out, pairs, experts, share int, withBias bool) {
	b := newTest(t)
	ids := make([]int32, pairs)
	for a := range ids {
		ids[a] = int32((a*5 + a/3) % experts)
	}
	groups := iten(t, b, nil, experts+1+pairs)
	b.GroupByExpert(groups, iten(t, b, ids, pairs), pairs, experts)
	xrows := (pairs + share - 1) / share
	xs, ws := computetest.Randn(1, xrows*in), computetest.Randn(2, experts*out*in)
	wb := computetest.Encode(dt, ws)
	w, err := b.Upload(dt, []int{experts, out, in}, wb)
	if err != nil {
		t.Fatal(err)
	}
	x := ften(t, b, xs, xrows, in)
	var bias compute.Tensor
	var bs []float32
	if withBias {
		bs = computetest.Randn(3, experts*out)
		bias = ften(t, b, bs, experts, out)
	}
	for _, procs := range procsToTry {
		withProcs(procs, func() {
			dst := ften(t, b, nil, pairs, out)
			b.ExpertMatMul(dst, x, w, bias, groups, pairs, share)
			for e := range experts {
				we, err := b.Upload(dt, []int{out, in}, wb[e*out*in*dt.Size():(e+1)*out*in*dt.Size()])
				if err != nil {
					t.Fatal(err)
				}
				var be compute.Tensor
				if withBias {
					be = ften(t, b, bs[e*out:(e+1)*out], out)
				}
				mm := ften(t, b, nil, xrows, out)
				b.MatMul(mm, x, we, be, xrows)
				for a, id := range ids {
					if int(id) == e {
						r := a / share
						computetest.SameBits(t, name("pair", a, "procs", procs), dst.f[a*out:(a+1)*out], mm.f[r*out:(r+1)*out])
					}
				}
			}
		})
	}
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
}

// TestExpertsInvariance: a row through a sparse MLP's ops alone and among others, bit for bit,
// with every kernel and GOMAXPROCS.
func TestExpertsInvariance(t *testing.T) {
	forKernels(t, func(t *testing.T) {
		for _, procs := range procsToTry {
			withProcs(procs, func() { computetest.CheckExpertsBatchInvariance(t, newTest(t)) })
		}
	})
}

// TestCombineExperts: the weighted sum by rank, each product rounded, from the first product.
func TestCombineExperts(t *testing.T) {
	b := newTest(t)
	negZero := float32(math.Copysign(0, -1))
	third := float32(1) / 3
	x := ften(t, b, []float32{1, negZero, third, 4, third, 6}, 3, 2) // one row of three pairs, two wide
	w := ften(t, b, []float32{0.5, -1, 0.3}, 3)
	dst := ften(t, b, nil, 1, 2)
	b.CombineExperts(dst, x, w, 1, 3)
	p := func(w, x float32) float32 { return float32(w * x) } // the product rounded, never fused
	want := []float32{p(0.5, 1) + p(-1, third) + p(0.3, third), p(0.5, negZero) + p(-1, 4) + p(0.3, 6)}
	computetest.SameBits(t, "dst", dst.f, want)
	b.CombineExperts(dst, x, w, 1, 1) // one pair: the product itself, sign of zero included
	computetest.SameBits(t, "k = 1", dst.f[:2], []float32{0.5, negZero})
}

// TestExpertMatMulMXFP4IsF32: with MXFP4 weights (random codes and scales), each pair's row is,
// bit for bit, ExpertMatMul's with the same weights dequantized to F32, bias and all, with every
// kernel, on lengths that take MatMul's tails and K-blocked tiles, whatever GOMAXPROCS.
func TestExpertMatMulMXFP4IsF32(t *testing.T) {
	forKernels(t, func(t *testing.T) {
		for _, c := range []struct{ in, out, pairs, experts, share int }{
			{64, 7, 9, 4, 3}, {1024, 40, 40, 4, 1}, {2048, 20, 64, 8, 8},
		} {
			t.Run(fmt.Sprint(c), func(t *testing.T) {
				testExpertMatMulMXFP4(t, c.in, c.out, c.pairs, c.experts, c.share)
			})
		}
	})
}

func testExpertMatMulMXFP4(t *testing.T, in, out, pairs, experts, share int) {
	b := newTest(t)
	ids := make([]int32, pairs)
	for a := range ids {
		ids[a] = int32((a*5 + a/3) % experts)
	}
	groups := iten(t, b, nil, experts+1+pairs)
	b.GroupByExpert(groups, iten(t, b, ids, pairs), pairs, experts)
	rows := experts * out
	codes := make([]byte, rows*quant.MXFP4RowCodes(in))
	scales := make([]byte, rows*quant.MXFP4RowScales(in))
	rng := rand.New(rand.NewPCG(uint64(in), uint64(out)))
	for i := range codes {
		codes[i] = byte(rng.Uint32())
	}
	for i := range scales {
		scales[i] = byte(120 + rng.IntN(10))
	}
	ws := make([]float32, rows*in)
	for r := range rows {
		quant.DequantizeMXFP4(ws[r*in:(r+1)*in], codes[r*quant.MXFP4RowCodes(in):], scales[r*quant.MXFP4RowScales(in):])
	}
	wq, err := b.Upload(compute.MXFP4, []int{experts, out, in}, append(codes, scales...))
	if err != nil {
		t.Fatal(err)
	}
	wf := ften(t, b, ws, experts, out, in)
	xrows := (pairs + share - 1) / share
	x := ften(t, b, computetest.Randn(1, xrows*in), xrows, in)
	bias := ften(t, b, computetest.Randn(3, experts*out), experts, out)
	for _, procs := range procsToTry {
		withProcs(procs, func() {
			got, want := ften(t, b, nil, pairs, out), ften(t, b, nil, pairs, out)
			b.ExpertMatMul(got, x, wq, bias, groups, pairs, share)
			b.ExpertMatMul(want, x, wf, bias, groups, pairs, share)
			computetest.SameBits(t, name("procs", procs), got.f, want.f)
		})
	}
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
}

// TestQuantExpertMatMulIsMatMul: with quantized experts of every format, each pair's row is, bit
// for bit, quantized MatMul of its x row and its expert's matrix uploaded alone (and its expert's
// bias, in the cases with one), with every quantized kernel, whatever GOMAXPROCS; runs longer
// than a tile of rows and shorter, columns that leave a partial group (of eight or four).
func TestQuantExpertMatMulIsMatMul(t *testing.T) {
	forQuantKernels(t, func(t *testing.T) {
		for _, dt := range computetest.QuantDTypes(t) {
			unit := computetest.QuantUnit(dt)
			for _, c := range []struct {
				in, out, pairs, experts, share int
				bias                           bool
			}{
				{unit, 7, 9, 4, 3, false}, {2 * unit, 13, 70, 2, 1, true}, {4 * unit, 8, 24, 8, 8, true},
			} {
				t.Run(fmt.Sprint(dt, c), func(t *testing.T) {
					testQuantExpertMatMulIsMatMul(t, dt, c.in, c.out, c.pairs, c.experts, c.share, c.bias)
				})
			}
		}
	})
}

func testQuantExpertMatMulIsMatMul(t *testing.T, dt compute.DType, in, out, pairs, experts, share int, withBias bool) {
	b := newTest(t)
	ids := make([]int32, pairs)
	for a := range ids {
		ids[a] = int32((a*5 + a/3) % experts)
	}
	groups := iten(t, b, nil, experts+1+pairs)
	b.GroupByExpert(groups, iten(t, b, ids, pairs), pairs, experts)
	xrows := (pairs + share - 1) / share
	x := ften(t, b, computetest.Randn(1, xrows*in), xrows, in)
	stack, each := computetest.QuantizedExperts(t, dt, experts, out, in, 2)
	w, err := b.Upload(dt, []int{experts, out, in}, stack)
	if err != nil {
		t.Fatal(err)
	}
	var bias compute.Tensor
	var bs []float32
	if withBias {
		bs = computetest.Randn(3, experts*out)
		bias = ften(t, b, bs, experts, out)
	}
	for _, procs := range procsToTry {
		withProcs(procs, func() {
			dst := ften(t, b, nil, pairs, out)
			b.ExpertMatMul(dst, x, w, bias, groups, pairs, share)
			for e := range experts {
				we, err := b.Upload(dt, []int{out, in}, each[e])
				if err != nil {
					t.Fatal(err)
				}
				var be compute.Tensor
				if withBias {
					be = ften(t, b, bs[e*out:(e+1)*out], out)
				}
				mm := ften(t, b, nil, xrows, out)
				b.MatMul(mm, x, we, be, xrows)
				for a, id := range ids {
					if int(id) == e {
						r := a / share
						computetest.SameBits(t, name("pair", a, "procs", procs), dst.f[a*out:(a+1)*out], mm.f[r*out:(r+1)*out])
					}
				}
			}
		})
	}
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
}

// TestQuantExpertsMatchCPU runs computetest's check of quantized experts with the cpu backend on
// both sides: its premise (uploads, groups, the pair in no run) holds here, before a GPU runs it.
func TestQuantExpertsMatchCPU(t *testing.T) {
	computetest.CheckQuantExpertMatMul(t, computetest.NewPair(t, newTest(t), newTest(t)))
}
