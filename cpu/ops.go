package cpu

import (
	"fmt"
	"math"
	"slices"

	"tfd/compute"
)

// Embed writes table[tokens[r]] into x[r] for r < rows, widening an F16 or BF16 table's rows and
// dequantizing a quantized table's. A token outside the table gets a zero row and is reported by
// the next Sync.
func (b *backend) Embed(x, table, tokens compute.Tensor, rows int) {
	tt := asTensor(table, "Embed", "table")
	if len(tt.shape) != 2 {
		panic(fmt.Sprintf("cpu: Embed: table has shape %v, want [vocab, dim]", tt.shape))
	}
	vocab, dim := tt.shape[0], tt.shape[1]
	var tab []float32
	var tabh []uint16
	if tt.q == nil {
		tab, tabh = weights(table, "Embed", "table", vocab*dim)
	}
	xf := f32(x, "Embed", "x", rows*dim)
	ids := i32(tokens, "Embed", "tokens", rows)
	for r, id := range ids[:rows] {
		row := xf[r*dim : (r+1)*dim]
		if id < 0 || int(id) >= vocab {
			b.fail("Embed: token %d of row %d is outside the vocabulary of %d", id, r, vocab)
			clear(row)
			continue
		}
		if tt.q != nil {
			tt.q.row(row, int(id))
			continue
		}
		copyRow(row, tab, tabh, int(id)*dim, tt.dtype)
	}
}

// Gather writes dst[i] = src[index[i]] for i < rows, whole rows of src's row length, widening an
// F16 or BF16 src's rows. An index outside src gets a zero row and is reported by the next Sync.
func (b *backend) Gather(dst, src, index compute.Tensor, rows int) {
	st := asTensor(src, "Gather", "src")
	if len(st.shape) == 0 {
		panic("cpu: Gather: src has no rows")
	}
	n, w := st.shape[0], st.rowLen()
	s, sh := weights(src, "Gather", "src", n*w)
	d := f32(dst, "Gather", "dst", rows*w)
	idx := i32(index, "Gather", "index", rows)
	for i, j := range idx[:rows] {
		row := d[i*w : (i+1)*w]
		if j < 0 || int(j) >= n {
			b.fail("Gather: index %d of row %d is outside src's %d rows", j, i, n)
			clear(row)
			continue
		}
		copyRow(row, s, sh, int(j)*w, st.dtype)
	}
}

// copyRow fills row with the elements from offset off of an F32 tensor's f or, widened, of a
// 16-bit tensor's h (of dtype).
func copyRow(row, f []float32, h []uint16, off int, dtype compute.DType) {
	if h != nil {
		widen(row, h[off:], dtype)
	} else {
		copy(row, f[off:])
	}
}

// RMSNorm writes dst[i] = w·(x[i]·rsqrt(mean(x[i]²)+eps)) for n vectors of len(w) each, as Hugging
// Face computes it in F32: the sum of squares in the fixed dot order, divided by len(w), eps added,
// the reciprocal square root rounded to F32, x scaled by it and rounded, then multiplied by w.
// dst and x may be the same tensor.
func (b *backend) RMSNorm(dst, x, w compute.Tensor, n int, eps float32) {
	b.addRMSNorm("RMSNorm", dst, nil, x, w, n, eps)
}

// AddRMSNorm adds x into residual and then writes dst[i] = RMSNorm(residual[i])·w, for n vectors
// of len(w) each. dst may be x.
func (b *backend) AddRMSNorm(dst, residual, x, w compute.Tensor, n int, eps float32) {
	b.addRMSNorm("AddRMSNorm", dst, residual, x, w, n, eps)
}

func (b *backend) addRMSNorm(op string, dst, residual, x, w compute.Tensor, n int, eps float32) {
	wt := asTensor(w, op, "w")
	d := len(f32(w, op, "w", 0))
	if d == 0 {
		panic(fmt.Sprintf("cpu: %s: w %v is empty", op, wt.shape))
	}
	t := &b.norm
	*t = normTask{
		dst: f32(dst, op, "dst", n*d),
		x:   f32(x, op, "x", n*d),
		w:   wt.f,
		eps: eps,
	}
	if residual != nil {
		t.residual = f32(residual, op, "residual", n*d)
	}
	b.run(t, n, max(1, 4096/d), parFor(n*d*4))
	*t = normTask{}
}

// normTask normalises vectors; item i is vector i.
type normTask struct {
	dst, residual, x, w []float32 // residual is nil for a plain RMSNorm
	eps                 float32
}

func (t *normTask) run(_ *scratch, lo, hi int) {
	d := len(t.w)
	for i := lo; i < hi; i++ {
		x := t.x[i*d : (i+1)*d]
		if t.residual != nil {
			r := t.residual[i*d : (i+1)*d]
			for j, xj := range x {
				r[j] += xj
			}
			x = r
		}
		mean := dot(x, x) / float32(d)
		scale := float32(1 / math.Sqrt(float64(mean+t.eps)))
		out := t.dst[i*d : (i+1)*d]
		w := t.w[:d]
		for j, xj := range x {
			out[j] = w[j] * float32(xj*scale)
		}
	}
}

// RoPE rotates each head of x[r] in place by the angles positions[r]·invFreq[j] (an F32 product),
// pairing element j with j+headDim/2: x_j' = x_j·cos − x_{j+h}·sin, x_{j+h}' = x_{j+h}·cos + x_j·sin,
// each product rounded to F32 as Hugging Face's q·cos + rotate_half(q)·sin does. cos and sin are
// the F32 roundings of the F64 functions of the F32 angle.
func (b *backend) RoPE(x, positions, invFreq compute.Tensor, rows, heads int) {
	freqs := f32(invFreq, "RoPE", "invFreq", 0)
	half := len(freqs)
	hd := 2 * half
	pos := i32(positions, "RoPE", "positions", rows)[:rows]
	a := &b.angles
	fresh := !slices.Equal(a.positions, pos) || !slices.Equal(a.invFreq, freqs)
	if fresh {
		a.positions, a.invFreq = append(a.positions[:0], pos...), append(a.invFreq[:0], freqs...)
		a.cs = slices.Grow(a.cs[:0], rows*hd)[:rows*hd]
	}
	t := &b.rope
	*t = ropeTask{
		x:         f32(x, "RoPE", "x", rows*heads*hd),
		positions: pos,
		invFreq:   freqs,
		cs:        a.cs,
		fresh:     fresh,
		heads:     heads,
	}
	b.run(t, rows, 1, parFor(rows*(heads*hd+half*16)))
	*t = ropeTask{}
}

// ropeAngles keeps the cos and sin of the last RoPE call's rows, with copies of the positions and
// frequencies they were computed from: a forward rotates the queries and keys of every layer at
// the same positions with the same frequencies, so every call but its first takes them from here
// (on the bundled model, computing them took 5% of a prompt's time). Same values, same bits.
type ropeAngles struct {
	positions []int32
	invFreq   []float32
	cs        []float32 // row r's cos at r·hd, its sin at r·hd + hd/2
}

// ropeTask rotates rows; item r is row r. With fresh, it first computes the row's cos and sin into
// cs, else it reads them there.
type ropeTask struct {
	x         []float32
	positions []int32
	invFreq   []float32
	cs        []float32
	fresh     bool
	heads     int
}

func (t *ropeTask) run(_ *scratch, lo, hi int) {
	half := len(t.invFreq)
	hd := 2 * half
	for r := lo; r < hi; r++ {
		cos, sin := t.cs[r*hd:r*hd+half], t.cs[r*hd+half:(r+1)*hd]
		if t.fresh {
			pos := float32(t.positions[r])
			for j, f := range t.invFreq {
				a := float64(pos * f)
				cos[j], sin[j] = float32(math.Cos(a)), float32(math.Sin(a))
			}
		}
		row := t.x[r*t.heads*hd : (r+1)*t.heads*hd]
		for h := range t.heads {
			x0 := row[h*hd : h*hd+half]
			x1 := row[h*hd+half : (h+1)*hd]
			for j, c := range cos {
				a, b, sn := x0[j], x1[j], sin[j]
				x0[j] = float32(a*c) - float32(b*sn)
				x1[j] = float32(b*c) + float32(a*sn)
			}
		}
	}
}

// SiLUMul writes dst[r] = silu(gate[r])·up[r] for r < rows (rows of dst's row length), with
// silu(g) = g/(1+exp(−g)) in F32 (exp as in exp.go).
func (b *backend) SiLUMul(dst, gate, up compute.Tensor, rows int) {
	b.elementwise("SiLUMul", opSiLUMul, dst, gate, up, rows)
}

// ClampedSwiGLU writes dst[r] = (clamp(up[r], −limit, limit) + 1)·g·σ(alpha·g) with
// g = min(gate[r], limit), for r < rows (rows of dst's row length), in F32 with σ(x) = 1/(1 +
// exp(−x)) and exp as in exp.go (clampedSwiGLU).
func (b *backend) ClampedSwiGLU(dst, gate, up compute.Tensor, rows int, alpha, limit float32) {
	b.elementwiseWith("ClampedSwiGLU", opClampedSwiGLU, dst, gate, up, rows, alpha, limit)
}

// GELUTanhMul writes dst[r] = gelu_tanh(gate[r])·up[r] for r < rows (rows of dst's row length),
// in F32 with tanh from exp as in exp.go (geluTanhMul).
func (b *backend) GELUTanhMul(dst, gate, up compute.Tensor, rows int) {
	b.elementwise("GELUTanhMul", opGELUTanhMul, dst, gate, up, rows)
}

// Add writes dst[r] = a[r] + b[r] for r < rows (rows of dst's row length).
func (b *backend) Add(dst, x, y compute.Tensor, rows int) {
	b.elementwise("Add", opAdd, dst, x, y, rows)
}

const (
	opAdd = iota
	opSiLUMul
	opGELUTanhMul
	opClampedSwiGLU
)

func (b *backend) elementwise(op string, kind int, dst, x, y compute.Tensor, rows int) {
	b.elementwiseWith(op, kind, dst, x, y, rows, 0, 0)
}

// elementwiseWith is elementwise with the op's two parameters (ClampedSwiGLU's alpha and limit).
func (b *backend) elementwiseWith(op string, kind int, dst, x, y compute.Tensor, rows int, alpha, limit float32) {
	n := rows * asTensor(dst, op, "dst").rowLen()
	t := &b.elem
	*t = elemTask{
		kind:  kind,
		dst:   f32(dst, op, "dst", n),
		a:     f32(x, op, "a", n),
		b:     f32(y, op, "b", n),
		alpha: alpha,
		limit: limit,
	}
	cost := 1
	if kind != opAdd {
		cost = 16
	}
	b.run(t, n, 1<<13, parFor(n*cost))
	*t = elemTask{}
}

// elemTask is an elementwise op; item i is element i.
type elemTask struct {
	kind         int
	dst, a, b    []float32
	alpha, limit float32
}

func (t *elemTask) run(_ *scratch, lo, hi int) {
	dst, a, b := t.dst[lo:hi], t.a[lo:hi], t.b[lo:hi]
	switch t.kind {
	case opAdd:
		for i := range dst {
			dst[i] = a[i] + b[i]
		}
	case opSiLUMul:
		siluMul(dst, a, b)
	case opGELUTanhMul:
		geluTanhMul(dst, a, b)
	case opClampedSwiGLU:
		clampedSwiGLU(dst, a, b, t.alpha, t.limit)
	}
}

// ArgmaxNext implements compute.Chainer: the index of the largest of logits[:n], ties to the
// lowest, becomes tokens[0] and chain[step], and positions[0] moves one on.
func (b *backend) ArgmaxNext(logits, tokens, positions, chain compute.Tensor, n, step int) {
	best := argmax(f32(logits, "ArgmaxNext", "logits", n)[:n])
	i32(tokens, "ArgmaxNext", "tokens", 1)[0] = int32(best)
	i32(positions, "ArgmaxNext", "positions", 1)[0]++
	i32(chain, "ArgmaxNext", "chain", step+1)[step] = int32(best)
}

// ArgmaxRows implements compute.Picker: the argmax of each of rows logits rows from row first.
func (b *backend) ArgmaxRows(logits, picks compute.Tensor, first, rows, n int) {
	l := f32(logits, "ArgmaxRows", "logits", (first+rows)*n)
	p := i32(picks, "ArgmaxRows", "picks", rows)
	for r := range rows {
		p[r] = int32(argmax(l[(first+r)*n : (first+r+1)*n]))
	}
}

// argmax returns the index of the largest of l, ties to the lowest.
func argmax(l []float32) int {
	best := 0
	for i, v := range l {
		if v > l[best] {
			best = i
		}
	}
	return best
}

// VerifyDrafts implements compute.DraftVerifier: each row's argmax into the verdict, the drafts
// that landed, and the MTP head's rows for the forward's positions.
func (b *backend) VerifyDrafts(logits, tokens, positions, ropePositions, sources, wanted, verdict compute.Tensor, rows, n int) {
	const op = "VerifyDrafts"
	l := f32(logits, op, "logits", rows*n)
	tok, pos := i32(tokens, op, "tokens", rows), i32(positions, op, "positions", rows)
	rope, src, want := i32(ropePositions, op, "ropePositions", rows), i32(sources, op, "sources", rows), i32(wanted, op, "wanted", 1)
	v := i32(verdict, op, "verdict", compute.VerdictLen(rows))
	for r := range rows {
		v[1+r] = int32(argmax(l[r*n : (r+1)*n]))
	}
	j := 0
	for j < rows-1 && tok[1+j] == v[1+j] {
		j++
	}
	v[0], v[2*rows] = int32(j), pos[0]+int32(j)+1
	for r := range rows {
		tok[r], rope[r], src[r] = v[1+r], pos[r]+1, int32(r)
	}
	want[0] = int32(j)
}

// DraftNext implements compute.DraftVerifier: the MTP head's draft into the verdict, then its
// chained row, or at the last step the next forward's rows.
func (b *backend) DraftNext(logits, tokens, positions, ropePositions, sources, wanted, verdict compute.Tensor, rows, n, step int) {
	const op = "DraftNext"
	t := int32(argmax(f32(logits, op, "logits", n)[:n]))
	tok, pos := i32(tokens, op, "tokens", rows), i32(positions, op, "positions", rows)
	rope, src, want := i32(ropePositions, op, "ropePositions", 1), i32(sources, op, "sources", 1), i32(wanted, op, "wanted", rows)
	v := i32(verdict, op, "verdict", compute.VerdictLen(rows))
	v[1+rows+step] = t
	if step < rows-2 {
		p := pos[want[0]] + 1
		tok[0], pos[0], rope[0], src[0], want[0] = t, p, p+1, 0, 0
		return
	}
	p := v[2*rows]
	tok[0] = v[1+v[0]]
	for r := range rows {
		if r > 0 {
			tok[r] = v[rows+r]
		}
		pos[r], want[r] = p+int32(r), int32(r)
	}
}
