package cpu

import (
	"fmt"
	"runtime"

	"tfd/compute"
)

// matmulTask computes dst = x·wᵀ + bias in blocks of rb rows by cb columns; item i is the block at
// row block i/ncb and column block i%ncb. A block's weights are read from memory once and reused
// from cache by every row of the block (three rows at a time in the assembly kernel); every dst
// element is still one dot product in the fixed order (see vdots), so the blocking changes speed,
// never bits. With one row it is a matrix-vector product that streams each weight row once.
//
// Weights are F32 (w) or the raw bits of F16 or BF16 (wh, of dtype wdt). A block of one or two rows
// reads 16-bit weights directly, widening each in a register (vdotsHalf): decode streams half the
// bytes. A block of more rows first widens its weights into scratch, once for all its rows, so
// that the kernels that do most of prefill's arithmetic are the F32 ones; K-blocked blocks (below)
// widen each chunk as they pack it. (Without F16C, F16 weights are always widened into scratch.)
// Widening is exact, so the bits are those of F32 weights.
type matmulTask struct {
	dst, x, w, bias []float32
	wh              []uint16
	wdt             compute.DType
	rows, in, out   int
	rb, cb, ncb     int
}

// Block sizes. A column block's weights (cb rows of in floats) should stay in the L2 cache while
// every row of the row block passes over them; a row block's inputs should stay there too. Both are
// multiples of the assembly kernel's 3×4 tile.
//
// When rows are long (in ≥ mmKBlockMin) the 3×4 tiles also go through K in chunks of mmKChunk,
// keeping their lanes in scratch between chunks, so that the chunk of weights a block needs
// (mmKCols × mmKChunk floats) stays in the L1 cache while every row passes over it. The lanes
// continue exactly where they stopped, so the bits are those of one pass.
var (
	mmBlockBytes   = 48 << 10  // weights per column block
	mmRowBlock     = 48        // rows per row block
	mmRowBlockHalf = 144       // rows per row block at most with 16-bit weights (see rowBlock)
	mmRowBytes     = 256 << 10 // inputs per row block at most when taller than mmRowBlock
	mmKBlockMin    = 1024      // shortest rows that are K-blocked
	mmKChunk       = 256       // floats of K per chunk
	mmKCols        = 16        // columns per block when K-blocked
)

// MatMul writes dst[r][o] = Σ_i x[r][i]·w[o][i] + bias[o] for r < rows. w is [out, in]; row r of x
// is x[r·in:(r+1)·in] and row r of dst is dst[r·out:(r+1)·out]; bias is nil or [out]. dst must not
// overlap x.
func (b *backend) MatMul(dst, x, w, bias compute.Tensor, rows int) {
	wt := asTensor(w, "MatMul", "w")
	if len(wt.shape) != 2 {
		panic(fmt.Sprintf("cpu: MatMul: w has shape %v, want [out, in]", wt.shape))
	}
	out, in := wt.shape[0], wt.shape[1]
	if wt.q != nil {
		var bt []float32
		if bias != nil {
			bt = f32(bias, "MatMul", "bias", out)
		}
		if rows > 0 && out > 0 {
			b.matmulQuant(f32(dst, "MatMul", "dst", rows*out), f32(x, "MatMul", "x", rows*in), wt.q, bt, rows)
		}
		return
	}
	t := &b.mm
	*t = matmulTask{
		dst:  f32(dst, "MatMul", "dst", rows*out),
		x:    f32(x, "MatMul", "x", rows*in),
		wdt:  wt.dtype,
		rows: rows, in: in, out: out,
	}
	t.w, t.wh = weights(w, "MatMul", "w", out*in)
	if bias != nil {
		t.bias = f32(bias, "MatMul", "bias", out)
	}
	if rows <= 0 || out == 0 {
		*t = matmulTask{}
		return
	}
	b.pool.reserve(t.plan())
	nrb := (rows + t.rb - 1) / t.rb
	b.run(t, nrb*t.ncb, 1, parFor(rows*out*max(in, 1)))
	*t = matmulTask{} // drop the references to the tensors
}

// plan sets the task's blocks (cb, ncb, rb) for its rows, in and out, and returns the floats of
// scratch each goroutine needs for them.
func (t *matmulTask) plan() (need int) {
	t.cb = min(t.out, max(4, mmBlockBytes/(4*max(t.in, 1))&^3))
	if t.kblocked() {
		t.cb = min(t.out, mmKCols)
	}
	t.ncb = (t.out + t.cb - 1) / t.cb
	t.rb = t.rowBlock()
	if t.kblocked() {
		need = t.rb/3*(t.cb/4)*96 + t.cb*mmKChunk
	}
	if t.wh != nil {
		need = max(need, t.cb*t.in) // a widened block
	}
	return need
}

// rowBlock returns the rows of a row block: mmRowBlock, or with 16-bit weights up to
// mmRowBlockHalf, since every row block widens its weights again and taller ones share each
// widening. A taller block is taken only while it leaves every goroutine two blocks to work on and
// its inputs (a K-chunk of them when K-blocked) fit mmRowBytes.
func (t *matmulTask) rowBlock() int {
	rb := min(t.rows, mmRowBlock)
	if t.wh == nil {
		return rb
	}
	k := t.in
	if t.kblocked() {
		k = mmKChunk
	}
	procs := runtime.GOMAXPROCS(0)
	for tall := mmRowBlockHalf; tall > rb; tall -= mmRowBlock {
		if (t.rows+tall-1)/tall*t.ncb >= 2*procs && tall*k*4 <= mmRowBytes {
			return min(t.rows, tall)
		}
	}
	return rb
}

// kblocked reports whether the task's 3×4 tiles go through K in chunks.
func (t *matmulTask) kblocked() bool {
	return useAsm && t.in >= mmKBlockMin && t.rows >= 3 && t.out >= 4
}

func (t *matmulTask) run(s *scratch, lo, hi int) {
	for i := lo; i < hi; i++ {
		r0 := i / t.ncb * t.rb
		c0 := i % t.ncb * t.cb
		t.block(s, r0, min(t.rb, t.rows-r0), c0, min(t.cb, t.out-c0))
	}
}

// block computes dst rows [r0, r0+nr) × columns [c0, c0+nc): the lane parts, then the tails and
// the bias.
func (t *matmulTask) block(s *scratch, r0, nr, c0, nc int) {
	in, out := t.in, t.out
	n8 := in &^ 7
	dst := t.dst[r0*out+c0:]
	x := t.x[r0*in:]
	var w []float32
	var wh []uint16
	if t.wh != nil {
		wh = t.wh[c0*in : (c0+nc)*in]
	} else {
		w = t.w[c0*in:]
	}
	direct := wh == nil || halfDirect(t.wdt)
	kblocked := direct && t.kblocked() && nr >= 3 && nc >= 4 && n8 > 0
	if wh != nil && !kblocked && (nr >= 3 || !direct) {
		w = s.floats(nc * in)
		widenOperands(w, wh, t.wdt)
		wh = nil
	}
	switch {
	case kblocked:
		t.kblock(s, dst, x, w, wh, nr, nc)
	case wh != nil:
		vdotsHalf(dst, out, x, in, nr, wh, t.wdt, in, nc, n8)
	default:
		vdots(dst, out, x, in, nr, w, in, nc, n8)
	}
	if n8 == in && t.bias == nil {
		return
	}
	var tail [8]float32 // a tail of 16-bit weights, widened
	for r := range nr {
		d := dst[r*out : r*out+nc]
		xt := x[r*in+n8 : (r+1)*in]
		for c := range d {
			var wt []float32
			if wh != nil {
				wt = tail[:in-n8]
				widenOperands(wt, wh[c*in+n8:], t.wdt)
			} else {
				wt = w[c*in+n8 : (c+1)*in]
			}
			v := dotTail(d[c], xt, wt)
			if t.bias != nil {
				v += t.bias[c0+c]
			}
			d[c] = v
		}
	}
}

// kblock computes the lane parts of a block, its 3×4 tiles K-chunk by K-chunk (see mmKChunk), the
// rows and columns left over in one pass with vdots. The weights are F32 (w) or 16-bit (wh, which
// vdotsHalf must be able to read), widened chunk by chunk as they are packed.
func (t *matmulTask) kblock(s *scratch, dst, x, w []float32, wh []uint16, nr, nc int) {
	in, out := t.in, t.out
	n8 := in &^ 7
	triples, groups := nr/3, nc/4
	checkDots(dst, out, x, in, nr, len(w)+len(wh), in, nc, n8) // the tiles below stay inside it
	buf := s.floats(triples*groups*96 + 4*groups*mmKChunk)
	acc, wp := buf[:triples*groups*96], buf[triples*groups*96:]
	for k := 0; k < n8; k += mmKChunk {
		kc := min(mmKChunk, n8-k)
		mode := 0
		if k > 0 {
			mode |= accLoad
		}
		if k+kc < n8 {
			mode |= accStore
		}
		// Pack the chunk of weights: rows of a power-of-two length would otherwise map to the
		// same few L1 sets and evict each other.
		for c := range 4 * groups {
			if wh != nil {
				widenOperands(wp[c*kc:(c+1)*kc], wh[c*in+k:], t.wdt)
			} else {
				copy(wp[c*kc:(c+1)*kc], w[c*in+k:])
			}
		}
		for tr := range triples {
			r := 3 * tr
			gemm3x4(&dst[r*out], out, &x[r*in+k], in, &wp[0], kc, groups, kc, &acc[tr*groups*96], mode)
		}
	}
	if rest := nr - 3*triples; rest > 0 {
		r := 3 * triples
		if wh != nil {
			vdotsHalf(dst[r*out:], out, x[r*in:], in, rest, wh, t.wdt, in, nc, n8)
		} else {
			vdots(dst[r*out:], out, x[r*in:], in, rest, w, in, nc, n8)
		}
	}
	if c := 4 * groups; nc > c {
		if wh != nil {
			vdotsHalf(dst[c:], out, x, in, 3*triples, wh[c*in:], t.wdt, in, nc-c, n8)
		} else {
			vdots(dst[c:], out, x, in, 3*triples, w[c*in:], in, nc-c, n8)
		}
	}
}
