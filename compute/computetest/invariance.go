package computetest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"tfd/compute"
)

// Batch invariance of a GPU backend, bit for bit: a row computed alone must equal the same row
// computed among 1, 7 and 33 others, at a random index. Each Check is the body of one test.

var othersToTry = []int{1, 7, 33}

// batchOf returns the rows of a batch of 1+others rows holding target at a random index, the
// others drawn from pool, and that index.
func batchOf(r *rand.Rand, target []float32, others int, pool func(i int) []float32) ([]float32, int) {
	at := r.IntN(others + 1)
	var rows []float32
	for i := range others + 1 {
		if i == at {
			rows = append(rows, target...)
		} else {
			rows = append(rows, pool(i)...)
		}
	}
	return rows, at
}

// CheckMatMulBatchInvariance: MatMul rows of BF16 and F32 weights, alone and among others.
func CheckMatMulBatchInvariance(t *testing.T, b compute.Backend) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, dt := range []compute.DType{compute.BF16, compute.F32} {
		for _, in := range []int{384, 1001, 4096} {
			t.Run(fmt.Sprint(dt, in), func(t *testing.T) {
				const out = 96
				w, err := b.Upload(dt, []int{out, in}, Encode(dt, Randn(1, out*in)))
				if err != nil {
					t.Fatal(err)
				}
				bias := UploadF32(t, b, Randn(2, out), out)
				target := Randn(3, in)
				run := func(rows []float32, n, at int) []float32 {
					x := UploadF32(t, b, rows, n, in)
					dst, _ := b.Alloc(compute.F32, n, out)
					b.MatMul(dst, x, w, bias, n)
					got := ReadOne(t, b, dst, n*out)
					b.Free(x)
					b.Free(dst)
					return got[at*out : (at+1)*out]
				}
				alone := run(target, 1, 0)
				for _, others := range othersToTry {
					rows, at := batchOf(r, target, others, func(i int) []float32 { return Randn(uint64(100+i), in) })
					SameBits(t, fmt.Sprintf("row %d of %d", at, others+1), run(rows, others+1, at), alone)
				}
			})
		}
	}
}

// CheckNormBatchInvariance: RMSNorm and AddRMSNorm rows, alone and among others.
func CheckNormBatchInvariance(t *testing.T, b compute.Backend) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, d := range []int{64, 384, 4096} {
		for _, add := range []bool{false, true} {
			t.Run(fmt.Sprint(d, add), func(t *testing.T) {
				w := UploadF32(t, b, Randn(1, d), d)
				target, targetRes := Randn(2, d), Randn(3, d)
				run := func(rows, res []float32, n, at int) []float32 {
					x := UploadF32(t, b, rows, n, d)
					rt := UploadF32(t, b, res, n, d)
					dst, _ := b.Alloc(compute.F32, n, d)
					if add {
						b.AddRMSNorm(dst, rt, x, w, n, 1e-6)
					} else {
						b.RMSNorm(dst, x, w, n, 1e-6)
					}
					got := ReadOne(t, b, dst, n*d)
					for _, t := range []compute.Tensor{x, rt, dst} {
						b.Free(t)
					}
					return got[at*d : (at+1)*d]
				}
				alone := run(target, targetRes, 1, 0)
				for _, others := range othersToTry {
					at := r.IntN(others + 1)
					var rows, res []float32
					for i := range others + 1 {
						if i == at {
							rows, res = append(rows, target...), append(res, targetRes...)
						} else {
							rows, res = append(rows, Randn(uint64(200+i), d)...), append(res, Randn(uint64(400+i), d)...)
						}
					}
					SameBits(t, fmt.Sprintf("row %d of %d", at, others+1), run(rows, res, others+1, at), alone)
				}
			})
		}
	}
}

// CheckAttentionBatchInvariance attends one row of a session alone and then among rows of other
// sessions and other positions of its own session.
func CheckAttentionBatchInvariance(t *testing.T, p *Pair) {
	g := p.Backends[0]
	r := rand.New(rand.NewPCG(11, 12))
	kc := kvCase{spec: compute.KVSpec{Layers: 1, KVHeads: 2, HeadDim: 64, Slots: 3200},
		heads: 6, bases: []int32{0, 500, 1200}, length: []int{450, 700, 1900}}
	kv := fillKV(t, p, kc, 5)
	qw := kc.heads * kc.spec.HeadDim
	// Positions of one chunk of keys, of several, and (past 1,024 keys) of several chunks a split.
	for _, target := range []struct{ session, pos int }{{1, 0}, {1, 129}, {1, 699}, {0, 255}, {2, 1800}} {
		tq := Randn(uint64(40+target.pos), qw)
		run := func(qs []float32, bases, positions []int32, at int) []float32 {
			n := len(bases)
			q := UploadF32(t, g, qs, n, qw)
			bt, pt := UploadI32(t, g, bases), UploadI32(t, g, positions)
			dst, _ := g.Alloc(compute.F32, n, qw)
			g.Attention(dst, q, kv[0], 0, bt, pt, nil, n, kc.heads, 0.125)
			got := ReadOne(t, g, dst, n*qw)
			for _, x := range []compute.Tensor{q, bt, pt, dst} {
				g.Free(x)
			}
			return got[at*qw : (at+1)*qw]
		}
		tb, tp := kc.bases[target.session], int32(target.pos)
		alone := run(tq, []int32{tb}, []int32{tp}, 0)
		for _, others := range othersToTry {
			at := r.IntN(others + 1)
			var qs []float32
			var bases, positions []int32
			for i := range others + 1 {
				if i == at {
					qs, bases, positions = append(qs, tq...), append(bases, tb), append(positions, tp)
					continue
				}
				s := r.IntN(len(kc.bases))
				qs = append(qs, Randn(uint64(300+i), qw)...)
				bases, positions = append(bases, kc.bases[s]), append(positions, int32(r.IntN(kc.length[s])))
			}
			SameBits(t, fmt.Sprintf("session %d position %d, row %d of %d", target.session, target.pos, at, others+1),
				run(qs, bases, positions, at), alone)
		}
	}
}

// CheckMatMulRowGroups checks the claim the matmul kernels rest on: every row-group size (R of
// matmul_W_R, S of matmul_mma_bf16_S) gives the same bits, since each row's dot product runs in
// the same order. Row counts 1, 2, 3, 5, 9, 17 select R = 1, 2, 4, 8, 16, 16; 1, 9, 33 select
// S = 1, 2, 4.
func CheckMatMulRowGroups(t *testing.T, b compute.Backend) {
	// 777: the one-element-per-lane order; 512: a multiple of 32, which GPUs run on their matrix
	// units for BF16, in tiles that grow with the rows (up to 70: past 8, 32 and 64).
	for _, in := range []int{777, 512} {
		const out = 40
		for _, dt := range weightDTypes {
			w, err := b.Upload(dt, []int{out, in}, Encode(dt, Randn(1, out*in)))
			if err != nil {
				t.Fatal(err)
			}
			xs := Randn(2, 70*in)
			x := UploadF32(t, b, xs, 70, in)
			dst, _ := b.Alloc(compute.F32, 70, out)
			var first []float32
			for _, rows := range []int{1, 2, 3, 5, 9, 17, 33, 70} {
				b.MatMul(dst, x, w, nil, rows)
				got := ReadOne(t, b, dst, out)
				if first == nil {
					first = got
					if math.IsNaN(float64(first[0])) {
						t.Fatal("NaN")
					}
					continue
				}
				SameBits(t, fmt.Sprintf("%v %d: row 0 of %d", dt, in, rows), got, first)
			}
			b.Free(w)
			b.Free(x)
			b.Free(dst)
		}
	}
}

// CheckMultiMatMul: a backend's MatMuls (compute.MultiMatMul) gives each matrix the bits MatMul
// gives it alone: three BF16 matrices of different heights (one with a bias), and a mixture of
// BF16 and F16 that a GPU cannot run in one launch, each at one row and at many.
func CheckMultiMatMul(t *testing.T, b compute.Backend) {
	mm, ok := b.(compute.MultiMatMul)
	if !ok {
		t.Skip("the backend is no compute.MultiMatMul")
	}
	const in = 512
	for _, dts := range [][3]compute.DType{{compute.BF16, compute.BF16, compute.BF16}, {compute.BF16, compute.F16, compute.BF16}} {
		for _, rows := range []int{1, 40} {
			outs := [3]int{96, 40, 130}
			x := UploadF32(t, b, Randn(1, rows*in), rows, in)
			var w, bias, dst [3]compute.Tensor
			for m, out := range outs {
				var err error
				if w[m], err = b.Upload(dts[m], []int{out, in}, Encode(dts[m], Randn(uint64(2+m), out*in))); err != nil {
					t.Fatal(err)
				}
				dst[m], _ = b.Alloc(compute.F32, rows, out)
			}
			bias[1] = UploadF32(t, b, Randn(9, outs[1]), outs[1])
			mm.MatMuls(dst, x, w, bias, rows)
			for m, out := range outs {
				alone, _ := b.Alloc(compute.F32, rows, out)
				b.MatMul(alone, x, w[m], bias[m], rows)
				SameBits(t, fmt.Sprintf("%v rows %d: matrix %d of three against alone", dts, rows, m), ReadOne(t, b, dst[m], rows*out), ReadOne(t, b, alone, rows*out))
				b.Free(alone)
			}
			for _, ts := range [][3]compute.Tensor{w, dst} {
				for _, x := range ts {
					b.Free(x)
				}
			}
			b.Free(bias[1])
			b.Free(x)
		}
	}
}

// MatMulOnce returns one BF16 MatMul of 9 random rows of 512 against 40 outputs on b, for tests
// that compare two configurations of a backend.
func MatMulOnce(t testing.TB, b compute.Backend) []float32 {
	t.Helper()
	const rows, in, out = 9, 512, 40
	w, err := b.Upload(compute.BF16, []int{out, in}, Encode(compute.BF16, Randn(1, out*in)))
	if err != nil {
		t.Fatal(err)
	}
	x := UploadF32(t, b, Randn(2, rows*in), rows, in)
	dst, _ := b.Alloc(compute.F32, rows, out)
	b.MatMul(dst, x, w, nil, rows)
	got := ReadOne(t, b, dst, rows*out)
	for _, x := range []compute.Tensor{w, x, dst} {
		b.Free(x)
	}
	return got
}
