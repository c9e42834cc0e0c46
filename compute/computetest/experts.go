package computetest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"tfd/compute"
	"tfd/quant"
)

// The mixture-of-experts ops: each against the cpu backend (CheckExperts), and the whole of a
// sparse MLP's ops alone and among other rows (CheckExpertsBatchInvariance).

// readI32 reads n elements of an I32 tensor of one backend.
func readI32(t testing.TB, b compute.Backend, x compute.Tensor, n int) []int32 {
	t.Helper()
	out := make([]int32, n)
	if err := b.ReadInt32(x, out); err != nil {
		t.Fatalf("%s: %v", b.Name(), err)
	}
	return out
}

// readI32 reads n elements of an I32 tensor from each backend of p.
func (p *Pair) readI32(x [2]compute.Tensor, n int) (tested, cpu []int32) {
	p.T.Helper()
	return readI32(p.T, p.Backends[0], x[0], n), readI32(p.T, p.Backends[1], x[1], n)
}

// expertIDs returns n random expert ids, expert 1 left without a pair where there are more than
// two.
func expertIDs(seed uint64, n, experts int) []int32 {
	r := rand.New(rand.NewPCG(seed, 3))
	ids := make([]int32, n)
	for i := range ids {
		e := r.IntN(experts)
		if e == 1 && experts > 2 {
			e = 0
		}
		ids[i] = int32(e)
	}
	return ids
}

// CheckExperts: RouteTopK's experts exactly and its weights within 2e-6 (exp rounds its last
// bit its own way), GroupByExpert's groups exactly, ExpertMatMul of every weight dtype within
// mmTol·Σ|xᵢwᵢ| (rows of pairs in no run untouched), CombineExperts bit for bit; the cpu backend
// is the reference.
func CheckExperts(t *testing.T, p *Pair) {
	for _, c := range []struct{ rows, experts, k int }{{1, 8, 2}, {5, 128, 8}, {40, 60, 4}} {
		for _, normalize := range []bool{false, true} {
			t.Run(fmt.Sprint("route ", c, normalize), func(t *testing.T) {
				p.T = t
				scores := Randn(uint64(c.rows*c.experts), c.rows*c.experts)
				scores[0], scores[1] = 3, 3 // a tie: the lower expert first
				logits, ids, w := p.F32(scores, c.rows, c.experts), p.I32(nil, c.rows*c.k), p.F32(nil, c.rows*c.k)
				p.Do(func(b compute.Backend, i int) {
					b.RouteTopK(ids[i], w[i], logits[i], c.rows, c.experts, c.k, normalize)
				})
				gi, ci := p.readI32(ids, c.rows*c.k)
				if !slices.Equal(gi, ci) {
					t.Fatalf("ids %v, cpu %v", gi, ci)
				}
				gw, cw := p.Read(w, c.rows*c.k)
				Near(t, "weights", gw, cw, 2e-6, 1e-30)
			})
		}
	}
	for _, c := range []struct{ n, experts int }{{1, 8}, {16, 8}, {300, 8}, {2048, 128}} {
		t.Run(fmt.Sprint("group ", c), func(t *testing.T) {
			p.T = t
			ids := p.I32(expertIDs(uint64(c.n), c.n, c.experts), c.n)
			groups := p.I32(nil, c.experts+1+c.n)
			p.Do(func(b compute.Backend, i int) { b.GroupByExpert(groups[i], ids[i], c.n, c.experts) })
			g, cg := p.readI32(groups, c.experts+1+c.n)
			if !slices.Equal(g, cg) {
				t.Fatalf("groups %v\ncpu %v", g, cg)
			}
		})
	}
	for _, dt := range weightDTypes {
		for _, c := range []struct {
			in, out, pairs, experts, share int
			bias                           bool
		}{
			{384, 96, 2, 64, 2, false}, {1001, 40, 24, 8, 1, true}, {256, 130, 128, 8, 8, false}, {2048, 16, 300, 16, 2, true},
		} {
			t.Run(fmt.Sprint("expert matmul ", dt, c), func(t *testing.T) {
				p.T = t
				testExpertMatMul(t, p, dt, c.in, c.out, c.pairs, c.experts, c.share, c.bias)
			})
		}
	}
	for _, c := range []struct {
		in, out, pairs, experts, share int
		bias                           bool
	}{
		{384, 96, 2, 64, 2, true}, {256, 130, 128, 8, 8, false}, {2048, 16, 300, 16, 2, true},
	} {
		t.Run(fmt.Sprint("expert matmul MXFP4 ", c), func(t *testing.T) {
			p.T = t
			testExpertMatMul(t, p, compute.MXFP4, c.in, c.out, c.pairs, c.experts, c.share, c.bias)
		})
	}
	for _, c := range []struct{ rows, width, k int }{{1, 64, 2}, {33, 100, 8}, {3, 2048, 1}} {
		t.Run(fmt.Sprint("combine ", c), func(t *testing.T) {
			p.T = t
			x, w, dst := p.F32(Randn(4, c.rows*c.k*c.width), c.rows*c.k, c.width), p.F32(Randn(5, c.rows*c.k), c.rows*c.k), p.F32(nil, c.rows+1, c.width)
			p.Do(func(b compute.Backend, i int) { b.CombineExperts(dst[i], x[i], w[i], c.rows, c.k) })
			g, cd := p.Read(dst, (c.rows+1)*c.width)
			SameBits(t, "dst", g, cd)
		})
	}
}

// testExpertMatMul runs ExpertMatMul on pairs pairs among experts on both backends, with groups
// the cpu backend made, and with a bias per expert when withBias is set; pair 0's id is no
// expert, so its row must stay as it was.
func testExpertMatMul(t *testing.T, p *Pair, dt compute.DType, in, out, pairs, experts, share int, withBias bool) {
	ids := expertIDs(uint64(in+pairs), pairs, experts)
	ids[0] = int32(experts)
	cpu := p.Backends[1]
	groups := UploadI32(t, cpu, make([]int32, experts+1+pairs))
	cpu.GroupByExpert(groups, UploadI32(t, cpu, ids), pairs, experts)
	if err := cpu.Sync(); err == nil {
		t.Fatalf("GroupByExpert of expert %d of %d: no error", experts, experts)
	}
	g := readI32(t, cpu, groups, experts+1+pairs)
	xrows := (pairs + share - 1) / share
	xs, ws, before := Randn(6, xrows*in), Randn(7, experts*out*in), Randn(8, pairs*out)
	var w [2]compute.Tensor
	if dt == compute.MXFP4 {
		var wb []byte
		ws, wb = MXFP4Weights(7, experts*out, in)
		w = p.Upload(dt, wb, experts, out, in)
	} else {
		w = p.Weights(dt, ws, experts, out, in)
	}
	x, gt := p.F32(xs, xrows, in), p.I32(g, len(g))
	dst := p.F32(before, pairs, out)
	var bias [2]compute.Tensor
	bs := make([]float32, experts*out)
	if withBias {
		bs = Randn(9, experts*out)
		bias = p.F32(bs, experts, out)
	}
	p.Do(func(b compute.Backend, i int) { b.ExpertMatMul(dst[i], x[i], w[i], bias[i], gt[i], pairs, share) })
	got, want := p.Read(dst, pairs*out)
	SameBits(t, "the row of the pair in no run", got[:out], before[:out])
	for a := 1; a < pairs; a++ {
		e, r := int(ids[a]), a/share
		for o := range out {
			mag := math.Abs(float64(bs[e*out+o]))
			for i := range in {
				mag += math.Abs(float64(xs[r*in+i]) * float64(ws[(e*out+o)*in+i]))
			}
			if d := math.Abs(float64(got[a*out+o] - want[a*out+o])); d > mmTol*mag {
				t.Fatalf("dst[%d][%d] = %v, cpu %v: |Δ| %.3g > %g·Σ|xw| (%.3g)", a, o, got[a*out+o], want[a*out+o], d, mmTol, mag)
			}
		}
	}
}

// CheckExpertsBatchInvariance: a row through a sparse MLP's ops (its router scores through
// RouteTopK and GroupByExpert; its hidden state through its experts' gate, up and down matrices of
// BF16 and F32 weights by ExpertMatMul, SiLUMul between; CombineExperts) gives the same bits alone
// and among 1, 7 and 33 other rows at a random index, among 8 and 64 experts: the other rows
// change which pairs share its experts, how many pairs an expert has, and the row groups.
func CheckExpertsBatchInvariance(t *testing.T, b compute.Backend) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, dt := range []compute.DType{compute.BF16, compute.F32} {
		for _, experts := range []int{8, 64} {
			t.Run(fmt.Sprint(dt, experts), func(t *testing.T) {
				const hidden, inter, k = 384, 96, 4
				upload := func(seed uint64, shape ...int) compute.Tensor {
					w, err := b.Upload(dt, shape, Encode(dt, Randn(seed, elements(shape))))
					if err != nil {
						t.Fatal(err)
					}
					return w
				}
				gate, up, down := upload(1, experts, inter, hidden), upload(2, experts, inter, hidden), upload(3, experts, hidden, inter)
				target, targetScores := Randn(4, hidden), Randn(5, experts)
				run := func(h, scores []float32, n, at int) []float32 {
					ht, st := UploadF32(t, b, h, n, hidden), UploadF32(t, b, scores, n, experts)
					alloc := func(dtype compute.DType, shape ...int) compute.Tensor {
						x, err := b.Alloc(dtype, shape...)
						if err != nil {
							t.Fatal(err)
						}
						return x
					}
					ids, w, groups := alloc(compute.I32, n*k), alloc(compute.F32, n*k), alloc(compute.I32, experts+1+n*k)
					g, u, o, dst := alloc(compute.F32, n*k, inter), alloc(compute.F32, n*k, inter), alloc(compute.F32, n*k, hidden), alloc(compute.F32, n, hidden)
					b.RouteTopK(ids, w, st, n, experts, k, true)
					b.GroupByExpert(groups, ids, n*k, experts)
					b.ExpertMatMul(g, ht, gate, nil, groups, n*k, k)
					b.ExpertMatMul(u, ht, up, nil, groups, n*k, k)
					b.SiLUMul(g, g, u, n*k)
					b.ExpertMatMul(o, g, down, nil, groups, n*k, 1)
					b.CombineExperts(dst, o, w, n, k)
					got := ReadOne(t, b, dst, n*hidden)
					for _, x := range []compute.Tensor{ht, st, ids, w, groups, g, u, o, dst} {
						b.Free(x)
					}
					return got[at*hidden : (at+1)*hidden]
				}
				alone := run(target, targetScores, 1, 0)
				for _, others := range othersToTry {
					h, at := batchOf(r, target, others, func(i int) []float32 { return Randn(uint64(100+i), hidden) })
					// Every other row of the others scores the experts as the target does, so that
					// they share its experts; the rest score them at random.
					scores := make([]float32, 0, (others+1)*experts)
					for i := range others + 1 {
						if i == at || i%2 == 0 {
							scores = append(scores, targetScores...)
						} else {
							scores = append(scores, Randn(uint64(200+i), experts)...)
						}
					}
					SameBits(t, fmt.Sprintf("row %d of %d", at, others+1), run(h, scores, others+1, at), alone)
				}
			})
		}
	}
}

// MXFP4Weights returns rows rows of in random MXFP4 weights (random codes, scales 2⁻⁴ to 2¹) as
// compute.MXFP4 takes them, and their values.
func MXFP4Weights(seed uint64, rows, in int) ([]float32, []byte) {
	rng := rand.New(rand.NewPCG(seed, 4))
	codes, scales := make([]byte, rows*quant.MXFP4RowCodes(in)), make([]byte, rows*quant.MXFP4RowScales(in))
	for i := range codes {
		codes[i] = byte(rng.Uint32())
	}
	for i := range scales {
		scales[i] = byte(123 + rng.IntN(6))
	}
	ws := make([]float32, rows*in)
	for r := range rows {
		quant.DequantizeMXFP4(ws[r*in:(r+1)*in], codes[r*quant.MXFP4RowCodes(in):], scales[r*quant.MXFP4RowScales(in):])
	}
	return ws, append(codes, scales...)
}
