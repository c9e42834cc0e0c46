//go:build amd64 || arm64

package cuda

import (
	"fmt"
	"math"
	"strings"

	"tfd/compute"
	"tfd/kernels"
)

// Every op checks its arguments (a misuse panics, as on the CPU backend) and records one or a
// few commands; none waits. The kernels and the orders of their reductions are in tfd/kernels.

// Embed writes table[tokens[r]] into x[r] for r < rows. A token outside the table gets a zero row
// and is reported by the next Sync.
func (b *backend) Embed(x, table, tokens compute.Tensor, rows int) {
	tt := b.asTensor(table, "Embed", "table")
	if tt.dtype.Quantized() {
		b.embedQuant(x, tt, tokens, rows)
		return
	}
	wi := weightIndex(tt.dtype)
	if len(tt.shape) != 2 || wi < 0 {
		panic(fmt.Sprintf("cuda: Embed: table is %v %v, want [vocab, dim] of F32, F16 or BF16", tt.dtype, tt.shape))
	}
	vocab, dim := tt.shape[0], tt.shape[1]
	xt := b.tensorOf(x, "Embed", "x", compute.F32, rows*dim)
	ids := b.tensorOf(tokens, "Embed", "tokens", compute.I32, rows)
	l := kernels.EmbedLaunch(weightSuffix[wi], rows, dim)
	if tt.packed { // a tied table, packed for the tensor cores
		l = kernels.EmbedPackedLaunch(rows, dim)
	}
	b.launchAs(l, ptr(xt), ptr(tt), ptr(ids), i32(vocab), i32(dim), uint64(b.errWord))
}

// Gather writes dst[i] = src[index[i]] for i < rows, whole rows of src's row length. An index
// outside src gets a zero row and is reported by the next Sync.
func (b *backend) Gather(dst, src, index compute.Tensor, rows int) {
	st := b.tensorOf(src, "Gather", "src", compute.F32, 0)
	if len(st.shape) == 0 {
		panic("cuda: Gather: src has no rows")
	}
	n, w := st.shape[0], st.rowLen()
	d := b.tensorOf(dst, "Gather", "dst", compute.F32, rows*w)
	idx := b.tensorOf(index, "Gather", "index", compute.I32, rows)
	b.launchAs(kernels.GatherLaunch(rows, w), ptr(d), ptr(st), ptr(idx), i32(n), i32(w), uint64(b.errWord))
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

func (b *backend) rmsnorm(op string, dst, residual, x, w compute.Tensor, n int, eps float32) {
	wt := b.tensorOf(w, op, "w", compute.F32, 0)
	d := wt.n
	if d == 0 {
		panic(fmt.Sprintf("cuda: %s: w %v is empty", op, wt.shape))
	}
	dt := b.tensorOf(dst, op, "dst", compute.F32, n*d)
	xt := b.tensorOf(x, op, "x", compute.F32, n*d)
	rt, add := xt, uint64(0)
	if residual != nil {
		rt, add = b.tensorOf(residual, op, "residual", compute.F32, n*d), 1
	}
	l := kernels.RMSNormLaunch(n, d)
	if d < kernels.RMSNormRowFrom {
		b.launchAs(l, ptr(dt), ptr(rt), ptr(xt), ptr(wt), i32(n), i32(d), f32(eps), add)
		return
	}
	if add == 1 {
		if p, ok := b.takeSum([3]uint64{ptr(xt)}, n, [3]int{d}); ok {
			// x is the output of the matmul just before, still in quarters: the norm adds
			// them, and writes their sum to x as the sum's launch would have.
			b.launchAs(l, ptr(dt), ptr(rt), p.part, ptr(wt), i32(n), i32(d), f32(eps), add, p.dst[0], p.bias[0], 1, p.bits)
			return
		}
	}
	b.launchAs(l, ptr(dt), ptr(rt), ptr(xt), ptr(wt), i32(n), i32(d), f32(eps), add, 0, 0, 0, 0)
}

// RoPE rotates each head of x[r] in place by positions[r]·invFreq[j], pairing element j with
// j+headDim/2.
func (b *backend) RoPE(x, positions, invFreq compute.Tensor, rows, heads int) {
	ft := b.tensorOf(invFreq, "RoPE", "invFreq", compute.F32, 0)
	half := ft.n
	if half == 0 {
		panic("cuda: RoPE: invFreq is empty")
	}
	xt := b.tensorOf(x, "RoPE", "x", compute.F32, rows*heads*2*half)
	pt := b.tensorOf(positions, "RoPE", "positions", compute.I32, rows)
	b.launchAs(kernels.RoPELaunch(rows, heads, half), ptr(xt), ptr(pt), ptr(ft), i32(heads), i32(half))
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
	kd, vd := p.layer(layer)
	b.launchAs(kernels.KVWriteLaunch(rows, st, p.kernels()), uint64(kd), uint64(vd), ptr(kt), ptr(vt), ptr(bt), ptr(pt),
		i32(p.spec.Slots), i32(st), uint64(b.errWord))
}

// QKRoPEWrite runs a layer's per-head norms of q and k (none where qNorm is nil), RoPE of both
// and KVWrite as one launch of qk_rope_write_H, with the bits of those ops, for heads of 64, 128
// or 256 elements turned whole (invFreq of headDim/2); it reports false, launching nothing, for
// anything else (compute.QKRoPEWriter). Where q, k and v are the outputs of the matmul just
// before, still in quarters, the launch adds them too (writing v's sums to v), so
// mma_sum_quarters's launch goes.
func (b *backend) QKRoPEWrite(q, k, v, qNorm, kNorm, ropePositions, invFreq compute.Tensor, kv compute.KV, layer int, bases, positions compute.Tensor, rows, heads int, eps float32) bool {
	p := b.asKV(kv, "QKRoPEWrite", layer)
	hd, kvh := p.spec.HeadDim, p.spec.KVHeads
	ft := b.tensorOf(invFreq, "QKRoPEWrite", "invFreq", compute.F32, 0)
	l, ok := kernels.QKRopeWriteLaunch(rows, heads, kvh, hd, ft.n, p.kernels())
	if !ok || b.qkRoPEOff || (qNorm == nil) != (kNorm == nil) {
		return false
	}
	var qw, kw, hasNorm uint64
	if qNorm != nil {
		qw, kw, hasNorm = ptr(b.tensorOf(qNorm, "QKRoPEWrite", "qNorm", compute.F32, hd)), ptr(b.tensorOf(kNorm, "QKRoPEWrite", "kNorm", compute.F32, hd)), 1
	}
	st := p.stride()
	qt := b.tensorOf(q, "QKRoPEWrite", "q", compute.F32, rows*heads*hd)
	kt := b.tensorOf(k, "QKRoPEWrite", "k", compute.F32, rows*st)
	vt := b.tensorOf(v, "QKRoPEWrite", "v", compute.F32, rows*st)
	rt := b.tensorOf(ropePositions, "QKRoPEWrite", "ropePositions", compute.I32, rows)
	bt := b.tensorOf(bases, "QKRoPEWrite", "bases", compute.I32, rows)
	pt := b.tensorOf(positions, "QKRoPEWrite", "positions", compute.I32, rows)
	kd, vd := p.layer(layer)
	// q, k and v may still be the quarters of the matmul just before (b.pendingSum): the
	// launch adds them itself, and writes v's sums to v.
	var quarters uint64
	sum, folded := b.takeSum([3]uint64{ptr(qt), ptr(kt), ptr(vt)}, rows, [3]int{heads * hd, st, st})
	if folded {
		quarters = 1
	}
	b.launchAs(l, ptr(qt), ptr(kt), uint64(kd), uint64(vd), ptr(vt), qw, kw, ptr(rt), ptr(ft), ptr(bt), ptr(pt),
		i32(heads), i32(kvh), f32(eps), hasNorm, i32(p.spec.Slots), uint64(b.errWord),
		sum.part, sum.bias[0], sum.bias[1], sum.bias[2], i32(rows), quarters, sum.bits)
	return true
}

// Attention writes, for each row r and query head h, softmax(scale·q·K)·V over the slots
// bases[r] .. bases[r]+positions[r] of the layer, reading kv head h/(heads/kvHeads). A row's keys
// are split by position into chunks spread over many blocks, whose partial results are merged in
// a fixed order (kernels/src/attention.kern), so the bits depend on the row alone; from
// kernels.AttentionTileFrom rows whose bases come in runs at least a tile long (a prompt's rows;
// kernels.AttentionTileShares, from the runs the bases were written in) the splits are made by
// attention_tile_H, a tile of rows and the query heads of a kv head sharing each load of keys
// and values, and elsewhere by attention_warp, a SIMD group a row and head, all with the same
// bits. A row whose slots fall outside the pool gets zeros and is reported by the next Sync.
// With sinks, each head's sink joins the sum just before the division.
func (b *backend) Attention(dst, q compute.Tensor, kv compute.KV, layer int, bases, positions, sinks compute.Tensor, rows, heads int, scale float32) {
	p := b.asKV(kv, "Attention", layer)
	hd, kvh := p.spec.HeadDim, p.spec.KVHeads
	if heads <= 0 || heads%kvh != 0 {
		panic(fmt.Sprintf("cuda: Attention: %d query heads is not a multiple of the pool's %d kv heads", heads, kvh))
	}
	dt := b.tensorOf(dst, "Attention", "dst", compute.F32, rows*heads*hd)
	qt := b.tensorOf(q, "Attention", "q", compute.F32, rows*heads*hd)
	bt := b.tensorOf(bases, "Attention", "bases", compute.I32, rows)
	pt := b.tensorOf(positions, "Attention", "positions", compute.I32, rows)
	var sp, hasSinks uint64
	if sinks != nil {
		sp, hasSinks = ptr(b.tensorOf(sinks, "Attention", "sinks", compute.F32, heads)), 1
	}
	kd, vd := p.layer(layer)
	runs := bt.runs
	if runs == 0 {
		runs = rows // written on the device: nothing says the rows share bases
	}
	group := heads / kvh
	var l kernels.AttentionLaunches
	switch {
	case b.attnMMA && kernels.AttentionMMA(group, hd):
		l = kernels.AttentionMMALaunch(rows, runs, heads, group, hd, p.kernels())
	case b.attnTile == "1" || b.attnTile != "0" && kernels.AttentionTileShares(rows, runs, group, hd):
		l = kernels.AttentionLaunch(rows, heads, group, hd, p.kernels())
	case b.attnWarp == "0":
		l = kernels.AttentionSplitLaunch(rows, heads, hd, p.kernels())
	default:
		l = kernels.AttentionWarpLaunch(rows, heads, hd, p.kernels())
	}
	part, ok := b.scratch(&b.attnPart, l.Scratch, "Attention: the scratch for its key splits")
	if !ok {
		return
	}
	args := [...]uint64{ptr(dt), part, ptr(qt), uint64(kd), uint64(vd), ptr(bt), ptr(pt), sp, hasSinks,
		i32(rows), i32(heads), i32(group), i32(hd), i32(p.stride()), i32(p.spec.Slots), f32(scale), i32(l.Blocks), i32(l.Tile), uint64(b.errWord)}
	a := args[:]
	if l.Tile == 0 { // only attention_mma takes its rows a tile
		a = append(a[:len(a)-2], uint64(b.errWord))
	}
	b.launchAs(l.Split, a...)
	if l.Combine.Kernel != "" {
		b.launchAs(l.Combine, ptr(dt), part, ptr(bt), ptr(pt), sp, hasSinks, i32(heads), i32(hd), i32(p.spec.Slots))
	}
}

// SiLUMul writes dst[r] = silu(gate[r])·up[r] for r < rows, rows of dst's row length.
func (b *backend) SiLUMul(dst, gate, up compute.Tensor, rows int) {
	b.elementwise("SiLUMul", b.k.siluMul, dst, gate, up, rows)
}

// ClampedSwiGLU writes dst[r] = (clamp(up[r], ±limit) + 1)·g·σ(alpha·g), g = min(gate[r], limit),
// for r < rows, rows of dst's row length.
func (b *backend) ClampedSwiGLU(dst, gate, up compute.Tensor, rows int, alpha, limit float32) {
	n := b.elementwiseLen("ClampedSwiGLU", dst, rows)
	dt := b.tensorOf(dst, "ClampedSwiGLU", "dst", compute.F32, n)
	gt := b.tensorOf(gate, "ClampedSwiGLU", "gate", compute.F32, n)
	ut := b.tensorOf(up, "ClampedSwiGLU", "up", compute.F32, n)
	b.launch(b.k.clampedSwiGLU, ceilDiv(n, 256), 1, ptr(dt), ptr(gt), ptr(ut), i32(n), f32(alpha), f32(limit))
}

// GELUTanhMul writes dst[r] = gelu_tanh(gate[r])·up[r] for r < rows, rows of dst's row length.
func (b *backend) GELUTanhMul(dst, gate, up compute.Tensor, rows int) {
	b.elementwise("GELUTanhMul", b.k.geluMul, dst, gate, up, rows)
}

// Add writes dst[r] = a[r] + b[r] for r < rows, rows of dst's row length.
func (b *backend) Add(dst, x, y compute.Tensor, rows int) {
	b.elementwise("Add", b.k.add, dst, x, y, rows)
}

func (b *backend) elementwise(op string, k *kernel, dst, x, y compute.Tensor, rows int) {
	n := b.elementwiseLen(op, dst, rows)
	dt := b.tensorOf(dst, op, "dst", compute.F32, n)
	at := b.tensorOf(x, op, "a", compute.F32, n)
	bt := b.tensorOf(y, op, "b", compute.F32, n)
	b.launch(k, ceilDiv(n, 256), 1, ptr(dt), ptr(at), ptr(bt), i32(n))
}

// elementwiseLen returns the elements an elementwise op covers, rows of dst's row length, or
// panics past the kernels' 32-bit index.
func (b *backend) elementwiseLen(op string, dst compute.Tensor, rows int) int {
	n := rows * b.asTensor(dst, op, "dst").rowLen()
	if n > math.MaxInt32-256 {
		panic(fmt.Sprintf("cuda: %s of %d elements: past the kernels' 32-bit index", op, n))
	}
	return n
}

// record, wait and flush are the worker's, for every command the backend records: each first
// launches a sum of quarters left pending (b.pendingSum), so that it stays where it was recorded.
func (b *backend) record() *command {
	b.launchPendingSum()
	return b.w.record()
}

func (b *backend) wait(sync bool, call func() error) error {
	b.launchPendingSum()
	return b.w.wait(sync, call)
}

func (b *backend) flush() {
	b.launchPendingSum()
	b.w.flush()
}

// launchPendingSum launches the sum of quarters left pending, if any.
func (b *backend) launchPendingSum() {
	p := b.pendingSum
	if p.l.Kernel == "" {
		return
	}
	b.pendingSum.l = kernels.Launch{}
	b.launchSum(p)
}

// launchAs records the launch l, which tfd/kernels made for the op.
func (b *backend) launchAs(l kernels.Launch, args ...uint64) {
	k := b.k.byName[l.Kernel]
	if k == nil || k.threads != l.Threads {
		panic(fmt.Sprintf("cuda: no kernel %s of %d threads", l.Kernel, l.Threads))
	}
	b.launchShared(k, l.Groups[0], l.Groups[1], l.Shared, args...)
}

// launch records a launch of k on a gx × gy grid of k.threads-thread blocks. Nothing is recorded
// for an empty grid.
func (b *backend) launch(k *kernel, gx, gy int, args ...uint64) {
	b.launchShared(k, gx, gy, 0, args...)
}

// launchShared is launch with shared bytes of dynamic shared memory a block.
func (b *backend) launchShared(k *kernel, gx, gy, shared int, args ...uint64) {
	if b.closed {
		panic("cuda: op on a closed backend")
	}
	if len(args) != k.params {
		panic(fmt.Sprintf("cuda: %s takes %d arguments, got %d", k.name, k.params, len(args)))
	}
	if gx <= 0 || gy <= 0 {
		return
	}
	if gy > 65535 {
		panic(fmt.Sprintf("cuda: %s: %d rows of blocks is past CUDA's 65535", k.name, gy))
	}
	for _, p := range b.leaveOut {
		if strings.HasPrefix(k.name, p) {
			return
		}
	}
	c := b.record()
	c.kind, c.k, c.nargs = cmdLaunch, k, uint8(len(args))
	c.grid = [3]uint32{uint32(gx), uint32(gy), 1}
	c.block, c.shared = uint32(k.threads), uint32(shared)
	c.dependent = (b.pdlRows == 0 || b.forwardRows <= b.pdlRows) && !(b.serialHeavy && k.heavy && b.lastHeavy)
	b.lastHeavy = k.heavy
	copy(c.args[:], args)
}

// asTensor returns t as this backend's tensor, or panics naming the op and argument.
func (b *backend) asTensor(t compute.Tensor, op, arg string) *tensor {
	ct, ok := t.(*tensor)
	if !ok || ct == nil {
		panic(fmt.Sprintf("cuda: %s: %s is a %T, not a tensor of the cuda backend", op, arg, t))
	}
	if ct.b != b {
		panic(fmt.Sprintf("cuda: %s: %s belongs to another cuda backend", op, arg))
	}
	return ct
}

// tensorOf returns t as this backend's tensor of dtype with at least n elements, or panics.
func (b *backend) tensorOf(t compute.Tensor, op, arg string, dtype compute.DType, n int) *tensor {
	ct := b.asTensor(t, op, arg)
	if ct.dtype != dtype {
		panic(fmt.Sprintf("cuda: %s: %s is %v, want %v", op, arg, ct.dtype, dtype))
	}
	if ct.n < n {
		panic(fmt.Sprintf("cuda: %s: %s %v has %d elements, the op needs %d", op, arg, ct.shape, ct.n, n))
	}
	if n > 0 && ct.ptr == 0 {
		panic(fmt.Sprintf("cuda: %s: %s was freed", op, arg))
	}
	return ct
}

// asKV returns kv as this backend's pool, or panics; layer must be one of its layers.
func (b *backend) asKV(kv compute.KV, op string, layer int) *kvPool {
	p, ok := kv.(*kvPool)
	if !ok || p == nil || p.b != b {
		panic(fmt.Sprintf("cuda: %s: the pool is a %T, not a KV pool of this cuda backend", op, kv))
	}
	if layer < 0 || layer >= p.spec.Layers {
		panic(fmt.Sprintf("cuda: %s: layer %d of a pool of %d layers", op, layer, p.spec.Layers))
	}
	if p.ptr == 0 {
		panic(fmt.Sprintf("cuda: %s: the pool was freed", op))
	}
	return p
}

// Kernel argument encodings: 8 bytes each, a 4-byte parameter in the low half.
func ptr(t *tensor) uint64 { return uint64(t.ptr) }
func i32(v int) uint64     { return uint64(uint32(int32(v))) }
func f32(v float32) uint64 { return uint64(math.Float32bits(v)) }

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// ArgmaxNext implements compute.Chainer with one block: the index of the largest of logits[:n],
// ties to the lowest, becomes tokens[0] and chain[step], and positions[0] moves one on.
func (b *backend) ArgmaxNext(logits, tokens, positions, chain compute.Tensor, n, step int) {
	lt := b.tensorOf(logits, "ArgmaxNext", "logits", compute.F32, n)
	tt := b.tensorOf(tokens, "ArgmaxNext", "tokens", compute.I32, 1)
	pt := b.tensorOf(positions, "ArgmaxNext", "positions", compute.I32, 1)
	ct := b.tensorOf(chain, "ArgmaxNext", "chain", compute.I32, step+1)
	b.launch(b.k.argmaxNext, 1, 1, ptr(lt), ptr(tt), ptr(pt), ptr(ct), i32(n), i32(step))
}

// ArgmaxRows implements compute.Picker with a block a row.
func (b *backend) ArgmaxRows(logits, picks compute.Tensor, first, rows, n int) {
	lt := b.tensorOf(logits, "ArgmaxRows", "logits", compute.F32, (first+rows)*n)
	pt := b.tensorOf(picks, "ArgmaxRows", "picks", compute.I32, rows)
	b.launchAs(kernels.ArgmaxRowsLaunch(rows), ptr(lt), ptr(pt), i32(first), i32(n))
}

// VerifyDrafts implements compute.DraftVerifier with one block, the rows in order.
func (b *backend) VerifyDrafts(logits, tokens, positions, ropePositions, sources, wanted, verdict compute.Tensor, rows, n int) {
	const op = "VerifyDrafts"
	lt := b.tensorOf(logits, op, "logits", compute.F32, rows*n)
	tt, pt := b.tensorOf(tokens, op, "tokens", compute.I32, rows), b.tensorOf(positions, op, "positions", compute.I32, rows)
	rt, st := b.tensorOf(ropePositions, op, "ropePositions", compute.I32, rows), b.tensorOf(sources, op, "sources", compute.I32, rows)
	wt, vt := b.tensorOf(wanted, op, "wanted", compute.I32, 1), b.tensorOf(verdict, op, "verdict", compute.I32, compute.VerdictLen(rows))
	b.launch(b.k.verify, 1, 1, ptr(lt), ptr(tt), ptr(pt), ptr(rt), ptr(st), ptr(wt), ptr(vt), i32(rows), i32(n))
}

// DraftNext implements compute.DraftVerifier with one block.
func (b *backend) DraftNext(logits, tokens, positions, ropePositions, sources, wanted, verdict compute.Tensor, rows, n, step int) {
	const op = "DraftNext"
	lt := b.tensorOf(logits, op, "logits", compute.F32, n)
	tt, pt := b.tensorOf(tokens, op, "tokens", compute.I32, rows), b.tensorOf(positions, op, "positions", compute.I32, rows)
	rt, st := b.tensorOf(ropePositions, op, "ropePositions", compute.I32, 1), b.tensorOf(sources, op, "sources", compute.I32, 1)
	wt, vt := b.tensorOf(wanted, op, "wanted", compute.I32, rows), b.tensorOf(verdict, op, "verdict", compute.I32, compute.VerdictLen(rows))
	b.launch(b.k.draftNext, 1, 1, ptr(lt), ptr(tt), ptr(pt), ptr(rt), ptr(st), ptr(wt), ptr(vt), i32(rows), i32(n), i32(step))
}
