package cpu

import (
	"fmt"
	"math"
	"testing"

	"tfd/compute"
	"tfd/compute/computetest"
)

// Each op against a float64 reference written from the op's definition, on random data with odd
// sizes, with both kinds of kernel.

const tol = 1e-5 // relative to the magnitude an F32 rounding error scales with

func TestMatMul(t *testing.T) {
	forKernels(t, func(t *testing.T) {
		for _, in := range []int{1, 7, 8, 13, 37, 389, 1100} { // 1100: K-blocked (mmKBlockMin)
			for _, out := range []int{1, 3, 17, 45} {
				for _, rows := range []int{1, 3, 17} {
					for _, withBias := range []bool{false, true} {
						t.Run(name(in, out, rows, withBias), func(t *testing.T) {
							testMatMul(t, in, out, rows, withBias)
						})
					}
				}
			}
		}
	})
}

func testMatMul(t *testing.T, in, out, rows int, withBias bool) {
	b := newTest(t)
	xs, ws, bs := computetest.Randn(1, rows*in), computetest.Randn(2, out*in), computetest.Randn(3, out)
	x, w := ften(t, b, xs, rows+2, in), ften(t, b, ws, out, in)
	dst := ften(t, b, nil, rows+2, out)
	var bias *tensor
	if withBias {
		bias = ften(t, b, bs, out)
		b.MatMul(dst, x, w, bias, rows)
	} else {
		b.MatMul(dst, x, w, nil, rows)
	}
	want, mag := make([]float64, rows*out), make([]float64, rows*out)
	for r := range rows {
		for o := range out {
			var s, m float64
			for i := range in {
				p := float64(xs[r*in+i]) * float64(ws[o*in+i])
				s, m = s+p, m+math.Abs(p)
			}
			if withBias {
				s, m = s+float64(bs[o]), m+math.Abs(float64(bs[o]))
			}
			want[r*out+o], mag[r*out+o] = s, m
		}
	}
	check(t, "dst", dst.f, want, mag, tol)
	for _, v := range dst.f[rows*out:] {
		if v != 0 {
			t.Fatal("MatMul wrote past rows")
		}
	}
}

func TestRMSNorm(t *testing.T) {
	forKernels(t, func(t *testing.T) {
		for _, d := range []int{1, 7, 64, 77} {
			for _, n := range []int{1, 3, 17} {
				for _, add := range []bool{false, true} {
					t.Run(name(d, n, add), func(t *testing.T) { testRMSNorm(t, d, n, add) })
				}
			}
		}
	})
}

func testRMSNorm(t *testing.T, d, n int, add bool) {
	b := newTest(t)
	const eps = 1e-6
	xs, rs, ws := computetest.Randn(1, n*d), computetest.Randn(2, n*d), computetest.Randn(3, d)
	x, res, w := ften(t, b, xs, n, d), ften(t, b, rs, n, d), ften(t, b, ws, d)
	dst := ften(t, b, nil, n, d)
	h := make([]float64, n*d) // the vectors normalised
	for i := range h {
		h[i] = float64(xs[i])
	}
	if add {
		b.AddRMSNorm(dst, res, x, w, n, eps)
		for i := range h {
			h[i] += float64(rs[i])
		}
		check(t, "residual", res.f, h, absAll(h), 1e-7)
	} else {
		b.RMSNorm(dst, x, w, n, eps)
	}
	want, mag := make([]float64, n*d), make([]float64, n*d)
	for i := range n {
		var ss float64
		for _, v := range h[i*d : (i+1)*d] {
			ss += v * v
		}
		r := 1 / math.Sqrt(ss/float64(d)+eps)
		for j := range d {
			want[i*d+j] = float64(ws[j]) * h[i*d+j] * r
			mag[i*d+j] = math.Abs(want[i*d+j])
		}
	}
	check(t, "dst", dst.f, want, mag, tol)

	// In place: dst is x.
	if !add {
		b.RMSNorm(x, x, w, n, eps)
		computetest.SameBits(t, "in place", x.f, dst.f)
	}
}

func absAll(v []float64) []float64 {
	m := make([]float64, len(v))
	for i, x := range v {
		m[i] = math.Abs(x)
	}
	return m
}

func TestRoPE(t *testing.T) {
	for _, hd := range []int{2, 6, 64} {
		for _, rows := range []int{1, 3, 17} {
			t.Run(name(hd, rows), func(t *testing.T) { testRoPE(t, hd, rows) })
		}
	}
}

func testRoPE(t *testing.T, hd, rows int) {
	b := newTest(t)
	const heads = 3
	half := hd / 2
	xs := computetest.Randn(1, rows*heads*hd)
	freqs := make([]float32, half)
	for j := range freqs {
		freqs[j] = float32(math.Pow(10000, -float64(2*j)/float64(hd)))
	}
	pos := make([]int32, rows)
	for r := range pos {
		pos[r] = int32(r*37 + 5)
	}
	x := ften(t, b, xs, rows, heads*hd)
	b.RoPE(x, iten(t, b, pos, rows), ften(t, b, freqs, half), rows, heads)
	want, mag := make([]float64, len(xs)), make([]float64, len(xs))
	for r := range rows {
		for h := range heads {
			o := (r*heads + h) * hd
			for j := range half {
				a := float64(float32(pos[r]) * freqs[j]) // the F32 angle, as the contract says
				x0, x1 := float64(xs[o+j]), float64(xs[o+j+half])
				want[o+j] = x0*math.Cos(a) - x1*math.Sin(a)
				want[o+j+half] = x1*math.Cos(a) + x0*math.Sin(a)
				mag[o+j], mag[o+j+half] = math.Abs(x0)+math.Abs(x1), math.Abs(x0)+math.Abs(x1)
			}
		}
	}
	check(t, "x", x.f, want, mag, tol)
}

// TestRoPEReusesAnglesOnlyWhenSame checks that a RoPE call taking the previous call's cos and sin
// (same positions, same frequencies) gives the bits a fresh backend gives, and that positions or
// frequencies changed in place, in the same tensors, are noticed.
func TestRoPEReusesAnglesOnlyWhenSame(t *testing.T) {
	const rows, heads, hd = 5, 2, 8
	b := newTest(t)
	pos := iten(t, b, []int32{0, 3, 9, 27, 81}, rows)
	freqs := ften(t, b, []float32{1, 0.1, 0.01, 0.001}, hd/2)
	rotate := func(b *backend, pos, freqs *tensor, seed uint64) []float32 {
		x := ften(t, b, computetest.Randn(seed, rows*heads*hd), rows, heads*hd)
		b.RoPE(x, pos, freqs, rows, heads)
		return x.f
	}
	alone := func(seed uint64) []float32 {
		f := newTest(t)
		return rotate(f, iten(t, f, pos.i, rows), ften(t, f, freqs.f, hd/2), seed)
	}
	for i, change := range []func(){
		func() {},                   // the same angles: reused
		func() { pos.i[2] = 10 },    // a position changed in place
		func() { freqs.f[1] = 0.2 }, // a frequency changed in place
		func() {},
	} {
		change()
		seed := uint64(i + 1)
		computetest.SameBits(t, fmt.Sprintf("call %d", i), rotate(b, pos, freqs, seed), alone(seed))
	}
}

func TestElementwise(t *testing.T) {
	b := newTest(t)
	for _, rows := range []int{1, 3, 17} {
		const dim = 4099 // more than one chunk, not a multiple of anything
		gs, us := computetest.Randn(1, rows*dim), computetest.Randn(2, rows*dim)
		for i := range gs {
			gs[i] *= 8 // reach well into both tails of silu
		}
		gate, up := ften(t, b, gs, rows, dim), ften(t, b, us, rows, dim)
		dst := ften(t, b, nil, rows+1, dim)
		b.SiLUMul(dst, gate, up, rows)
		want, mag := make([]float64, rows*dim), make([]float64, rows*dim)
		for i := range want {
			g, u := float64(gs[i]), float64(us[i])
			want[i] = g / (1 + math.Exp(-g)) * u
			mag[i] = math.Abs(want[i])
		}
		check(t, name("silu", rows), dst.f, want, mag, tol)

		b.Add(dst, gate, up, rows)
		for i := range want {
			want[i] = float64(gs[i]) + float64(us[i])
			mag[i] = math.Abs(float64(gs[i])) + math.Abs(float64(us[i]))
		}
		check(t, name("add", rows), dst.f, want, mag, 1e-7)
		for _, v := range dst.f[rows*dim:] {
			if v != 0 {
				t.Fatal("wrote past rows")
			}
		}
	}
}

func TestEmbedGather(t *testing.T) {
	b := newTest(t)
	const vocab, dim = 11, 5
	tab := computetest.Randn(1, vocab*dim)
	table := ften(t, b, tab, vocab, dim)
	ids := []int32{3, 0, 10, 3}
	x := ften(t, b, nil, 6, dim)
	b.Embed(x, table, iten(t, b, ids, 6), len(ids))
	for r, id := range ids {
		computetest.SameBits(t, name("embed", r), x.f[r*dim:(r+1)*dim], tab[int(id)*dim:int(id+1)*dim])
	}
	dst := ften(t, b, nil, 3, dim)
	idx := []int32{2, 2, 0}
	b.Gather(dst, x, iten(t, b, idx, 3), 3)
	for i, j := range idx {
		computetest.SameBits(t, name("gather", i), dst.f[i*dim:(i+1)*dim], x.f[int(j)*dim:int(j+1)*dim])
	}
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
}

func TestAttention(t *testing.T) {
	forKernels(t, func(t *testing.T) {
		for _, hd := range []int{4, 13, 64} {
			for _, g := range []int{1, 3} {
				t.Run(name(hd, g), func(t *testing.T) { testAttention(t, hd, g, false) })
				t.Run(name(hd, g, "sinks"), func(t *testing.T) { testAttention(t, hd, g, true) })
			}
		}
	})
}

// testAttention checks Attention against a float64 reference; with sinks, each head has a sink
// (some above every score, some below) that joins the softmax's denominator.
func testAttention(t *testing.T, hd, group int, withSinks bool) {
	b := newTest(t)
	const kvHeads, slots = 2, 64
	heads := kvHeads * group
	kv := newKV(t, b, 2, kvHeads, hd, slots)
	// Rows of three sessions at different positions, not in session order, and a prefill-like
	// run of six rows of one session.
	bases := []int32{40, 0, 40, 10, 0, 10, 10, 10, 10, 10, 10}
	pos := []int32{3, 0, 20, 29, 9, 11, 12, 13, 14, 15, 16}
	rows := len(bases)
	qs := computetest.Randn(9, rows*heads*hd)
	q := ften(t, b, qs, rows, heads*hd)
	dst := ften(t, b, nil, rows, heads*hd)
	scale := float32(1 / math.Sqrt(float64(hd)))
	var sinks compute.Tensor
	var ss []float32
	if withSinks {
		ss = computetest.Randn(10, heads)
		for h := range ss {
			ss[h] *= 3
		}
		sinks = ften(t, b, ss, heads)
	}
	b.Attention(dst, q, kv, 1, iten(t, b, bases, rows), iten(t, b, pos, rows), sinks, rows, heads, scale)
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	want, mag := make([]float64, rows*heads*hd), make([]float64, rows*heads*hd)
	st := kvHeads * hd
	for r := range rows {
		for h := range heads {
			qh := qs[(r*heads+h)*hd:]
			off := int(bases[r])*st + h/group*hd
			n := int(pos[r]) + 1
			s := make([]float64, n)
			m := math.Inf(-1)
			for j := range n {
				for d := range hd {
					s[j] += float64(qh[d]) * float64(kv.k[1][off+j*st+d])
				}
				s[j] *= float64(scale)
				m = max(m, s[j])
			}
			var sum float64
			if withSinks {
				m = max(m, float64(ss[h]))
				sum = math.Exp(float64(ss[h]) - m)
			}
			for j := range s {
				s[j] = math.Exp(s[j] - m)
				sum += s[j]
			}
			for d := range hd {
				i := (r*heads+h)*hd + d
				for j := range n {
					v := float64(kv.v[1][off+j*st+d])
					want[i] += s[j] / sum * v
					mag[i] += s[j] / sum * math.Abs(v)
				}
			}
		}
	}
	check(t, "dst", dst.f, want, mag, tol)
}

// newKV returns a pool whose layers are filled with random keys and values through KVWrite.
func newKV(t *testing.T, b *backend, layers, kvHeads, hd, slots int) *kvPool {
	kvi, err := b.NewKV(kvSpec(layers, kvHeads, hd, slots))
	if err != nil {
		t.Fatal(err)
	}
	kv := kvi.(*kvPool)
	st := kvHeads * hd
	bases, pos := make([]int32, slots), make([]int32, slots)
	for s := range pos {
		pos[s] = int32(s)
	}
	for l := range layers {
		k := ften(t, b, computetest.Randn(uint64(100+2*l), slots*st), slots, st)
		v := ften(t, b, computetest.Randn(uint64(101+2*l), slots*st), slots, st)
		b.KVWrite(kv, l, k, v, iten(t, b, bases, slots), iten(t, b, pos, slots), slots)
	}
	return kv
}
