//go:build amd64 || arm64

package cuda

import (
	"fmt"

	"tfd/compute"
	"tfd/kernels"
)

// The DeltaNet ops (compute.DeltaNet; kernels/src/deltanet.kern). The recurrent kernels walk the
// step list on the device, each thread its channel or column through every step in order, so a
// forward of a hybrid model records without waiting, and graphs capture it whole.

var _ compute.DeltaNet = (*backend)(nil)

// SigmoidMul writes dst[r] = x[r]·sigmoid(gate[r]) for r < rows, rows of dst's row length.
func (b *backend) SigmoidMul(dst, x, gate compute.Tensor, rows int) {
	n := rows * b.asTensor(dst, "SigmoidMul", "dst").rowLen()
	d := b.tensorOf(dst, "SigmoidMul", "dst", compute.F32, n)
	xt := b.tensorOf(x, "SigmoidMul", "x", compute.F32, n)
	gt := b.tensorOf(gate, "SigmoidMul", "gate", compute.F32, n)
	b.launchAs(kernels.SigmoidMulLaunch(n), ptr(d), ptr(xt), ptr(gt), i32(n))
}

// AddSigmoidScaled adds sigmoid(gate[r])·x[r] into dst[r] for r < rows, rows of dst's row length.
func (b *backend) AddSigmoidScaled(dst, x, gate compute.Tensor, rows int) {
	w := b.asTensor(dst, "AddSigmoidScaled", "dst").rowLen()
	d := b.tensorOf(dst, "AddSigmoidScaled", "dst", compute.F32, rows*w)
	xt := b.tensorOf(x, "AddSigmoidScaled", "x", compute.F32, rows*w)
	gt := b.tensorOf(gate, "AddSigmoidScaled", "gate", compute.F32, rows)
	b.launchAs(kernels.AddSigmoidScaledLaunch(rows*w), ptr(d), ptr(xt), ptr(gt), i32(rows*w), i32(w))
}

// CausalConvSiLU runs the causal convolution and SiLU over the steps' rows; a bad step is
// reported by the next Sync.
func (b *backend) CausalConvSiLU(dst, x, w, state, steps compute.Tensor, rows int) {
	wt := b.tensorOf(w, "CausalConvSiLU", "w", compute.F32, 0)
	if len(wt.shape) != 2 || wt.shape[1] < 1 {
		panic(fmt.Sprintf("cuda: CausalConvSiLU: w has shape %v, want [channels, kernel]", wt.shape))
	}
	c, k := wt.shape[0], wt.shape[1]
	st := b.tensorOf(state, "CausalConvSiLU", "state", compute.F32, 0)
	if st.rowLen() != compute.ConvState(c, k) {
		panic(fmt.Sprintf("cuda: CausalConvSiLU: state rows of %d, want %d", st.rowLen(), compute.ConvState(c, k)))
	}
	states := st.n / max(1, st.rowLen())
	d := b.tensorOf(dst, "CausalConvSiLU", "dst", compute.F32, rows*c)
	xt := b.tensorOf(x, "CausalConvSiLU", "x", compute.F32, rows*c)
	sl := b.tensorOf(steps, "CausalConvSiLU", "steps", compute.I32, 3*rows)
	b.launchAs(kernels.CausalConvSiLULaunch(c), ptr(d), ptr(xt), ptr(wt), ptr(st), ptr(sl),
		i32(rows), i32(c), i32(k), i32(states), uint64(b.errWord))
}

// GatedDeltaRule runs the gated delta rule over the steps' rows; a bad step is reported by the
// next Sync.
func (b *backend) GatedDeltaRule(dst, qkv, ba, aLog, dtBias, state, steps compute.Tensor, rows int, spec compute.DeltaSpec) {
	if spec.KHeads <= 0 || spec.VHeads%spec.KHeads != 0 || spec.KDim <= 0 || spec.VDim <= 0 {
		panic(fmt.Sprintf("cuda: GatedDeltaRule: bad heads %+v", spec))
	}
	width := 2*spec.KHeads*spec.KDim + spec.VHeads*spec.VDim
	st := b.tensorOf(state, "GatedDeltaRule", "state", compute.F32, 0)
	if st.rowLen() != spec.DeltaState() {
		panic(fmt.Sprintf("cuda: GatedDeltaRule: state rows of %d, want %d", st.rowLen(), spec.DeltaState()))
	}
	d := b.tensorOf(dst, "GatedDeltaRule", "dst", compute.F32, rows*spec.VHeads*spec.VDim)
	qt := b.tensorOf(qkv, "GatedDeltaRule", "qkv", compute.F32, rows*width)
	bt := b.tensorOf(ba, "GatedDeltaRule", "ba", compute.F32, rows*2*spec.VHeads)
	at := b.tensorOf(aLog, "GatedDeltaRule", "aLog", compute.F32, spec.VHeads)
	dt := b.tensorOf(dtBias, "GatedDeltaRule", "dtBias", compute.F32, spec.VHeads)
	sl := b.tensorOf(steps, "GatedDeltaRule", "steps", compute.I32, 3*rows)
	b.launchAs(kernels.GatedDeltaRuleLaunch(spec.VHeads, spec.KDim, spec.VDim), ptr(d), ptr(qt), ptr(bt), ptr(at), ptr(dt), ptr(st), ptr(sl),
		i32(rows), i32(spec.KHeads), i32(spec.VHeads), i32(spec.KDim), i32(spec.VDim), i32(st.n/spec.DeltaState()), uint64(b.errWord))
}

// CopyRows copies n rows of src from srcRow to dst from dstRow, bits unchanged: one device copy,
// or, for overlapping ranges of one tensor, pieces no longer than the distance between them, in
// the direction that reads each row before it is overwritten. A range outside either tensor is
// reported by the next Sync and nothing moves.
func (b *backend) CopyRows(dst compute.Tensor, dstRow int, src compute.Tensor, srcRow, n int) {
	dt, st := b.tensorOf(dst, "CopyRows", "dst", compute.F32, 0), b.tensorOf(src, "CopyRows", "src", compute.F32, 0)
	w := dt.rowLen()
	if st.rowLen() != w {
		panic(fmt.Sprintf("cuda: CopyRows between rows of %d and %d elements", st.rowLen(), w))
	}
	if n <= 0 || (dt == st && dstRow == srcRow) {
		return
	}
	if dstRow < 0 || srcRow < 0 || (dstRow+n)*w > dt.n || (srcRow+n)*w > st.n {
		if b.pending == nil {
			b.pending = fmt.Errorf("cuda: CopyRows: %d rows from %d (of %d) to %d (of %d) do not fit", n, srcRow, st.n/max(w, 1), dstRow, dt.n/max(w, 1))
		}
		return
	}
	piece := n
	if dt == st {
		piece = min(n, max(dstRow-srcRow, srcRow-dstRow))
	}
	row := devPtr(w) * 4
	for done := 0; done < n; done += piece {
		m := min(piece, n-done)
		off := done
		if dt == st && dstRow > srcRow {
			off = n - done - m // from the end backwards
		}
		c := b.record()
		*c = command{kind: cmdDtoD, args: [maxArgs]uint64{
			uint64(dt.ptr + devPtr(dstRow+off)*row), uint64(st.ptr + devPtr(srcRow+off)*row), uint64(devPtr(m) * row)}}
	}
}
