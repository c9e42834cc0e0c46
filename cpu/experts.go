package cpu

import (
	"fmt"
	"math"

	"tfd/compute"
	"tfd/quant"
)

// The mixture-of-experts ops. A pair (a row and one of its experts) is computed alone in MatMul's
// order whatever else chose that expert: ExpertMatMul gathers each expert's pairs into a block of
// rows and runs MatMul's blocks over the expert's matrix, which change speed, never bits.

// RouteTopK writes each row's k best experts, best first (ties to the lower expert, NaN lowest),
// and their softmax probabilities over all experts (the denominator summed as softmaxExp sums),
// renormalised over the k when normalize is set.
func (b *backend) RouteTopK(ids, weights, logits compute.Tensor, rows, experts, k int, normalize bool) {
	if k <= 0 || k > experts {
		panic(fmt.Sprintf("cpu: RouteTopK: %d experts a row out of %d", k, experts))
	}
	t := &b.route
	*t = routeTask{
		ids:       i32(ids, "RouteTopK", "ids", rows*k),
		weights:   f32(weights, "RouteTopK", "weights", rows*k),
		logits:    f32(logits, "RouteTopK", "logits", rows*experts),
		experts:   experts,
		k:         k,
		normalize: normalize,
	}
	b.pool.reserve(experts)
	b.run(t, rows, 1, parFor(rows*experts*(16+k)))
	*t = routeTask{}
}

// routeTask routes rows; item r is row r.
type routeTask struct {
	ids             []int32
	weights, logits []float32
	experts, k      int
	normalize       bool
}

func (t *routeTask) run(s *scratch, lo, hi int) {
	e := s.floats(t.experts)
	for r := lo; r < hi; r++ {
		scores := t.logits[r*t.experts : (r+1)*t.experts]
		ids, w := t.ids[r*t.k:(r+1)*t.k], t.weights[r*t.k:(r+1)*t.k]
		topK(ids, scores)
		m := float32(math.Inf(-1))
		for _, v := range scores {
			m = max(m, v)
		}
		copy(e, scores)
		sum := softmaxExp(e, m)
		var total float32
		for j, id := range ids {
			w[j] = e[id] / sum
			total += w[j]
		}
		if t.normalize {
			for j := range w {
				w[j] /= total
			}
		}
	}
}

// topK fills ids with the best of scores, best first: a higher score before a lower, the lower
// index on a tie, NaN below everything. Each pick is the best of those after the previous pick in
// that order, so the picks are distinct even among equal scores.
func topK(ids []int32, scores []float32) {
	prev, prevScore := -1, float32(0)
	for j := range ids {
		best, bestScore := -1, float32(0)
		for e, v := range scores {
			if v != v {
				v = float32(math.Inf(-1))
			}
			if prev >= 0 && !(v < prevScore || v == prevScore && e > prev) {
				continue // at or before the previous pick
			}
			if best < 0 || v > bestScore {
				best, bestScore = e, v
			}
		}
		ids[j] = int32(best)
		prev, prevScore = best, bestScore
	}
}

// GroupByExpert writes the runs of pairs by expert (compute.Ops has the layout). An id that is no
// expert leaves its pair out and is reported by the next Sync.
func (b *backend) GroupByExpert(groups, ids compute.Tensor, n, experts int) {
	g := i32(groups, "GroupByExpert", "groups", experts+1+n)
	id := i32(ids, "GroupByExpert", "ids", n)[:n]
	starts, order := g[:experts+1], g[experts+1:]
	clear(starts)
	for a, e := range id {
		if e < 0 || int(e) >= experts {
			b.fail("GroupByExpert: pair %d has expert %d, outside the %d experts", a, e, experts)
			continue
		}
		starts[e+1]++
	}
	for e := range experts {
		starts[e+1] += starts[e]
	}
	// Place each pair at the end of its run so far, walking the pairs in order; the counts
	// kept in starts[e+1] are restored once every pair is placed.
	for a, e := range id {
		if e >= 0 && int(e) < experts {
			order[starts[e]] = int32(a)
			starts[e]++
		}
	}
	for e := experts; e > 0; e-- {
		starts[e] = starts[e-1]
	}
	starts[0] = 0
}

// ExpertMatMul computes each listed pair's row through its expert's matrix. The pairs are gathered
// in run order into a block of inputs, each run is cut into tiles of MatMul's row blocks, the
// tiles go through MatMul's blocks against their expert's matrix, and the outputs are scattered
// back to their pairs' rows. A bias is added to each finished dot product, as MatMul adds its.
// Quantized experts run MatMul's quantized kernels instead (expertMatMulQuant).
func (b *backend) ExpertMatMul(dst, x, w, bias, groups compute.Tensor, n, share int) {
	wt := asTensor(w, "ExpertMatMul", "w")
	if len(wt.shape) != 3 {
		panic(fmt.Sprintf("cpu: ExpertMatMul: w has shape %v, want [experts, out, in]", wt.shape))
	}
	experts, out, in := wt.shape[0], wt.shape[1], wt.shape[2]
	if share <= 0 {
		panic(fmt.Sprintf("cpu: ExpertMatMul: share %d, want 1 or more", share))
	}
	d := f32(dst, "ExpertMatMul", "dst", n*out)
	xs := f32(x, "ExpertMatMul", "x", (n+share-1)/share*in)
	g := i32(groups, "ExpertMatMul", "groups", experts+1+n)
	starts, order := g[:experts+1], g[experts+1:]
	// The listed pairs, in run order, and the longest run.
	if starts[0] != 0 || starts[experts] < 0 || int(starts[experts]) > n {
		b.fail("ExpertMatMul: groups end their runs at %d, outside the %d pairs", starts[experts], n)
		return
	}
	listed, longest := int(starts[experts]), 0
	for e := range experts {
		if starts[e+1] < starts[e] {
			b.fail("ExpertMatMul: groups start expert %d's run after the next", e)
			return
		}
		longest = max(longest, int(starts[e+1]-starts[e]))
	}
	for _, a := range order[:listed] {
		if a < 0 || int(a) >= n {
			b.fail("ExpertMatMul: groups list pair %d, outside the %d pairs", a, n)
			return
		}
	}
	if listed == 0 || out == 0 {
		return
	}
	xg, dg := b.experts.grow(listed*in, listed*out)
	for p, a := range order[:listed] {
		r := int(a) / share
		copy(xg[p*in:(p+1)*in], xs[r*in:(r+1)*in])
	}
	if wt.qe != nil {
		var bt []float32
		if bias != nil {
			bt = f32(bias, "ExpertMatMul", "bias", experts*out)
		}
		b.expertMatMulQuant(dg, xg, wt.qe, bt, starts, longest)
		for p, a := range order[:listed] {
			copy(d[int(a)*out:(int(a)+1)*out], dg[p*out:(p+1)*out])
		}
		return
	}
	t := &b.expert
	*t = expertTask{mm: matmulTask{dst: dg, x: xg, wdt: wt.dtype, rows: longest, in: in, out: out}}
	if wt.dtype == compute.MXFP4 {
		// Each column block dequantizes its weights into scratch and runs as F32 weights.
		t.mm.wdt = compute.F32
		t.mx, t.mxScales = wt.mx[:experts*out*quant.MXFP4RowCodes(in)], wt.mx[experts*out*quant.MXFP4RowCodes(in):]
	} else {
		t.mm.w, t.mm.wh = weights(w, "ExpertMatMul", "w", experts*out*in)
	}
	if bias != nil {
		t.bias = f32(bias, "ExpertMatMul", "bias", experts*out)
	}
	need := t.mm.plan()
	if t.mx != nil {
		t.blockNeed = need
		need += t.mm.cb * in
	}
	b.pool.reserve(need)
	t.tiles = b.experts.tiles[:0]
	for e := range experts {
		for s := int(starts[e]); s < int(starts[e+1]); s += t.mm.rb {
			t.tiles = append(t.tiles, expertTile{expert: e, start: s, rows: min(t.mm.rb, int(starts[e+1])-s)})
		}
	}
	b.experts.tiles = t.tiles
	b.run(t, len(t.tiles)*t.mm.ncb, 1, parFor(listed*out*max(in, 1)))
	*t = expertTask{}
	for p, a := range order[:listed] {
		copy(d[int(a)*out:(int(a)+1)*out], dg[p*out:(p+1)*out])
	}
}

// expertMatMulQuant computes the gathered pairs' rows xg (in run order; starts are the runs, the
// longest of them longest rows) through their experts' quantized matrices qe into dg, adding
// bias ([experts, out]) when it is not nil. The rows are quantized as MatMul quantizes its rows
// (one row's blocks depend on that row alone), and each run is cut into tiles of qRowBlock rows
// that go through qmatmulTask's items over their expert's matrix, so a pair's row is, bit for
// bit, MatMul's of its expert's matrix on that row.
func (b *backend) expertMatMulQuant(dg, xg []float32, qe []*qweights, bias []float32, starts []int32, longest int) {
	in, out := qe[0].in, qe[0].out
	listed, nb := int(starts[len(qe)]), in/quant.BlockSize
	if cap(b.qact) < listed*nb {
		b.qact = make([]actBlock, listed*nb)
	}
	act := b.qact[:listed*nb]
	qa := &b.qacts
	*qa = quantizeActs{dst: act, x: xg, in: in}
	b.run(qa, listed, 1, parFor(listed*in*16))
	*qa = quantizeActs{}

	// Column blocks as MatMul sizes them for the longest run's rows.
	groups, columnBytes := qe[0].groups(), qColumnBytes
	if longest >= qPanelFromRows {
		columnBytes = qPanelBytes
	}
	t := &b.qexpert
	*t = qexpertTask{dst: dg, bias: bias, experts: qe, act: act, cg: min(groups, max(1, columnBytes/max(qe[0].units*qe[0].unit, 1)))}
	t.ncg = (groups + t.cg - 1) / t.cg
	t.tiles = b.experts.tiles[:0]
	for e := range qe {
		for s := int(starts[e]); s < int(starts[e+1]); s += qRowBlock {
			t.tiles = append(t.tiles, expertTile{expert: e, start: s, rows: min(qRowBlock, int(starts[e+1])-s)})
		}
	}
	b.experts.tiles = t.tiles
	b.run(t, len(t.tiles)*t.ncg, 1, parFor(listed*out*in))
	*t = qexpertTask{}
}

// qexpertTask runs qmatmulTask's items over the tiles of gathered pairs, each against its
// expert's matrix: item i is tile i/ncg by column block i%ncg (cg groups of columns). act
// holds the gathered rows' quantized activations, dst their outputs; bias is nil or every
// expert's, [experts, out].
type qexpertTask struct {
	dst, bias []float32
	experts   []*qweights
	act       []actBlock
	tiles     []expertTile
	cg, ncg   int
}

func (t *qexpertTask) run(s *scratch, lo, hi int) {
	for i := lo; i < hi; i++ {
		tile := t.tiles[i/t.ncg]
		w := t.experts[tile.expert]
		nb := w.in / quant.BlockSize
		// The tile as a MatMul of its own: one row block, the column blocks of the expert.
		v := qmatmulTask{dst: t.dst[tile.start*w.out:], w: w, act: t.act[tile.start*nb:],
			rows: tile.rows, out: w.out, rb: tile.rows, cg: t.cg, nrb: 1}
		if t.bias != nil {
			v.bias = t.bias[tile.expert*w.out : (tile.expert+1)*w.out]
		}
		v.run(s, i%t.ncg, i%t.ncg+1)
	}
}

// expertBuffers is ExpertMatMul's working memory, kept between calls: the gathered inputs and
// outputs, and the tiles.
type expertBuffers struct {
	x, y  []float32
	tiles []expertTile
}

// grow returns nx and ny floats of gathered inputs and outputs. It grows them to exactly what is
// asked, which the engine's memory plan counts (engine.ScratchBytes): the forward's largest call
// comes early, with the first forward of its most rows.
func (e *expertBuffers) grow(nx, ny int) (x, y []float32) {
	if cap(e.x) < nx {
		e.x = make([]float32, nx)
	}
	if cap(e.y) < ny {
		e.y = make([]float32, ny)
	}
	return e.x[:nx], e.y[:ny]
}

// expertTile is up to a row block of one expert's gathered pairs, from start.
type expertTile struct{ expert, start, rows int }

// expertTask runs MatMul's blocks over the tiles; item i is tile i/ncb by column block i%ncb.
// mm holds the gathered inputs and outputs, every expert's matrices, and the blocks planned for
// the longest run; bias is nil or every expert's bias, [experts, out]. MXFP4 weights are mx
// (every row's codes) and mxScales (every row's scales) instead of mm's.
type expertTask struct {
	mm           matmulTask
	bias         []float32
	mx, mxScales []byte
	blockNeed    int // the scratch a block of F32 weights needs, after MXFP4's dequantized ones
	tiles        []expertTile
}

func (t *expertTask) run(s *scratch, lo, hi int) {
	in, out := t.mm.in, t.mm.out
	for i := lo; i < hi; i++ {
		tile := t.tiles[i/t.mm.ncb]
		v := t.mm
		v.rows = tile.rows
		v.x = t.mm.x[tile.start*in:]
		v.dst = t.mm.dst[tile.start*out:]
		switch {
		case v.wh != nil:
			v.wh = v.wh[tile.expert*out*in : (tile.expert+1)*out*in]
		case t.mx == nil:
			v.w = v.w[tile.expert*out*in : (tile.expert+1)*out*in]
		}
		if t.bias != nil {
			v.bias = t.bias[tile.expert*out : (tile.expert+1)*out]
		}
		c0 := i % t.mm.ncb * t.mm.cb
		nc := min(t.mm.cb, out-c0)
		if t.mx != nil {
			t.mxfp4Block(s, v, tile.expert, c0, nc)
			continue
		}
		v.block(s, 0, tile.rows, c0, nc)
	}
}

// mxfp4Block computes columns c0 … c0+nc−1 of v's rows for MXFP4 weights: it dequantizes the
// columns' weight rows of the expert into the front of s (exact, see quant.MXFP4), and runs them
// as a block of F32 weights with the rest of s as the block's own scratch. The bits are those of
// the same weights as F32.
func (t *expertTask) mxfp4Block(s *scratch, v matmulTask, expert, c0, nc int) {
	in, out := v.in, v.out
	all := s.floats(t.mm.cb*in + t.blockNeed)
	w := all[:nc*in]
	codes, scales := quant.MXFP4RowCodes(in), quant.MXFP4RowScales(in)
	for c := range nc {
		row := expert*out + c0 + c
		quant.DequantizeMXFP4(w[c*in:(c+1)*in], t.mx[row*codes:(row+1)*codes], t.mxScales[row*scales:(row+1)*scales])
	}
	// The block sees its columns from 0: its weights, outputs and bias start at column c0.
	v.w, v.dst = w, v.dst[c0:]
	if v.bias != nil {
		v.bias = v.bias[c0:]
	}
	rest := scratch{buf: all[t.mm.cb*in:]}
	v.block(&rest, 0, v.rows, 0, nc)
}

// CombineExperts writes dst[r] = Σ_j weights[r·k+j]·x[r·k+j], j in order from the first product,
// each product rounded before it is added.
func (b *backend) CombineExperts(dst, x, weights compute.Tensor, rows, k int) {
	width := asTensor(dst, "CombineExperts", "dst").rowLen()
	t := &b.combine
	*t = combineTask{
		dst:     f32(dst, "CombineExperts", "dst", rows*width),
		x:       f32(x, "CombineExperts", "x", rows*k*width),
		weights: f32(weights, "CombineExperts", "weights", rows*k),
		width:   width,
		k:       k,
	}
	b.run(t, rows, max(1, 4096/max(width*k, 1)), parFor(rows*k*width))
	*t = combineTask{}
}

// combineTask sums rows' expert outputs; item r is row r.
type combineTask struct {
	dst, x, weights []float32
	width, k        int
}

func (t *combineTask) run(_ *scratch, lo, hi int) {
	for r := lo; r < hi; r++ {
		d := t.dst[r*t.width : (r+1)*t.width]
		for j := range t.k {
			w := t.weights[r*t.k+j]
			x := t.x[(r*t.k+j)*t.width:][:t.width]
			if j == 0 {
				for i, v := range x {
					d[i] = float32(w * v)
				}
				continue
			}
			for i, v := range x {
				d[i] += float32(w * v)
			}
		}
	}
}
