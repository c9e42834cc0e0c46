package cpu

import (
	"fmt"
	"math"
	"runtime"

	"tfd/compute"
	"tfd/quant"
)

// KVWrite stores k[r] and v[r] (rows of kvHeads×headDim) into slot bases[r]+positions[r] of the
// layer. A row whose slot falls outside the pool is skipped and reported by the next Sync.
func (b *backend) KVWrite(kv compute.KV, layer int, k, v, bases, positions compute.Tensor, rows int) {
	p := asKV(kv, "KVWrite", layer)
	st := p.stride()
	kf := f32(k, "KVWrite", "k", rows*st)
	vf := f32(v, "KVWrite", "v", rows*st)
	bs := i32(bases, "KVWrite", "bases", rows)
	ps := i32(positions, "KVWrite", "positions", rows)
	for r := range rows {
		slot, ok := p.slot(bs[r], ps[r])
		if !ok {
			b.fail("KVWrite: row %d: slot %d+%d is outside the pool's %d slots", r, bs[r], ps[r], p.spec.Slots)
			continue
		}
		if p.half() {
			narrowKV(p.kh[layer][slot*st:(slot+1)*st], kf[r*st:(r+1)*st])
			narrowKV(p.vh[layer][slot*st:(slot+1)*st], vf[r*st:(r+1)*st])
			continue
		}
		copy(p.k[layer][slot*st:(slot+1)*st], kf[r*st:(r+1)*st])
		copy(p.v[layer][slot*st:(slot+1)*st], vf[r*st:(r+1)*st])
	}
}

// narrowKV stores src rounded to the nearest F16 (ties to even) in dst.
func narrowKV(dst []uint16, src []float32) {
	dst = dst[:len(src)]
	for i, f := range src {
		dst[i] = quant.F32ToF16(f)
	}
}

// widenKV writes n vectors of hd F16 values, the first at src[0:] and the next stride elements on,
// into dst, back to back, as widenOperands widens weights: exactly, a NaN perhaps quieted, which
// no product tells.
func widenKV(dst []float32, src []uint16, stride, n, hd int) {
	for j := range n {
		widenOperands(dst[j*hd:(j+1)*hd], src[j*stride:j*stride+hd], compute.F16)
	}
}

// slot returns base+pos and whether it is a slot of the pool.
func (kv *kvPool) slot(base, pos int32) (int, bool) {
	s := int(base) + int(pos)
	return s, base >= 0 && pos >= 0 && s < kv.spec.Slots
}

// Attention writes, for row r and query head h, softmax(scale·q·K)·V over slots bases[r] ..
// bases[r]+positions[r] of the layer, with K and V of head h/(heads/kvHeads). Each (row, head)
// reads only its own keys, in position order:
//
//	s_j = dot(q, k_j)·scale      (dot in the fixed order)
//	m   = max_j s_j
//	e_j = exp(s_j − m)           (exp.go)
//	sum = Σ_j e_j                (element j into lane j%8, the lanes in the fixed tree)
//	out = (Σ_j e_j·v_j) / sum    (per element, in j order)
//
// An item of work is a few consecutive rows of one session (a prefill chunk), one kv head and a
// few of its query heads; it goes through the keys in blocks, so that each block is read from
// memory once for all of them. How rows and heads are grouped changes no bits: every score is the
// same dot product, and the weighted sums continue across blocks exactly where they stopped. A
// row whose slots fall outside the pool gets zeros and is reported by the next Sync.
//
// With sinks, head h's sink joins the maximum and the sum: m = max(sink_h, max_j s_j), and
// exp(sink_h − m) is added to the lanes' sum after their tree.
func (b *backend) Attention(dst, q compute.Tensor, kv compute.KV, layer int, bases, positions, sinks compute.Tensor, rows, heads int, scale float32) {
	p := asKV(kv, "Attention", layer)
	hd, kvh := p.spec.HeadDim, p.spec.KVHeads
	if heads <= 0 || heads%kvh != 0 {
		panic(fmt.Sprintf("cpu: Attention: %d query heads is not a multiple of the pool's %d kv heads", heads, kvh))
	}
	t := &b.att
	*t = attentionTask{
		dst:       f32(dst, "Attention", "dst", rows*heads*hd),
		q:         f32(q, "Attention", "q", rows*heads*hd),
		layer:     layer,
		bases:     i32(bases, "Attention", "bases", rows),
		positions: i32(positions, "Attention", "positions", rows),
		kv:        p,
		heads:     heads,
		group:     heads / kvh,
		scale:     scale,
		groups:    t.groups,
	}
	if sinks != nil {
		t.sinks = f32(sinks, "Attention", "sinks", heads)
	}
	work, longest := 0, 0
	for r := range rows {
		if _, ok := p.slot(t.bases[r], t.positions[r]); !ok {
			b.fail("Attention: row %d: slots %d..%d+%d are outside the pool's %d slots", r, t.bases[r], t.bases[r], t.positions[r], p.spec.Slots)
			continue
		}
		n := int(t.positions[r]) + 1
		work += n * heads * hd * 2
		longest = max(longest, n)
	}
	// Group as much as keeps every goroutine busy: rows first, then heads.
	busy := 2 * runtime.GOMAXPROCS(0)
	t.chunk = min(attMaxHeads, t.group)
	t.chunks = (t.group + t.chunk - 1) / t.chunk
	t.groupRows(rows, attMaxRows)
	if len(t.groups)*kvh*t.chunks < busy {
		t.groupRows(rows, 1)
		if rows*kvh*t.chunks < busy {
			t.chunk, t.chunks = 1, t.group
		}
	}
	if p.half() {
		t.widenShared(b)
	}
	b.pool.reserve(attMaxRows * t.chunk * longest)
	b.run(t, len(t.groups)*kvh*t.chunks, 1, parFor(work))
	*t = attentionTask{groups: t.groups[:0]}
}

// attWideBytes bounds the slots of an F16 pool that one Attention call widens for its prompt
// rows (widenShared); past it each item widens its blocks itself.
const attWideBytes = 64 << 20

// widenShared widens, once for the call, the slots of an F16 pool that its groups of several rows
// read (a prompt's chunk), where they take at most attWideBytes: each such group would otherwise
// widen every block of them for each of its chunks of heads. block then reads them there. A
// group of one row (a decode step) reads the pool as it is.
func (t *attentionTask) widenShared(b *backend) {
	lo, hi := math.MaxInt, 0
	for _, rg := range t.groups {
		base := int(t.bases[rg.first])
		if _, ok := t.kv.slot(t.bases[rg.first], t.positions[rg.first]); rg.n < 2 || !ok {
			continue
		}
		lo = min(lo, base)
		for r := rg.first; r < rg.first+rg.n; r++ {
			hi = max(hi, base+int(t.positions[r])+1)
		}
	}
	st := t.kv.stride()
	n := (hi - lo) * st
	if hi <= lo || 2*n*4 > attWideBytes {
		return
	}
	if cap(b.attWide) < 2*n {
		b.attWide = make([]float32, 2*n)
	}
	t.wideLo, t.wideHi = lo, hi
	t.wk, t.wv = b.attWide[:n], b.attWide[n:2*n]
	w := &b.wkv
	*w = widenKVTask{dst: [2][]float32{t.wk, t.wv}, src: [2][]uint16{t.kv.kh[t.layer][lo*st : hi*st], t.kv.vh[t.layer][lo*st : hi*st]}}
	b.run(w, 2*((n+widenChunk-1)/widenChunk), 1, parFor(2*n))
	*w = widenKVTask{}
}

// widenKVTask widens an F16 pool's keys (item 2c) and values (2c+1), widenChunk elements an item.
type widenKVTask struct {
	dst [2][]float32
	src [2][]uint16
}

const widenChunk = 1 << 14

func (w *widenKVTask) run(_ *scratch, lo, hi int) {
	for i := lo; i < hi; i++ {
		d, s := w.dst[i%2], w.src[i%2]
		at := i / 2 * widenChunk
		end := min(at+widenChunk, len(d))
		widenOperands(d[at:end], s[at:end], compute.F16)
	}
}

// Limits of an attention item: the rows of one session, and the query heads of one kv head, that
// share each block of keys. attMaxHeads matches the assembly kernel's three rows.
const (
	attMaxRows  = 4
	attMaxHeads = 3
)

type attentionTask struct {
	dst, q           []float32
	layer            int
	wk, wv           []float32 // an F16 pool's slots wideLo … wideHi-1, widened (widenShared), or nil
	wideLo, wideHi   int
	sinks            []float32 // [heads], or nil
	bases, positions []int32
	kv               *kvPool
	heads, group     int
	chunk, chunks    int // query heads per item, items per kv head
	scale            float32
	groups           []rowGroup
}

// rowGroup is a run of consecutive rows of one session that share items: rows first..first+n-1.
type rowGroup struct{ first, n int }

// groupRows groups up to most consecutive rows that read the same session. A row with slots
// outside the pool stays alone.
func (t *attentionTask) groupRows(rows, most int) {
	t.groups = t.groups[:0]
	for r := range rows {
		_, ok := t.kv.slot(t.bases[r], t.positions[r])
		if g := len(t.groups) - 1; ok && g >= 0 {
			last := &t.groups[g]
			_, lastOK := t.kv.slot(t.bases[last.first], t.positions[last.first])
			if lastOK && last.n < most && t.bases[last.first] == t.bases[r] {
				last.n++
				continue
			}
		}
		t.groups = append(t.groups, rowGroup{r, 1})
	}
}

func (t *attentionTask) run(s *scratch, lo, hi int) {
	for i := lo; i < hi; i++ {
		rg, c := t.groups[i/(t.kv.spec.KVHeads*t.chunks)], i%(t.kv.spec.KVHeads*t.chunks)
		g := c / t.chunks                    // kv head
		h0 := g*t.group + c%t.chunks*t.chunk // first query head
		nh := min(t.chunk, (g+1)*t.group-h0) // query heads in this item
		t.item(s, rg, g, h0, nh)
	}
}

// item computes query heads h0..h0+nh-1 of kv head g for the rows of rg.
func (t *attentionTask) item(s *scratch, rg rowGroup, g, h0, nh int) {
	hd := t.kv.spec.HeadDim
	n8 := hd &^ 7
	base := int(t.bases[rg.first])
	if _, ok := t.kv.slot(t.bases[rg.first], t.positions[rg.first]); !ok {
		clear(t.dst[(rg.first*t.heads+h0)*hd : (rg.first*t.heads+h0+nh)*hd])
		return
	}
	// keys(r) is the number of keys row r reads; e holds the scores of (row i, head h) at
	// e[(i·nh+h)·width:].
	keys := func(i int) int { return int(t.positions[rg.first+i]) + 1 }
	width := 0
	for i := range rg.n {
		width = max(width, keys(i))
	}
	e := s.floats(rg.n * nh * width)
	q := func(i, h int) []float32 { // row i's query head h0+h
		o := ((rg.first+i)*t.heads + h0 + h) * hd
		return t.q[o : o+hd]
	}
	out := func(i, h int) []float32 {
		o := ((rg.first+i)*t.heads + h0 + h) * hd
		return t.dst[o : o+hd]
	}
	block := max(8, attBlockBytes/(4*hd))

	// Scores, block by block of keys: the nh heads of a row are the rows of one vdots; then the
	// dot products' tails, where hd is not a multiple of 8. One row of an F16 pool (a decode
	// step) reads the keys as they are stored (vdotsHalf: the bits of vdots on them widened), and
	// below its values.
	direct := t.kv.half() && rg.n == 1 && halfDirect(compute.F16)
	for j0 := 0; j0 < width; j0 += block {
		k, kh, ks := t.block(s, false, direct, base+j0, g, min(block, width-j0))
		for i := range rg.n {
			n := keys(i)
			if j0 >= n {
				continue
			}
			o := ((rg.first+i)*t.heads + h0) * hd
			if direct {
				vdotsHalf(e[i*nh*width+j0:], width, t.q[o:o+nh*hd], hd, nh, kh, compute.F16, ks, min(block, n-j0), n8)
			} else {
				vdots(e[i*nh*width+j0:], width, t.q[o:o+nh*hd], hd, nh, k, ks, min(block, n-j0), n8)
			}
			if n8 == hd {
				continue
			}
			var tail [8]float32
			for h := range nh {
				qt := q(i, h)[n8:]
				for j := range min(block, n-j0) {
					kt := tail[:hd-n8]
					if direct {
						for d := range kt {
							kt[d] = quant.F16ToF32(kh[j*ks+n8+d])
						}
					} else {
						kt = k[j*ks+n8 : j*ks+hd]
					}
					at := (i*nh+h)*width + j0 + j
					e[at] = dotTail(e[at], qt, kt)
				}
			}
		}
	}
	// Softmax of each (row, head).
	var sums [attMaxRows * attMaxHeads]float32
	for i := range rg.n {
		for h := range nh {
			sums[i*nh+h] = t.softmax(e[(i*nh+h)*width:(i*nh+h)*width+keys(i)], h0+h)
		}
	}
	// Weighted sums of the values, block by block of keys, then the division; a decode row reads
	// an F16 pool's values as they are stored too (wsumHalf: the bits of wsum on them widened).
	for j0 := 0; j0 < width; j0 += block {
		v, vh, vs := t.block(s, true, direct, base+j0, g, min(block, width-j0))
		for i := range rg.n {
			if n := keys(i); j0 < n {
				for h := range nh {
					ee := e[(i*nh+h)*width+j0 : (i*nh+h)*width+min(j0+block, n)]
					if direct {
						wsumHalf(out(i, h), ee, vh, vs, j0 > 0)
					} else {
						wsum(out(i, h), ee, v, vs, j0 > 0)
					}
				}
			}
		}
	}
	for i := range rg.n {
		for h := range nh {
			o, sum := out(i, h), sums[i*nh+h]
			for d := range o {
				o[d] /= sum
			}
		}
	}
}

// block returns n keys (values: true) of kv head g from slot on, and the stride between them: in
// an F32 pool, the pool's own memory as f; in an F16 pool, as stored (h) where stored is set,
// else widened (f): by widenShared, or into s, back to back.
func (t *attentionTask) block(s *scratch, values, stored bool, slot, g, n int) (f []float32, h []uint16, stride int) {
	hd, st := t.kv.spec.HeadDim, t.kv.stride()
	at := slot*st + g*hd
	if !t.kv.half() {
		if values {
			return t.kv.v[t.layer][at:], nil, st
		}
		return t.kv.k[t.layer][at:], nil, st
	}
	src := t.kv.kh[t.layer]
	if values {
		src = t.kv.vh[t.layer]
	}
	switch {
	case stored:
		return nil, src[at:], st
	case t.wk != nil && slot >= t.wideLo && slot+n <= t.wideHi:
		at -= t.wideLo * st
		if values {
			return t.wv[at:], nil, st
		}
		return t.wk[at:], nil, st
	}
	if cap(s.wide) < n*hd {
		s.wide = make([]float32, n*hd)
	}
	dst := s.wide[:n*hd]
	widenKV(dst, src[at:], st, n, hd)
	return dst, nil, hd
}

// attBlockBytes is the size of a block of keys (or values) of one kv head: small enough to stay
// in the L1 or L2 cache while every row and head of an item passes over it.
var attBlockBytes = 32 << 10

// softmax turns one (row, head)'s dot products in e into exponentials and returns their sum: it
// scales, subtracts the maximum and exponentiates. The head's sink, if any, joins the maximum and
// adds its exponential to the sum last.
func (t *attentionTask) softmax(e []float32, head int) float32 {
	m := float32(math.Inf(-1))
	for j, sj := range e {
		sj *= t.scale
		e[j] = sj
		if sj > m {
			m = sj
		}
	}
	if t.sinks == nil {
		return softmaxExp(e, m)
	}
	sink := t.sinks[head]
	m = max(m, sink)
	return softmaxExp(e, m) + expGo(sink-m)
}
