//go:build darwin && arm64

package metal

import (
	"fmt"
	"math"

	"tfd/compute"
	"tfd/kernels"
)

// Every op checks its arguments as tfd/cuda's do (a misuse panics, as on the CPU backend) and
// encodes one launch, as kernels.*Launch says, into the open compute pass; none waits. The
// kernels and the orders of their reductions are in tfd/kernels.

// weightSuffix names a weight dtype as the kernels' variants do, or "" for one they lack.
func weightSuffix(d compute.DType) string {
	switch d {
	case compute.BF16:
		return "bf16"
	case compute.F16:
		return "f16"
	case compute.F32:
		return "f32"
	}
	return ""
}

// Embed writes table[tokens[r]] into x[r] for r < rows. A token outside the table gets a zero row
// and is reported by the next Sync.
func (b *backend) Embed(x, table, tokens compute.Tensor, rows int) {
	tt := b.asTensor(table, "Embed", "table")
	if tt.dtype.Quantized() {
		b.embedQuant(x, tt, tokens, rows)
		return
	}
	w := weightSuffix(tt.dtype)
	if len(tt.shape) != 2 || w == "" {
		panic(fmt.Sprintf("metal: Embed: table is %v %v, want [vocab, dim] of F32, F16 or BF16", tt.dtype, tt.shape))
	}
	vocab, dim := tt.shape[0], tt.shape[1]
	xt := b.tensorOf(x, "Embed", "x", compute.F32, rows*dim)
	ids := b.tensorOf(tokens, "Embed", "tokens", compute.I32, rows)
	b.dispatch(kernels.EmbedLaunch(w, rows, dim), bufArg(xt), bufArg(tt), bufArg(ids), i32(vocab), i32(dim), b.errArg())
}

// Gather writes dst[i] = src[index[i]] for i < rows, whole rows of src's row length. An index
// outside src gets a zero row and is reported by the next Sync.
func (b *backend) Gather(dst, src, index compute.Tensor, rows int) {
	st := b.tensorOf(src, "Gather", "src", compute.F32, 0)
	if len(st.shape) == 0 {
		panic("metal: Gather: src has no rows")
	}
	n, w := st.shape[0], st.rowLen()
	d := b.tensorOf(dst, "Gather", "dst", compute.F32, rows*w)
	idx := b.tensorOf(index, "Gather", "index", compute.I32, rows)
	b.dispatch(kernels.GatherLaunch(rows, w), bufArg(d), bufArg(st), bufArg(idx), i32(n), i32(w), b.errArg())
}

// RMSNorm writes dst[i] = w·(x[i]·rsqrt(mean(x[i]²)+eps)) for n vectors of len(w) each. dst may
// be x.
func (b *backend) RMSNorm(dst, x, w compute.Tensor, n int, eps float32) {
	b.rmsnorm("RMSNorm", dst, nil, x, w, n, eps)
}

// AddRMSNorm adds x into residual, then writes dst[i] = RMSNorm(residual[i])·w, for n vectors of
// len(w) each. dst may be x.
func (b *backend) AddRMSNorm(dst, residual, x, w compute.Tensor, n int, eps float32) {
	b.rmsnorm("AddRMSNorm", dst, residual, x, w, n, eps)
}

// rmsnorm launches the norm kernel for d-element vectors; without a residual, x is bound in its place (as tfd/cuda
// does) and the kernel's accumulate flag is 0, so it is only read.
func (b *backend) rmsnorm(op string, dst, residual, x, w compute.Tensor, n int, eps float32) {
	wt := b.tensorOf(w, op, "w", compute.F32, 0)
	d := wt.n
	if d == 0 {
		panic(fmt.Sprintf("metal: %s: w %v is empty", op, wt.shape))
	}
	dt := b.tensorOf(dst, op, "dst", compute.F32, n*d)
	xt := b.tensorOf(x, op, "x", compute.F32, n*d)
	rt, add := xt, 0
	if residual != nil {
		rt, add = b.tensorOf(residual, op, "residual", compute.F32, n*d), 1
	}
	l := kernels.RMSNormLaunch(n, d)
	if d >= kernels.RMSNormRowFrom { // rmsnorm_row: x as it is, no quarters here
		b.dispatch(l, bufArg(dt), bufArg(rt), bufArg(xt), bufArg(wt), i32(n), i32(d), f32(eps), i32(add), arg{}, arg{}, i32(0), i32(0))
		return
	}
	b.dispatch(l, bufArg(dt), bufArg(rt), bufArg(xt), bufArg(wt), i32(n), i32(d), f32(eps), i32(add))
}

// MatMul writes dst[r][o] = Σ_i x[r][i]·w[o][i] + bias[o] for r < rows; w is [out, in] of F32,
// F16 or BF16, or quantized (quant_darwin.go); bias is nil (the dummy buffer is bound, never read)
// or [out]. dst must not overlap x. BF16 weights whose rows are a multiple of 32 long run on
// SIMD-group matrices, the others on the lanes of each SIMD group (kernels.MatMulLaunch); either
// way the kernel follows the weights alone, and its tiles change no bits (kernels/src/mma.kern,
// matmul.kern).
func (b *backend) MatMul(dst, x, w, bias compute.Tensor, rows int) {
	b.MatMuls([3]compute.Tensor{dst}, x, [3]compute.Tensor{w}, [3]compute.Tensor{bias}, rows)
}

// MatMuls runs MatMul for each present w[m] against one x: in one launch on SIMD-group matrices
// when every matrix goes there, else one launch each. It implements compute.MultiMatMul.
func (b *backend) MatMuls(dst [3]compute.Tensor, x compute.Tensor, w, bias [3]compute.Tensor, rows int) {
	var wts [3]*tensor
	var outs [3]int
	in, mma := -1, true
	for m := range w {
		if w[m] == nil {
			continue
		}
		wts[m] = b.asTensor(w[m], "MatMul", "w")
		if wts[m].dtype.Quantized() {
			mma = false
			continue
		}
		if len(wts[m].shape) != 2 || weightSuffix(wts[m].dtype) == "" {
			panic(fmt.Sprintf("metal: MatMul: w is %v %v, want [out, in] of F32, F16 or BF16", wts[m].dtype, wts[m].shape))
		}
		if in >= 0 && wts[m].shape[1] != in {
			panic(fmt.Sprintf("metal: MatMuls: rows of %d and %d elements, want one length", in, wts[m].shape[1]))
		}
		outs[m], in = wts[m].shape[0], wts[m].shape[1]
		mma = mma && kernels.UsesMMA(weightSuffix(wts[m].dtype), in)
	}
	var xt arg
	var dts, was, bts [3]arg
	hasBias := 0
	if in >= 0 {
		xt = bufArg(b.tensorOf(x, "MatMul", "x", compute.F32, rows*in))
	}
	for m, wt := range wts {
		if wt == nil || wt.dtype.Quantized() {
			continue
		}
		dts[m], was[m] = bufArg(b.tensorOf(dst[m], "MatMul", "dst", compute.F32, rows*outs[m])), bufArg(wt)
		if bias[m] != nil {
			bts[m] = bufArg(b.tensorOf(bias[m], "MatMul", "bias", compute.F32, outs[m]))
			hasBias |= 1 << m
		}
	}
	if mma {
		b.dispatch(kernels.MatMulsLaunch(rows, outs), dts[0], dts[1], dts[2], xt, was[0], was[1], was[2],
			bts[0], bts[1], bts[2], i32(rows), i32(in), i32(outs[0]), i32(outs[1]), i32(outs[2]), i32(hasBias))
		return
	}
	// One launch each, every matrix on the kernel MatMul gives it alone.
	for m, wt := range wts {
		switch {
		case wt == nil:
		case wt.dtype.Quantized():
			b.matmulQuant(dst[m], x, wt, bias[m], rows)
		case kernels.UsesMMA(weightSuffix(wt.dtype), in):
			b.dispatch(kernels.MatMulsLaunch(rows, [3]int{outs[m]}), dts[m], arg{}, arg{}, xt, was[m], arg{}, arg{},
				bts[m], arg{}, arg{}, i32(rows), i32(in), i32(outs[m]), i32(0), i32(0), i32(hasBias>>m&1))
		default:
			b.dispatch(kernels.MatMulLanesLaunch(weightSuffix(wt.dtype), rows, outs[m]), dts[m], xt, was[m], bts[m],
				i32(rows), i32(in), i32(outs[m]), i32(hasBias>>m&1))
		}
	}
}

// RoPE rotates each head of x[r] in place by positions[r]·invFreq[j], pairing element j with
// j+headDim/2.
func (b *backend) RoPE(x, positions, invFreq compute.Tensor, rows, heads int) {
	ft := b.tensorOf(invFreq, "RoPE", "invFreq", compute.F32, 0)
	half := ft.n
	if half == 0 {
		panic("metal: RoPE: invFreq is empty")
	}
	xt := b.tensorOf(x, "RoPE", "x", compute.F32, rows*heads*2*half)
	pt := b.tensorOf(positions, "RoPE", "positions", compute.I32, rows)
	b.dispatch(kernels.RoPELaunch(rows, heads, half), bufArg(xt), bufArg(pt), bufArg(ft), i32(heads), i32(half))
}

// KVWrite stores k[r] and v[r] into slot bases[r]+positions[r] of the layer. A row whose slot
// falls outside the pool is skipped and reported by the next Sync.
func (b *backend) KVWrite(kv compute.KV, layer int, k, v, bases, positions compute.Tensor, rows int) {
	p := b.asKV(kv, "KVWrite", layer)
	st := p.stride()
	kt := b.tensorOf(k, "KVWrite", "k", compute.F32, rows*st)
	vt := b.tensorOf(v, "KVWrite", "v", compute.F32, rows*st)
	bt := b.tensorOf(bases, "KVWrite", "bases", compute.I32, rows)
	pt := b.tensorOf(positions, "KVWrite", "positions", compute.I32, rows)
	l := p.layers[layer]
	b.dispatch(kernels.KVWriteLaunch(rows, st, p.kernels()), arg{buf: l}, arg{buf: l, off: p.values()}, bufArg(kt), bufArg(vt), bufArg(bt), bufArg(pt),
		i32(p.spec.Slots), i32(st), b.errArg())
}

// QKRoPEWrite runs a layer's per-head norms of q and k (none where qNorm is nil), RoPE of both
// and KVWrite as one dispatch of qk_rope_write_H, with the bits of those ops, for heads of 64, 128
// or 256 elements turned whole (invFreq of headDim/2); it reports false, encoding nothing, for
// anything else (compute.QKRoPEWriter).
func (b *backend) QKRoPEWrite(q, k, v, qNorm, kNorm, ropePositions, invFreq compute.Tensor, kv compute.KV, layer int, bases, positions compute.Tensor, rows, heads int, eps float32) bool {
	p := b.asKV(kv, "QKRoPEWrite", layer)
	hd, kvh := p.spec.HeadDim, p.spec.KVHeads
	ft := b.tensorOf(invFreq, "QKRoPEWrite", "invFreq", compute.F32, 0)
	l, ok := kernels.QKRopeWriteLaunch(rows, heads, kvh, hd, ft.n, p.kernels())
	if !ok || (qNorm == nil) != (kNorm == nil) {
		return false
	}
	var qw, kw arg // unbound without norms: the kernel reads them only with hasNorm
	hasNorm := 0
	if qNorm != nil {
		qw, kw, hasNorm = bufArg(b.tensorOf(qNorm, "QKRoPEWrite", "qNorm", compute.F32, hd)), bufArg(b.tensorOf(kNorm, "QKRoPEWrite", "kNorm", compute.F32, hd)), 1
	}
	st := p.stride()
	qt := b.tensorOf(q, "QKRoPEWrite", "q", compute.F32, rows*heads*hd)
	kt := b.tensorOf(k, "QKRoPEWrite", "k", compute.F32, rows*st)
	vt := b.tensorOf(v, "QKRoPEWrite", "v", compute.F32, rows*st)
	rt := b.tensorOf(ropePositions, "QKRoPEWrite", "ropePositions", compute.I32, rows)
	bt := b.tensorOf(bases, "QKRoPEWrite", "bases", compute.I32, rows)
	pt := b.tensorOf(positions, "QKRoPEWrite", "positions", compute.I32, rows)
	kl := p.layers[layer]
	b.dispatch(l, bufArg(qt), bufArg(kt), arg{buf: kl}, arg{buf: kl, off: p.values()}, bufArg(vt), qw, kw, bufArg(rt), bufArg(ft),
		bufArg(bt), bufArg(pt), i32(heads), i32(kvh), f32(eps), i32(hasNorm), i32(p.spec.Slots), b.errArg())
	return true
}

// Attention writes, for each row r and query head h, softmax(scale·q·K)·V over the slots
// bases[r] .. bases[r]+positions[r] of the layer, reading kv head h/(heads/kvHeads). A row's keys
// are split by position into chunks spread over many threadgroups, whose partial results are
// merged in a fixed order (kernels/src/attention.kern), so the bits depend on the row alone. A row
// whose slots fall outside the pool gets zeros and is reported by the next Sync.
func (b *backend) Attention(dst, q compute.Tensor, kv compute.KV, layer int, bases, positions, sinks compute.Tensor, rows, heads int, scale float32) {
	p := b.asKV(kv, "Attention", layer)
	hd, kvh := p.spec.HeadDim, p.spec.KVHeads
	if heads <= 0 || heads%kvh != 0 {
		panic(fmt.Sprintf("metal: Attention: %d query heads is not a multiple of the pool's %d kv heads", heads, kvh))
	}
	dt := b.tensorOf(dst, "Attention", "dst", compute.F32, rows*heads*hd)
	qt := b.tensorOf(q, "Attention", "q", compute.F32, rows*heads*hd)
	bt := b.tensorOf(bases, "Attention", "bases", compute.I32, rows)
	pt := b.tensorOf(positions, "Attention", "positions", compute.I32, rows)
	var st arg
	hasSinks := 0
	if sinks != nil {
		st, hasSinks = bufArg(b.tensorOf(sinks, "Attention", "sinks", compute.F32, heads)), 1
	}
	l := p.layers[layer]
	// attention_split for every launch: attention_tile_H (what the CUDA backend runs from
	// kernels.AttentionTileFrom rows) gives the same bits, but is unmeasured on Apple's GPUs.
	al := kernels.AttentionSplitLaunch(rows, heads, hd, p.kernels())
	part := b.attentionScratch(al.Scratch)
	if part == nil {
		return
	}
	b.dispatch(al.Split, bufArg(dt), bufArg(part), bufArg(qt), arg{buf: l}, arg{buf: l, off: p.values()}, bufArg(bt), bufArg(pt),
		st, i32(hasSinks), i32(rows), i32(heads), i32(heads/kvh), i32(hd), i32(p.stride()), i32(p.spec.Slots), f32(scale), i32(al.Blocks), b.errArg())
	if al.Combine.Kernel != "" {
		b.dispatch(al.Combine, bufArg(dt), bufArg(part), bufArg(bt), bufArg(pt), st, i32(hasSinks), i32(heads), i32(hd), i32(p.spec.Slots))
	}
}

// attentionScratch returns the attention scratch, grown to at least n F32 elements; nil, with the
// error kept for the next Sync, if there is no room for it. Work encoded before a growth keeps the
// old buffer alive (Free).
func (b *backend) attentionScratch(n int) *tensor {
	if b.attnPart != nil && b.attnPart.n >= n {
		return b.attnPart
	}
	t, err := b.Alloc(compute.F32, max(n, 1))
	if err != nil {
		if b.pending == nil {
			b.pending = fmt.Errorf("metal: Attention: the scratch for its key splits: %w", err)
		}
		return nil
	}
	if b.attnPart != nil {
		b.Free(b.attnPart)
	}
	b.attnPart = t.(*tensor)
	return b.attnPart
}

// SiLUMul writes dst[r] = silu(gate[r])·up[r] for r < rows, rows of dst's row length.
func (b *backend) SiLUMul(dst, gate, up compute.Tensor, rows int) {
	b.elementwise("SiLUMul", kernels.SiLUMulLaunch, dst, gate, up, rows)
}

// ClampedSwiGLU writes dst[r] = (clamp(up[r], ±limit) + 1)·g·σ(alpha·g), g = min(gate[r], limit),
// for r < rows, rows of dst's row length.
func (b *backend) ClampedSwiGLU(dst, gate, up compute.Tensor, rows int, alpha, limit float32) {
	n := rows * b.asTensor(dst, "ClampedSwiGLU", "dst").rowLen()
	if n > math.MaxInt32-256 {
		panic(fmt.Sprintf("metal: ClampedSwiGLU of %d elements: past the kernels' 32-bit index", n))
	}
	dt := b.tensorOf(dst, "ClampedSwiGLU", "dst", compute.F32, n)
	gt := b.tensorOf(gate, "ClampedSwiGLU", "gate", compute.F32, n)
	ut := b.tensorOf(up, "ClampedSwiGLU", "up", compute.F32, n)
	b.dispatch(kernels.ClampedSwiGLULaunch(n), bufArg(dt), bufArg(gt), bufArg(ut), i32(n), f32(alpha), f32(limit))
}

// GELUTanhMul writes dst[r] = gelu_tanh(gate[r])·up[r] for r < rows, rows of dst's row length.
func (b *backend) GELUTanhMul(dst, gate, up compute.Tensor, rows int) {
	b.elementwise("GELUTanhMul", kernels.GELUTanhMulLaunch, dst, gate, up, rows)
}

// Add writes dst[r] = a[r] + b[r] for r < rows, rows of dst's row length.
func (b *backend) Add(dst, x, y compute.Tensor, rows int) {
	b.elementwise("Add", kernels.AddLaunch, dst, x, y, rows)
}

func (b *backend) elementwise(op string, launch func(n int) kernels.Launch, dst, x, y compute.Tensor, rows int) {
	n := rows * b.asTensor(dst, op, "dst").rowLen()
	if n > math.MaxInt32-256 {
		panic(fmt.Sprintf("metal: %s of %d elements: past the kernels' 32-bit index", op, n))
	}
	dt := b.tensorOf(dst, op, "dst", compute.F32, n)
	at := b.tensorOf(x, op, "a", compute.F32, n)
	bt := b.tensorOf(y, op, "b", compute.F32, n)
	b.dispatch(launch(n), bufArg(dt), bufArg(at), bufArg(bt), i32(n))
}

// ArgmaxNext implements compute.Chainer with one threadgroup: the index of the largest of
// logits[:n], ties to the lowest, becomes tokens[0] and chain[step], and positions[0] moves on.
func (b *backend) ArgmaxNext(logits, tokens, positions, chain compute.Tensor, n, step int) {
	lt := b.tensorOf(logits, "ArgmaxNext", "logits", compute.F32, n)
	tt := b.tensorOf(tokens, "ArgmaxNext", "tokens", compute.I32, 1)
	pt := b.tensorOf(positions, "ArgmaxNext", "positions", compute.I32, 1)
	ct := b.tensorOf(chain, "ArgmaxNext", "chain", compute.I32, step+1)
	b.dispatch(kernels.ArgmaxNextLaunch(), bufArg(lt), bufArg(tt), bufArg(pt), bufArg(ct), i32(n), i32(step))
}

// ArgmaxRows implements compute.Picker with a threadgroup a row.
func (b *backend) ArgmaxRows(logits, picks compute.Tensor, first, rows, n int) {
	lt := b.tensorOf(logits, "ArgmaxRows", "logits", compute.F32, (first+rows)*n)
	pt := b.tensorOf(picks, "ArgmaxRows", "picks", compute.I32, rows)
	b.dispatch(kernels.ArgmaxRowsLaunch(rows), bufArg(lt), bufArg(pt), i32(first), i32(n))
}

// VerifyDrafts implements compute.DraftVerifier with one threadgroup, the rows in order.
func (b *backend) VerifyDrafts(logits, tokens, positions, ropePositions, sources, wanted, verdict compute.Tensor, rows, n int) {
	const op = "VerifyDrafts"
	lt := b.tensorOf(logits, op, "logits", compute.F32, rows*n)
	tt, pt := b.tensorOf(tokens, op, "tokens", compute.I32, rows), b.tensorOf(positions, op, "positions", compute.I32, rows)
	rt, st := b.tensorOf(ropePositions, op, "ropePositions", compute.I32, rows), b.tensorOf(sources, op, "sources", compute.I32, rows)
	wt, vt := b.tensorOf(wanted, op, "wanted", compute.I32, 1), b.tensorOf(verdict, op, "verdict", compute.I32, compute.VerdictLen(rows))
	b.dispatch(kernels.VerifyDraftsLaunch(), bufArg(lt), bufArg(tt), bufArg(pt), bufArg(rt), bufArg(st), bufArg(wt), bufArg(vt), i32(rows), i32(n))
}

// DraftNext implements compute.DraftVerifier with one threadgroup.
func (b *backend) DraftNext(logits, tokens, positions, ropePositions, sources, wanted, verdict compute.Tensor, rows, n, step int) {
	const op = "DraftNext"
	lt := b.tensorOf(logits, op, "logits", compute.F32, n)
	tt, pt := b.tensorOf(tokens, op, "tokens", compute.I32, rows), b.tensorOf(positions, op, "positions", compute.I32, rows)
	rt, st := b.tensorOf(ropePositions, op, "ropePositions", compute.I32, 1), b.tensorOf(sources, op, "sources", compute.I32, 1)
	wt, vt := b.tensorOf(wanted, op, "wanted", compute.I32, rows), b.tensorOf(verdict, op, "verdict", compute.I32, compute.VerdictLen(rows))
	b.dispatch(kernels.DraftNextLaunch(), bufArg(lt), bufArg(tt), bufArg(pt), bufArg(rt), bufArg(st), bufArg(wt), bufArg(vt), i32(rows), i32(n), i32(step))
}

// asTensor returns t as this backend's tensor, or panics naming the op and argument.
func (b *backend) asTensor(t compute.Tensor, op, name string) *tensor {
	mt, ok := t.(*tensor)
	if !ok || mt == nil {
		panic(fmt.Sprintf("metal: %s: %s is a %T, not a tensor of the metal backend", op, name, t))
	}
	if mt.b != b {
		panic(fmt.Sprintf("metal: %s: %s belongs to another metal backend", op, name))
	}
	return mt
}

// tensorOf returns t as this backend's tensor of dtype with at least n elements, or panics.
func (b *backend) tensorOf(t compute.Tensor, op, name string, dtype compute.DType, n int) *tensor {
	mt := b.asTensor(t, op, name)
	if mt.dtype != dtype {
		panic(fmt.Sprintf("metal: %s: %s is %v, want %v", op, name, mt.dtype, dtype))
	}
	if mt.n < n {
		panic(fmt.Sprintf("metal: %s: %s %v has %d elements, the op needs %d", op, name, mt.shape, mt.n, n))
	}
	if n > 0 && mt.buf == nil {
		panic(fmt.Sprintf("metal: %s: %s was freed", op, name))
	}
	return mt
}

// asKV returns kv as this backend's pool, or panics; layer must be one of its layers.
func (b *backend) asKV(kv compute.KV, op string, layer int) *kvPool {
	p, ok := kv.(*kvPool)
	if !ok || p == nil || p.b != b {
		panic(fmt.Sprintf("metal: %s: the pool is a %T, not a KV pool of this metal backend", op, kv))
	}
	if layer < 0 || layer >= p.spec.Layers {
		panic(fmt.Sprintf("metal: %s: layer %d of a pool of %d layers", op, layer, p.spec.Layers))
	}
	if p.layers == nil {
		panic(fmt.Sprintf("metal: %s: the pool was freed", op))
	}
	return p
}

// Kernel arguments: a tensor's buffer at offset 0, the error word, and 4-byte scalars.
func bufArg(t *tensor) arg     { return arg{buf: t.buf} }
func (b *backend) errArg() arg { return arg{buf: b.errWord} }
func i32(v int) arg            { return arg{scalar: uint64(uint32(int32(v)))} }
func f32(v float32) arg        { return arg{scalar: uint64(math.Float32bits(v))} }
