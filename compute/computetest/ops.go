package computetest

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"tfd/compute"
)

// Each op of a GPU backend against the cpu backend on the same random data: the checks tfd/cuda's
// and tfd/metal's tests run. The two reduce in different orders (and the CPU's exp is Cephes',
// a GPU's its own), so results agree to a tolerance relative to the magnitude the rounding error
// scales with; pure data moves agree bit for bit. Each Check is the body of one test.

// mmTol bounds |gpu−cpu| of a dot product by mmTol·Σ|xᵢwᵢ|.
const mmTol = 1e-5

var weightDTypes = []compute.DType{compute.F32, compute.BF16, compute.F16}

// CheckMatMul: MatMul of F32, BF16 and F16 weights, with and without bias, within
// mmTol·Σ|xᵢwᵢ| of the cpu backend (the cpu gets the same rounded weights); rows past rows untouched.
func CheckMatMul(t *testing.T, p *Pair) {
	for _, dt := range weightDTypes {
		for _, in := range []int{8, 100, 384, 1001, 2048} { // 100, 1001: not multiples of 8
			for _, out := range []int{5, 130} {
				for _, rows := range []int{1, 3, 20} {
					for _, withBias := range []bool{false, true} {
						t.Run(fmt.Sprint(dt, in, out, rows, withBias), func(t *testing.T) {
							p.T = t
							testMatMul(t, p, dt, in, out, rows, withBias)
						})
					}
				}
			}
		}
	}
}

func testMatMul(t *testing.T, p *Pair, dt compute.DType, in, out, rows int, withBias bool) {
	xs, ws, bs := Randn(1, rows*in), Randn(2, out*in), Randn(3, out)
	x := p.F32(xs, rows+1, in)
	w := p.Weights(dt, ws, out, in) // ws now holds the rounded weights both backends see
	dst := p.F32(nil, rows+1, out)
	var bias [2]compute.Tensor
	if withBias {
		bias = p.F32(bs, out)
	}
	p.Do(func(b compute.Backend, i int) { b.MatMul(dst[i], x[i], w[i], bias[i], rows) })
	g, c := p.Read(dst, (rows+1)*out)
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

// CheckEmbedGather: Embed from tables of every weight dtype and Gather, bit for bit.
func CheckEmbedGather(t *testing.T, p *Pair) {
	const vocab, dim, rows = 50, 72, 9
	ids := []int32{3, 49, 0, 7, 7, 12, 33, 1, 48}
	for _, dt := range weightDTypes {
		t.Run(dt.String(), func(t *testing.T) {
			p.T = t
			table := p.Weights(dt, Randn(4, vocab*dim), vocab, dim)
			tokens := p.I32(ids, rows)
			x := p.F32(nil, rows, dim)
			p.Do(func(b compute.Backend, i int) { b.Embed(x[i], table[i], tokens[i], rows) })
			g, c := p.Read(x, rows*dim)
			SameBits(t, "x", g, c)

			index := p.I32([]int32{8, 0, 4, 4}, 4)
			dst := p.F32(nil, 4, dim)
			p.Do(func(b compute.Backend, i int) { b.Gather(dst[i], x[i], index[i], 4) })
			g, c = p.Read(dst, 4*dim)
			SameBits(t, "gathered", g, c)
		})
	}
}

// CheckRMSNorm: RMSNorm and AddRMSNorm within 2e-6 relative; the residual bit for bit; in place.
func CheckRMSNorm(t *testing.T, p *Pair) {
	const eps = 1e-6
	for _, d := range []int{16, 64, 77, 256, 257, 384, 4096, 5000} {
		for _, n := range []int{1, 5, 33} {
			for _, add := range []bool{false, true} {
				t.Run(fmt.Sprint(d, n, add), func(t *testing.T) {
					p.T = t
					x := p.F32(Randn(5, n*d), n, d)
					res := p.F32(Randn(6, n*d), n, d)
					w := p.F32(Randn(7, d), d)
					dst := p.F32(nil, n, d)
					p.Do(func(b compute.Backend, i int) {
						if add {
							b.AddRMSNorm(dst[i], res[i], x[i], w[i], n, eps)
						} else {
							b.RMSNorm(dst[i], x[i], w[i], n, eps)
						}
					})
					g, c := p.Read(dst, n*d)
					Near(t, "dst", g, c, 2e-6, 1e-3)
					if add {
						g, c = p.Read(res, n*d)
						SameBits(t, "residual", g, c)
					} else {
						// In place: dst is x.
						want := g
						p.Do(func(b compute.Backend, i int) { b.RMSNorm(x[i], x[i], w[i], n, eps) })
						g, _ = p.Read(x, n*d)
						SameBits(t, "in place", g, want)
					}
				})
			}
		}
	}
}

// CheckRoPE: RoPE within 1e-6 of the values' scale.
func CheckRoPE(t *testing.T, p *Pair) {
	for _, hd := range []int{16, 64, 128} {
		for _, heads := range []int{2, 6} {
			t.Run(fmt.Sprint(hd, heads), func(t *testing.T) {
				p.T = t
				const rows = 7
				freqs := make([]float32, hd/2)
				for j := range freqs {
					freqs[j] = float32(1 / math.Pow(10000, float64(2*j)/float64(hd)))
				}
				x := p.F32(Randn(8, rows*heads*hd), rows, heads*hd)
				pos := p.I32([]int32{0, 1, 2, 100, 1000, 4095, 77777}, rows)
				inv := p.F32(freqs, hd/2)
				p.Do(func(b compute.Backend, i int) { b.RoPE(x[i], pos[i], inv[i], rows, heads) })
				g, c := p.Read(x, rows*heads*hd)
				// Same steps as the CPU; only an F64 cos or sin rounding the other way apart.
				Near(t, "x", g, c, 1e-6, 1)
			})
		}
	}
}

// CheckSiLUMulAdd: SiLUMul within 2e-6 relative, Add bit for bit, the row past rows untouched.
func CheckSiLUMulAdd(t *testing.T, p *Pair) {
	const rows, width = 5, 1000
	gate := p.F32(Randn(9, rows*width), rows, width)
	up := p.F32(Randn(10, rows*width), rows, width)
	dst := p.F32(nil, rows, width)
	p.Do(func(b compute.Backend, i int) { b.SiLUMul(dst[i], gate[i], up[i], rows) })
	g, c := p.Read(dst, rows*width)
	t.Logf("SiLUMul: worst relative difference %.3g", Near(t, "silu", g, c, 2e-6, 1e-30))
	// Add over all but the last row, which must keep the GPU's SiLUMul output.
	last := slices.Clone(g[(rows-1)*width:])
	p.Do(func(b compute.Backend, i int) { b.Add(dst[i], gate[i], up[i], rows-1) })
	g, c = p.Read(dst, rows*width)
	SameBits(t, "add", g[:(rows-1)*width], c[:(rows-1)*width])
	SameBits(t, "the row past rows", g[(rows-1)*width:], last)
}

// CheckGELUTanhMul: GELUTanhMul within 2e-6 relative, in place too (dst = gate, as the engine
// calls it), the row past rows untouched.
func CheckGELUTanhMul(t *testing.T, p *Pair) {
	const rows, width = 5, 1000
	gate := p.F32(Randn(12, rows*width), rows, width)
	up := p.F32(Randn(13, rows*width), rows, width)
	p.Do(func(b compute.Backend, i int) { b.GELUTanhMul(gate[i], gate[i], up[i], rows-1) })
	g, c := p.Read(gate, rows*width)
	t.Logf("GELUTanhMul: worst relative difference %.3g", Near(t, "gelu", g[:(rows-1)*width], c[:(rows-1)*width], 2e-6, 1e-30))
	SameBits(t, "the row past rows", g[(rows-1)*width:], c[(rows-1)*width:])
}

// CheckClampedSwiGLU: ClampedSwiGLU within 2e-6 relative, in place (dst = gate, as the engine
// calls it), with gates and ups past the limit both ways; the row past rows untouched.
func CheckClampedSwiGLU(t *testing.T, p *Pair) {
	const rows, width = 5, 1000
	gs, us := Randn(14, rows*width), Randn(15, rows*width)
	for i := range gs {
		gs[i] *= 4 // a limit of 7 clamps a few percent of each
		us[i] *= 4
	}
	gate, up := p.F32(gs, rows, width), p.F32(us, rows, width)
	p.Do(func(b compute.Backend, i int) { b.ClampedSwiGLU(gate[i], gate[i], up[i], rows-1, 1.702, 7) })
	g, c := p.Read(gate, rows*width)
	t.Logf("ClampedSwiGLU: worst relative difference %.3g", Near(t, "clamped swiglu", g[:(rows-1)*width], c[:(rows-1)*width], 2e-6, 1e-30))
	SameBits(t, "the row past rows", g[(rows-1)*width:], c[(rows-1)*width:])
}

// kvCase is a pool filled with random keys and values for sessions, and the rows that attend
// over them.
type kvCase struct {
	spec   compute.KVSpec
	heads  int
	bases  []int32 // per session
	length []int   // per session
}

// CheckAttention: KVWrite then Attention over three sessions, rows in a mixed order, within 1e-5
// of the values' scale; then over a session of 2,100 keys, whose rows a GPU backend splits into
// many parts (positions past 1,024 put several chunks of keys in each of its splits). Every case
// runs again with sinks, some heads' above their scores and some below.
func CheckAttention(t *testing.T, p *Pair) {
	short := []int{0, 1, 39, 127, 128, 129, 299}
	long := []int{0, 63, 64, 65, 1023, 1024, 1025, 1500, 2099}
	for _, c := range []attentionCase{
		{16, 4, 2, 1200, []int32{0, 300, 700}, []int{40, 300, 129}, short},
		{64, 6, 2, 1200, []int32{0, 300, 700}, []int{40, 300, 129}, short},
		{128, 8, 8, 1200, []int32{0, 300, 700}, []int{40, 300, 129}, short},
		{256, 4, 1, 1200, []int32{0, 300, 700}, []int{40, 300, 129}, short},
		{128, 8, 2, 2400, []int32{0, 2200}, []int{2100, 150}, long},
		{256, 2, 1, 2400, []int32{0, 2200}, []int{2100, 150}, long},
	} {
		for _, withSinks := range []bool{false, true} {
			t.Run(fmt.Sprint(c.hd, c.heads, c.kvHeads, c.slots, " sinks ", withSinks), func(t *testing.T) {
				p.T = t
				checkAttention(t, p, c, withSinks)
			})
		}
	}
}

// attentionCase is a pool's shape, its sessions (where each starts and how long it is), and the
// positions its rows attend from.
type attentionCase struct {
	hd, heads, kvHeads, slots int
	bases                     []int32
	length, positions         []int
}

func checkAttention(t *testing.T, p *Pair, c attentionCase, withSinks bool) {
	kc := kvCase{spec: compute.KVSpec{Layers: 2, KVHeads: c.kvHeads, HeadDim: c.hd, Slots: c.slots},
		heads: c.heads, bases: c.bases, length: c.length}
	kv := fillKV(t, p, kc, 1)
	// Rows of every session at several positions, in a mixed order.
	var bases, positions []int32
	for _, pos := range c.positions {
		for s := range kc.bases {
			if pos < kc.length[s] {
				bases, positions = append(bases, kc.bases[s]), append(positions, int32(pos))
			}
		}
	}
	rows, qw := len(bases), c.heads*c.hd
	q := p.F32(Randn(20, rows*qw), rows, qw)
	bt, pt := p.I32(bases, rows), p.I32(positions, rows)
	dst := p.F32(nil, rows, qw)
	scale := float32(1 / math.Sqrt(float64(c.hd)))
	var sinks [2]compute.Tensor
	if withSinks {
		s := Randn(21, c.heads)
		for h := range s {
			s[h] *= 4
		}
		sinks = p.F32(s, c.heads)
	}
	p.Do(func(b compute.Backend, i int) {
		b.Attention(dst[i], q[i], kv[i], 1, bt[i], pt[i], sinks[i], rows, c.heads, scale)
	})
	g, cc := p.Read(dst, rows*qw)
	// The output is a convex combination of values of magnitude about 1 (scaled down by a sink).
	t.Logf("worst |Δ| %.3g", Near(t, "attention", g, cc, 1e-5, 1))
}

// fillKV writes random keys and values for every position of every session of kc into layers 0
// and 1 of a new pool on both backends, through KVWrite.
func fillKV(t testing.TB, p *Pair, kc kvCase, seed uint64) [2]compute.KV {
	var kv [2]compute.KV
	for i, b := range p.Backends {
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
	bt, pt := p.I32(bases, rows), p.I32(positions, rows)
	for l := range kc.spec.Layers {
		k := p.F32(Randn(seed+uint64(10*l), rows*st), rows, st)
		v := p.F32(Randn(seed+uint64(10*l+1), rows*st), rows, st)
		p.Do(func(b compute.Backend, i int) { b.KVWrite(kv[i], l, k[i], v[i], bt[i], pt[i], rows) })
	}
	return kv
}

// CheckDataErrors checks that kernels report bad tokens, indices and slots at the next Sync, and
// that the Sync after it is clean.
func CheckDataErrors(t *testing.T, b compute.Backend) {
	table := UploadF32(t, b, Randn(1, 10*8), 10, 8)
	x, _ := b.Alloc(compute.F32, 2, 8)
	b.Embed(x, table, UploadI32(t, b, []int32{3, 10}), 2)
	if err := b.Sync(); err == nil || !strings.Contains(err.Error(), "token 10 of row 1") {
		t.Errorf("Embed of token 10 of 10: Sync = %v", err)
	}
	if got := ReadOne(t, b, x, 16); got[8] != 0 || got[0] == 0 {
		t.Errorf("Embed: row 0 %v, row 1 %v (want the table's row, then zeros)", got[:8], got[8:])
	}
	kv, err := b.NewKV(compute.KVSpec{Layers: 1, KVHeads: 1, HeadDim: 8, Slots: 4})
	if err != nil {
		t.Fatal(err)
	}
	k := UploadF32(t, b, Randn(2, 8), 1, 8)
	b.KVWrite(kv, 0, k, k, UploadI32(t, b, []int32{2}), UploadI32(t, b, []int32{2}), 1)
	if err := b.Sync(); err == nil || !strings.Contains(err.Error(), "KVWrite") {
		t.Errorf("KVWrite to slot 4 of 4: Sync = %v", err)
	}
	b.Attention(x, x, kv, 0, UploadI32(t, b, []int32{0}), UploadI32(t, b, []int32{4}), nil, 1, 1, 1)
	if err := b.Sync(); err == nil || !strings.Contains(err.Error(), "Attention") {
		t.Errorf("Attention over slots 0..4 of 4: Sync = %v", err)
	}
	b.Gather(x, table, UploadI32(t, b, []int32{-1}), 1)
	if err := b.Sync(); err == nil || !strings.Contains(err.Error(), "Gather") {
		t.Errorf("Gather of row -1: Sync = %v", err)
	}
	groups, _ := b.Alloc(compute.I32, 4+1+2)
	b.GroupByExpert(groups, UploadI32(t, b, []int32{1, 4}), 2, 4)
	if err := b.Sync(); err == nil || !strings.Contains(err.Error(), "GroupByExpert: pair 1 has expert 4") {
		t.Errorf("GroupByExpert of expert 4 of 4: Sync = %v", err)
	}
	if err := b.Sync(); err != nil {
		t.Errorf("Sync after the errors were reported: %v", err)
	}
}
