package cpu

import (
	"fmt"

	"tfd/compute"
)

// matmulTask computes dst = x·wᵀ + bias in blocks of rb rows by cb columns; item i is the block at
// row block i/ncb and column block i%ncb. A block's weights are read from memory once and reused
// from cache by every row of the block (three rows at a time in the assembly kernel); every dst
// element is still one dot product in the fixed order (see vdots), so the blocking changes speed,
// never bits. With one row it is a matrix-vector product that streams each weight row once.
type matmulTask struct {
	dst, x, w, bias []float32
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
	mmBlockBytes = 48 << 10 // weights per column block
	mmRowBlock   = 48       // rows per row block
	mmKBlockMin  = 1024     // shortest rows that are K-blocked
	mmKChunk     = 256      // floats of K per chunk
	mmKCols      = 16       // columns per block when K-blocked
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
	t := &b.mm
	*t = matmulTask{
		dst:  f32(dst, "MatMul", "dst", rows*out),
		x:    f32(x, "MatMul", "x", rows*in),
		w:    f32(w, "MatMul", "w", out*in),
		rows: rows, in: in, out: out,
	}
	if bias != nil {
		t.bias = f32(bias, "MatMul", "bias", out)
	}
	if rows <= 0 || out == 0 {
		*t = matmulTask{}
		return
	}
	t.rb = min(rows, mmRowBlock)
	t.cb = min(out, max(4, mmBlockBytes/(4*max(in, 1))&^3))
	if t.kblocked() {
		t.cb = min(out, mmKCols)
		b.pool.reserve(t.rb/3*(t.cb/4)*96 + t.cb*mmKChunk)
	}
	t.ncb = (out + t.cb - 1) / t.cb
	nrb := (rows + t.rb - 1) / t.rb
	b.run(t, nrb*t.ncb, 1, parFor(rows*out*max(in, 1)))
	*t = matmulTask{} // drop the references to the tensors
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
	w := t.w[c0*in:]
	if t.kblocked() && nr >= 3 && nc >= 4 && n8 > 0 {
		t.kblock(s, dst, x, w, nr, nc)
	} else {
		vdots(dst, out, x, in, nr, w, in, nc, n8)
	}
	if n8 == in && t.bias == nil {
		return
	}
	for r := range nr {
		d := dst[r*out : r*out+nc]
		xt := x[r*in+n8 : (r+1)*in]
		for c := range d {
			v := dotTail(d[c], xt, w[c*in+n8:(c+1)*in])
			if t.bias != nil {
				v += t.bias[c0+c]
			}
			d[c] = v
		}
	}
}

// kblock computes the lane parts of a block, its 3×4 tiles K-chunk by K-chunk (see mmKChunk), the
// rows and columns left over in one pass with vdots.
func (t *matmulTask) kblock(s *scratch, dst, x, w []float32, nr, nc int) {
	in, out := t.in, t.out
	n8 := in &^ 7
	triples, groups := nr/3, nc/4
	checkDots(dst, out, x, in, nr, w, in, nc, n8) // the tiles below stay inside it
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
			copy(wp[c*kc:(c+1)*kc], w[c*in+k:])
		}
		for tr := range triples {
			r := 3 * tr
			gemm3x4(&dst[r*out], out, &x[r*in+k], in, &wp[0], kc, groups, kc, &acc[tr*groups*96], mode)
		}
	}
	if rest := nr - 3*triples; rest > 0 {
		r := 3 * triples
		vdots(dst[r*out:], out, x[r*in:], in, rest, w, in, nc, n8)
	}
	if nc > 4*groups {
		c := 4 * groups
		vdots(dst[c:], out, x, in, 3*triples, w[c*in:], in, nc-c, n8)
	}
}
