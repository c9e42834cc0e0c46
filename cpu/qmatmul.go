package cpu

import (
	"tfd/compute"
	"tfd/quant"
)

// actBlock is one block of 32 quantized activations as the kernels read it (128 bytes): the
// quants, the lane sums t[k] = q[4k]+…+q[4k+3] scaled by −8 and −128 (the corrections of the
// kernels that make one operand unsigned: Σ(n−8)·x = Σn·x − 8t, Σw·x = Σ(w+128)·x − 128t), the
// F32 scale, and the block's sum of quants T = Σt scaled by −128 and −8 (the same corrections
// for a whole block, as the block order's kernels take them). The layout is read by the
// assembly: keep the offsets (0, 32, 64, 96, 100, 104).
type actBlock struct {
	q        [quant.BlockSize]int8
	m8       [8]int32
	m128     [8]int32
	d        float32
	block128 int32
	block8   int32
	_        [5]float32
}

// quantizeActs quantizes rows of activations into blocks, as quant.Activation does, and adds the
// lane corrections; item r is row r.
type quantizeActs struct {
	dst []actBlock
	x   []float32
	in  int
}

func (t *quantizeActs) run(_ *scratch, lo, hi int) {
	nb := t.in / quant.BlockSize
	for r := lo; r < hi; r++ {
		x := t.x[r*t.in : (r+1)*t.in]
		dst := t.dst[r*nb : (r+1)*nb]
		if useQuantAsm && nb > 0 {
			quantizeActsAVX2(&dst[0], &x[0], nb)
			continue
		}
		for b := range dst {
			quantizeBlock(&dst[b], (*[quant.BlockSize]float32)(x[b*quant.BlockSize:]))
		}
	}
}

func quantizeBlock(ab *actBlock, x *[quant.BlockSize]float32) {
	ab.d = quant.QuantizeBlock(&ab.q, x)
	var sum int32
	for k := range 8 {
		q := ab.q[4*k : 4*k+4 : 4*k+4]
		t := int32(q[0]) + int32(q[1]) + int32(q[2]) + int32(q[3])
		ab.m8[k], ab.m128[k] = -8*t, -128*t
		sum += t
	}
	ab.block128, ab.block8 = -128*sum, -8*sum
}

// qmatmulTask computes dst = x·wᵀ + bias for quantized weights, from activations already
// quantized into act (rows × in/32 blocks). Item i is the block of rows i%nrb·rb … and of groups
// of columns (see qweights) i/nrb·cg …: the items of one column block come one after the other,
// so the goroutines go through every row of a block of weights while it is in the caches, and a
// prompt's weights come from memory about once rather than once per row block. Within an item
// each group's weights are read once for every four rows where a four-row kernel exists (Q8_0
// and Q4_0 with AVX2 or VNNI), else every two (the kernels take one, two or four rows against a
// group of columns). Every dst element is one kernel's dot product in package quant's order, and
// every kernel gives the same bits for a row, so the blocking changes speed, never bits.
type qmatmulTask struct {
	dst, bias []float32
	w         *qweights
	act       []actBlock
	rows, out int
	rb, cg    int
	nrb       int
}

// Item sizes: rows a row block, and bytes of weights a column block: few rows (decode) take
// small blocks, which share the work out finely; many (prompts) blocks that stay in the L2 cache
// while all the rows pass.
const (
	qRowBlock      = 16
	qColumnBytes   = 16 << 10
	qPanelBytes    = 256 << 10
	qPanelFromRows = 8
)

// matmulQuant is MatMul with quantized weights.
func (b *backend) matmulQuant(dst, x []float32, w *qweights, bias []float32, rows int) {
	act := b.quantizeActs(x, w.in, rows)
	t := &b.qmm
	t.plan(dst, bias, w, act, rows)
	b.run(t, t.items(), 1, parFor(rows*w.out*w.in))
	*t = qmatmulTask{}
}

// quantizeActs quantizes rows of x (in floats each) into the backend's activation blocks, which
// stay valid until the next call.
func (b *backend) quantizeActs(x []float32, in, rows int) []actBlock {
	nb := in / quant.BlockSize
	if cap(b.qact) < rows*nb {
		b.qact = make([]actBlock, rows*nb)
	}
	act := b.qact[:rows*nb]
	qa := &b.qacts
	*qa = quantizeActs{dst: act, x: x, in: in}
	b.run(qa, rows, 1, parFor(rows*in*16))
	*qa = quantizeActs{}
	return act
}

// plan sets t up to compute dst = x·wᵀ + bias from x's quantized rows act.
func (t *qmatmulTask) plan(dst, bias []float32, w *qweights, act []actBlock, rows int) {
	groups, columnBytes := w.groups(), qColumnBytes
	if rows >= qPanelFromRows {
		columnBytes = qPanelBytes
	}
	*t = qmatmulTask{dst: dst, bias: bias, w: w, act: act, rows: rows, out: w.out,
		rb: min(rows, qRowBlock), cg: min(groups, max(1, columnBytes/(w.units*w.unit)))}
	t.nrb = (rows + t.rb - 1) / t.rb
}

// items returns the number of t's items.
func (t *qmatmulTask) items() int {
	return t.nrb * ((t.w.groups() + t.cg - 1) / t.cg)
}

// qmatmulsTask runs up to three qmatmulTasks of one x as one task (MatMuls): items [0, ends[0])
// are the first's, [ends[0], ends[1]) the second's, and so on; a matrix that is absent has none.
type qmatmulsTask struct {
	parts [3]qmatmulTask
	ends  [3]int
}

func (t *qmatmulsTask) run(s *scratch, lo, hi int) {
	start := 0
	for m := range t.parts {
		if l, h := max(lo, start), min(hi, t.ends[m]); l < h {
			t.parts[m].run(s, l-start, h-start)
		}
		start = t.ends[m]
	}
}

// MatMuls implements compute.MultiMatMul. Where every matrix given is quantized it quantizes x
// once and hands the workers one task for all of them, which at decode saves two handoffs a
// layer on q, k and v and one on gate and up; otherwise it runs MatMul on each. Every item is the
// one MatMul would run, on the same quantized activations, so each dst gets MatMul's bits.
func (b *backend) MatMuls(dst [3]compute.Tensor, x compute.Tensor, w, bias [3]compute.Tensor, rows int) {
	var qs [3]*qweights
	in := -1
	for m, wm := range w {
		if wm == nil {
			continue
		}
		wt := asTensor(wm, "MatMuls", "w")
		if wt.q == nil || len(wt.shape) != 2 || (in >= 0 && wt.shape[1] != in) {
			b.matMulEach(dst, x, w, bias, rows)
			return
		}
		qs[m], in = wt.q, wt.shape[1]
	}
	if in < 0 || rows <= 0 {
		return
	}
	xs := f32(x, "MatMuls", "x", rows*in)
	act := b.quantizeActs(xs, in, rows)
	t := &b.qmms
	work, items := 0, 0
	for m, q := range qs {
		if q != nil && q.out > 0 {
			var bt []float32
			if bias[m] != nil {
				bt = f32(bias[m], "MatMuls", "bias", q.out)
			}
			t.parts[m].plan(f32(dst[m], "MatMuls", "dst", rows*q.out), bt, q, act, rows)
			items += t.parts[m].items()
			work += rows * q.out * q.in
		}
		t.ends[m] = items
	}
	b.run(t, items, 1, parFor(work))
	*t = qmatmulsTask{}
}

// matMulEach runs MatMul for each matrix of MatMuls that is present.
func (b *backend) matMulEach(dst [3]compute.Tensor, x compute.Tensor, w, bias [3]compute.Tensor, rows int) {
	for m := range w {
		if w[m] != nil {
			b.MatMul(dst[m], x, w[m], bias[m], rows)
		}
	}
}

func (t *qmatmulTask) run(s *scratch, lo, hi int) {
	nb := t.w.in / quant.BlockSize
	res, width := &s.dots, t.w.width
	for i := lo; i < hi; i++ {
		r0, g0 := i%t.nrb*t.rb, i/t.nrb*t.cg
		r1, g1 := min(r0+t.rb, t.rows), min(g0+t.cg, t.w.groups())
		r := r0
		if hasFourRowKernel(t.w) && nb > 0 {
			// Rows outside: four rows' activations stay in the L1 cache while the item's groups
			// of weights pass by, which moves less from the L2 cache than the other way round
			// (a block of activations takes 128 bytes, of Q8_0 weights 34).
			// Groups whose columns are all in the matrix, without a bias, go straight to dst in
			// one call; the others through res.
			direct := g0
			if t.bias == nil {
				direct = max(g0, min(g1, t.out/width))
			}
			for ; r+4 <= r1; r += 4 {
				act := t.act[r*nb : (r+4)*nb]
				if direct > g0 {
					qdots4(t.dst[r*t.out+width*g0:], t.out, t.w, g0, direct, act, nb)
				}
				for g := direct; g < g1; g++ {
					qdots4(res[:], width, t.w, g, g+1, act, nb)
					for k := range 4 {
						t.store(r+k, g, res[width*k:width*(k+1)])
					}
				}
			}
		}
		for g := g0; g < g1; g++ {
			w, sb := t.w.group(g)
			for r := r; r < r1; r += 2 {
				nr := min(2, r1-r)
				qdots((*[16]float32)(res[:16]), t.w, w, sb, t.act[r*nb:(r+nr)*nb], nb, nr)
				t.store(r, g, res[:width])
				if nr == 2 {
					t.store(r+1, g, res[width:2*width])
				}
			}
		}
	}
}

// store writes the dot products res of row r with the columns of group g, those inside the
// matrix, adding the bias.
func (t *qmatmulTask) store(r, g int, res []float32) {
	c0 := len(res) * g
	if t.bias == nil && c0+len(res) <= t.out {
		// A whole group without a bias, the common case, as one copy: a prompt stores tens of
		// millions of these.
		copy(t.dst[r*t.out+c0:], res)
		return
	}
	d := t.dst[r*t.out+c0 : r*t.out+min(c0+len(res), t.out)]
	for c := range d {
		v := res[c]
		if t.bias != nil {
			v += t.bias[c0+c]
		}
		d[c] = v
	}
}

// qdots writes into res[width·r+c] the dot product of activation row r < nr (nr is 1 or 2; act
// holds nr rows of nb blocks) with column c of the group of weight rows w (with sb, their affine
// scales and biases; width is q.width), in package quant's order: with the assembly kernels where
// the process uses them, otherwise in Go.
func qdots(res *[16]float32, q *qweights, w, sb []byte, act []actBlock, nb, nr int) {
	if q.in != nb*quant.BlockSize || len(w) < q.units*q.unit || len(act) < nr*nb || len(sb) < q.qgroups*8*q.sdt.Size() {
		panic("cpu: qdots out of bounds")
	}
	res4 := (*[8]float32)(res[:8])
	switch {
	case nb == 0:
	case useNEON && (q.dtype == compute.Q8_0 || q.dtype == compute.Q4_0):
		qdotsNEON(res, q.dtype, &w[0], &act[0], nb, nr)
		return
	case useNEON && (q.dtype == compute.Q4_K || q.dtype == compute.Q6_K):
		qdotsKNEON(res4, q.dtype, w, act, nb, nr)
		return
	case useNEON && (q.affine.Bits == 4 || q.affine.Bits == 8) && (q.sdt == compute.F16 || q.sdt == compute.BF16):
		qdotsAffineNEON(res4, q, &w[0], &sb[0], act, nb, nr)
		return
	case !useQuantAsm:
	case q.dtype == compute.Q8_0 || q.dtype == compute.Q4_0:
		qdotsAsm(res, q.dtype, &w[0], &act[0], nb, nr)
		return
	case q.dtype == compute.Q4_K || q.dtype == compute.Q6_K:
		qdotsKAsm(res4, q.dtype, w, act, nb, nr)
		return
	case (q.affine.Bits == 4 || q.affine.Bits == 8) && (q.sdt == compute.F16 || q.sdt == compute.BF16):
		qdotsAffineAsm(res4, q, &w[0], &sb[0], &act[0], nb, nr)
		return
	}
	for r := range nr {
		if q.width == 8 {
			qdotsBlockGo(res[8*r:8*r+8], q, w, act[r*nb:(r+1)*nb])
			continue
		}
		lanes := qdotsGo(q, w, sb, act[r*nb:(r+1)*nb])
		for c := range 4 {
			res[4*r+c] = sumLanes(&lanes[c])
		}
	}
}

// hasFourRowKernel reports whether qdots4 runs for q's weights: Q8_0 and Q4_0 with the AVX2 or
// VNNI kernels, whose block order needs one accumulator a row for eight columns (the lane order
// of the other formats needs eight).
func hasFourRowKernel(q *qweights) bool {
	return useQuantAsm && (q.dtype == compute.Q8_0 || q.dtype == compute.Q4_0)
}

// qdots4 is qdots for four rows (nb > 0) against groups g0 … g1−1 of q (g0 < g1), where
// hasFourRowKernel: the dot product of row r with column c of group g goes to
// dst[r·stride + 8(g−g0) + c], with the same bits as qdots gives each row.
func qdots4(dst []float32, stride int, q *qweights, g0, g1 int, act []actBlock, nb int) {
	ng := g1 - g0
	if q.in != nb*quant.BlockSize || g0 < 0 || ng <= 0 || g1 > q.groups() || len(act) < 4*nb ||
		stride < 8*ng || len(dst) < 3*stride+8*ng {
		panic("cpu: qdots4 out of bounds")
	}
	n := q.units * q.unit
	w := q.data[g0*n : g1*n]
	kernel := q8x4AVX2
	switch {
	case q.dtype == compute.Q8_0 && useVNNI:
		kernel = q8x4VNNI
	case useVNNI:
		kernel = q4x4VNNI
	case q.dtype == compute.Q4_0:
		kernel = q4x4AVX2
	}
	kernel(&dst[0], 4*stride, &w[0], &act[0], nb, ng)
}
