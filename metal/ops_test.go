//go:build darwin && arm64

package metal

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"tfd/compute"
	"tfd/compute/computetest"
)

// Each op on the GPU against the CPU backend on the same random data, at tfd/cuda's tolerances.
// The two reduce in different orders (and the CPU's exp is Cephes', the GPU's Metal's
// precise::exp; Metal has no F64, so its cos, sin and rsqrt are precise F32 functions where the
// CPU rounds an F64 result), so results agree to a tolerance relative to the magnitude the
// rounding error scales with; pure data moves agree bit for bit.

// mmTol bounds |gpu−cpu| of a dot product by mmTol·Σ|xᵢwᵢ|.
const mmTol = 1e-5

var weightDTypes = []compute.DType{compute.F32, compute.BF16, compute.F16}

func TestMatMulMatchesCPU(t *testing.T) {
	p := newPair(t)
	for _, dt := range weightDTypes {
		for _, in := range []int{8, 100, 384, 1001, 2048} { // 100, 1001: not multiples of 8
			for _, out := range []int{5, 130} {
				for _, rows := range []int{1, 3, 20} {
					for _, withBias := range []bool{false, true} {
						t.Run(fmt.Sprint(dt, in, out, rows, withBias), func(t *testing.T) {
							p.t = t
							testMatMul(t, p, dt, in, out, rows, withBias)
						})
					}
				}
			}
		}
	}
}

func testMatMul(t *testing.T, p *pair, dt compute.DType, in, out, rows int, withBias bool) {
	xs, ws, bs := computetest.Randn(1, rows*in), computetest.Randn(2, out*in), computetest.Randn(3, out)
	x := p.f32(xs, rows+1, in)
	w := p.weights(dt, ws, out, in) // ws now holds the rounded weights both backends see
	dst := p.f32(nil, rows+1, out)
	var bias tt
	if withBias {
		bias = p.f32(bs, out)
	}
	p.do(func(b compute.Backend, i int) { b.MatMul(dst[i], x[i], w[i], bias[i], rows) })
	g, c := p.read(dst, (rows+1)*out)
	for r := range rows {
		for o := range out {
			var mag float64
			for i := range in {
				mag += math.Abs(float64(xs[r*in+i]) * float64(ws[o*in+i]))
			}
			if withBias {
				mag += math.Abs(float64(bs[o]))
			}
			if d := math.Abs(float64(g[r*out+o] - c[r*out+o])); d > mmTol*mag {
				t.Fatalf("dst[%d][%d] = %v, cpu %v: |Δ| %.3g > %g·Σ|xw| (%.3g)", r, o, g[r*out+o], c[r*out+o], d, mmTol, mag)
			}
		}
	}
	for i, v := range g[rows*out:] {
		if v != 0 {
			t.Fatalf("MatMul wrote past rows: dst[%d][%d] = %v", rows, i, v)
		}
	}
}

func TestEmbedGatherMatchCPU(t *testing.T) {
	p := newPair(t)
	const vocab, dim, rows = 50, 72, 9
	ids := []int32{3, 49, 0, 7, 7, 12, 33, 1, 48}
	for _, dt := range weightDTypes {
		t.Run(dt.String(), func(t *testing.T) {
			p.t = t
			table := p.weights(dt, computetest.Randn(4, vocab*dim), vocab, dim)
			tokens := p.i32(ids, rows)
			x := p.f32(nil, rows, dim)
			p.do(func(b compute.Backend, i int) { b.Embed(x[i], table[i], tokens[i], rows) })
			g, c := p.read(x, rows*dim)
			computetest.SameBits(t, "x", g, c)

			index := p.i32([]int32{8, 0, 4, 4}, 4)
			dst := p.f32(nil, 4, dim)
			p.do(func(b compute.Backend, i int) { b.Gather(dst[i], x[i], index[i], 4) })
			g, c = p.read(dst, 4*dim)
			computetest.SameBits(t, "gathered", g, c)
		})
	}
}

func TestRMSNormMatchesCPU(t *testing.T) {
	p := newPair(t)
	const eps = 1e-6
	for _, d := range []int{16, 64, 77, 384, 4096} {
		for _, n := range []int{1, 5, 33} {
			for _, add := range []bool{false, true} {
				t.Run(fmt.Sprint(d, n, add), func(t *testing.T) {
					p.t = t
					x := p.f32(computetest.Randn(5, n*d), n, d)
					res := p.f32(computetest.Randn(6, n*d), n, d)
					w := p.f32(computetest.Randn(7, d), d)
					dst := p.f32(nil, n, d)
					p.do(func(b compute.Backend, i int) {
						if add {
							b.AddRMSNorm(dst[i], res[i], x[i], w[i], n, eps)
						} else {
							b.RMSNorm(dst[i], x[i], w[i], n, eps)
						}
					})
					g, c := p.read(dst, n*d)
					computetest.Near(t, "dst", g, c, 2e-6, 1e-3)
					if add {
						g, c = p.read(res, n*d)
						computetest.SameBits(t, "residual", g, c)
					} else {
						// In place: dst is x.
						want := g
						p.do(func(b compute.Backend, i int) { b.RMSNorm(x[i], x[i], w[i], n, eps) })
						g, _ = p.read(x, n*d)
						computetest.SameBits(t, "in place", g, want)
					}
				})
			}
		}
	}
}

func TestRoPEMatchesCPU(t *testing.T) {
	p := newPair(t)
	for _, hd := range []int{16, 64, 128} {
		for _, heads := range []int{2, 6} {
			t.Run(fmt.Sprint(hd, heads), func(t *testing.T) {
				p.t = t
				const rows = 7
				freqs := make([]float32, hd/2)
				for j := range freqs {
					freqs[j] = float32(1 / math.Pow(10000, float64(2*j)/float64(hd)))
				}
				x := p.f32(computetest.Randn(8, rows*heads*hd), rows, heads*hd)
				pos := p.i32([]int32{0, 1, 2, 100, 1000, 4095, 77777}, rows)
				inv := p.f32(freqs, hd/2)
				p.do(func(b compute.Backend, i int) { b.RoPE(x[i], pos[i], inv[i], rows, heads) })
				g, c := p.read(x, rows*heads*hd)
				// Same steps as the CPU; only an F64 cos or sin rounding the other way apart.
				computetest.Near(t, "x", g, c, 1e-6, 1)
			})
		}
	}
}

func TestSiLUMulAddMatchCPU(t *testing.T) {
	p := newPair(t)
	const rows, width = 5, 1000
	gate := p.f32(computetest.Randn(9, rows*width), rows, width)
	up := p.f32(computetest.Randn(10, rows*width), rows, width)
	dst := p.f32(nil, rows, width)
	p.do(func(b compute.Backend, i int) { b.SiLUMul(dst[i], gate[i], up[i], rows) })
	g, c := p.read(dst, rows*width)
	t.Logf("SiLUMul: worst relative difference %.3g", computetest.Near(t, "silu", g, c, 2e-6, 1e-30))
	// Add over all but the last row, which must keep the GPU's SiLUMul output.
	last := slices.Clone(g[(rows-1)*width:])
	p.do(func(b compute.Backend, i int) { b.Add(dst[i], gate[i], up[i], rows-1) })
	g, c = p.read(dst, rows*width)
	computetest.SameBits(t, "add", g[:(rows-1)*width], c[:(rows-1)*width])
	computetest.SameBits(t, "the row past rows", g[(rows-1)*width:], last)
}

// kvCase is a pool filled with random keys and values for three sessions, and the rows that
// attend over them.
type kvCase struct {
	spec   compute.KVSpec
	heads  int
	bases  []int32 // per session
	length []int   // per session
}

func TestAttentionMatchesCPU(t *testing.T) {
	p := newPair(t)
	for _, c := range []struct{ hd, heads, kvHeads int }{{16, 4, 2}, {64, 6, 2}, {128, 8, 8}, {256, 4, 1}} {
		t.Run(fmt.Sprint(c.hd, c.heads, c.kvHeads), func(t *testing.T) {
			p.t = t
			kc := kvCase{spec: compute.KVSpec{Layers: 2, KVHeads: c.kvHeads, HeadDim: c.hd, Slots: 1200},
				heads: c.heads, bases: []int32{0, 300, 700}, length: []int{40, 300, 129}}
			kv := fillKV(t, p, kc, 1)
			// Rows of every session at several positions, in a mixed order.
			var bases, positions []int32
			for _, pos := range []int{0, 1, 39, 127, 128, 129, 299} {
				for s := range kc.bases {
					if pos < kc.length[s] {
						bases, positions = append(bases, kc.bases[s]), append(positions, int32(pos))
					}
				}
			}
			rows, qw := len(bases), c.heads*c.hd
			q := p.f32(computetest.Randn(20, rows*qw), rows, qw)
			bt, pt := p.i32(bases, rows), p.i32(positions, rows)
			dst := p.f32(nil, rows, qw)
			scale := float32(1 / math.Sqrt(float64(c.hd)))
			p.do(func(b compute.Backend, i int) {
				b.Attention(dst[i], q[i], kv[i], 1, bt[i], pt[i], rows, c.heads, scale)
			})
			g, cc := p.read(dst, rows*qw)
			// The output is a convex combination of values of magnitude about 1.
			t.Logf("worst |Δ| %.3g", computetest.Near(t, "attention", g, cc, 1e-5, 1))
		})
	}
}

// fillKV writes random keys and values for every position of every session of kc into layers 0
// and 1 of a new pool on both backends, through KVWrite.
func fillKV(t testing.TB, p *pair, kc kvCase, seed uint64) [2]compute.KV {
	var kv [2]compute.KV
	for i, b := range p.bs {
		pool, err := b.NewKV(kc.spec)
		if err != nil {
			t.Fatal(err)
		}
		kv[i] = pool
	}
	var bases, positions []int32
	for s, n := range kc.length {
		for pos := range n {
			bases, positions = append(bases, kc.bases[s]), append(positions, int32(pos))
		}
	}
	rows, st := len(bases), kc.spec.KVHeads*kc.spec.HeadDim
	bt, pt := p.i32(bases, rows), p.i32(positions, rows)
	for l := range kc.spec.Layers {
		k := p.f32(computetest.Randn(seed+uint64(10*l), rows*st), rows, st)
		v := p.f32(computetest.Randn(seed+uint64(10*l+1), rows*st), rows, st)
		p.do(func(b compute.Backend, i int) { b.KVWrite(kv[i], l, k[i], v[i], bt[i], pt[i], rows) })
	}
	return kv
}

func TestCopyKVKeepsBits(t *testing.T) {
	p := newPair(t)
	g := p.bs[0]
	kc := kvCase{spec: compute.KVSpec{Layers: 2, KVHeads: 2, HeadDim: 64, Slots: 1000},
		heads: 4, bases: []int32{0, 400}, length: []int{200, 150}}
	kv := fillKV(t, p, kc, 3)
	const n = 150
	attend := func(base int32) []float32 {
		rows := 3
		q := uploadF32(t, g, computetest.Randn(30, rows*4*64), rows, 4*64)
		bt := uploadI32(t, g, []int32{base, base, base})
		pt := uploadI32(t, g, []int32{0, 77, n - 1})
		dst, _ := g.Alloc(compute.F32, rows, 4*64)
		g.Attention(dst, q, kv[0], 1, bt, pt, rows, 4, 0.125)
		return readOne(t, g, dst, rows*4*64)
	}
	want := attend(400)
	// Disjoint, then overlapping in both directions: each must move the bits unchanged.
	for _, mv := range []struct{ src, dst int }{{400, 700}, {700, 650}, {650, 690}, {690, 400}} {
		g.CopyKV(kv[0], mv.dst, mv.src, n)
		computetest.SameBits(t, fmt.Sprintf("after CopyKV %d→%d", mv.src, mv.dst), attend(int32(mv.dst)), want)
	}
	g.CopyKV(kv[0], 900, 0, 200) // past the end
	if err := g.Sync(); err == nil || !strings.Contains(err.Error(), "CopyKV") {
		t.Errorf("CopyKV past the pool: Sync = %v, want a CopyKV error", err)
	}
}
