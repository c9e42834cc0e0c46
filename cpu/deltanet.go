package cpu

import (
	"fmt"
	"math"

	"tfd/compute"
)

// The ops of gated DeltaNet layers (compute.DeltaNet). The two recurrent ops split their work by
// channel or value head, never by position: each item walks every step in list order, so a
// sequence's state after N tokens is the same bits however its rows were split into calls or
// shared with other sequences. The exponentials are expGo's, in every kernel kind.

var _ compute.DeltaNet = (*backend)(nil)

// sigmoid returns 1/(1 + exp(−g)) in F32.
func sigmoid(g float32) float32 { return 1 / (1 + expGo(-g)) }

// SigmoidMul writes dst[r] = x[r]·sigmoid(gate[r]) for r < rows, element by element.
func (b *backend) SigmoidMul(dst, x, gate compute.Tensor, rows int) {
	n := rows * asTensor(dst, "SigmoidMul", "dst").rowLen()
	d := f32(dst, "SigmoidMul", "dst", n)[:n]
	xs, g := f32(x, "SigmoidMul", "x", n), f32(gate, "SigmoidMul", "gate", n)
	for i := range d {
		d[i] = xs[i] * sigmoid(g[i])
	}
}

// AddSigmoidScaled adds sigmoid(gate[r])·x[r] into dst[r] for r < rows, each product rounded
// before the add.
func (b *backend) AddSigmoidScaled(dst, x, gate compute.Tensor, rows int) {
	w := asTensor(dst, "AddSigmoidScaled", "dst").rowLen()
	d := f32(dst, "AddSigmoidScaled", "dst", rows*w)
	xs, g := f32(x, "AddSigmoidScaled", "x", rows*w), f32(gate, "AddSigmoidScaled", "gate", rows)
	for r := range rows {
		s := sigmoid(g[r])
		dr, xr := d[r*w:(r+1)*w], xs[r*w:(r+1)*w]
		for i, v := range xr {
			dr[i] += float32(s * v)
		}
	}
}

// CopyRows copies n rows of src from srcRow to dst from dstRow; overlapping ranges of one tensor
// move correctly. A range outside either tensor is reported by the next Sync and nothing moves.
func (b *backend) CopyRows(dst compute.Tensor, dstRow int, src compute.Tensor, srcRow, n int) {
	dt, st := asTensor(dst, "CopyRows", "dst"), asTensor(src, "CopyRows", "src")
	w := dt.rowLen()
	if st.rowLen() != w {
		panic(fmt.Sprintf("cpu: CopyRows between rows of %d and %d elements", st.rowLen(), w))
	}
	d, s := f32(dst, "CopyRows", "dst", 0), f32(src, "CopyRows", "src", 0)
	if n <= 0 {
		return
	}
	if dstRow < 0 || srcRow < 0 || (dstRow+n)*w > len(d) || (srcRow+n)*w > len(s) {
		b.fail("CopyRows: %d rows from %d (of %d) to %d (of %d) do not fit", n, srcRow, len(s)/w, dstRow, len(d)/w)
		return
	}
	copy(d[dstRow*w:(dstRow+n)*w], s[srcRow*w:(srcRow+n)*w])
}

// stepList checks a step list against the rows and the state tensor's rows; a bad step is
// reported by the next Sync, and the list is cut before it.
func (b *backend) stepList(op string, steps compute.Tensor, rows, states int) []int32 {
	s := i32(steps, op, "steps", 3*rows)[:3*rows]
	for i := 0; i < len(s); i += 3 {
		r, from, to := s[i], s[i+1], s[i+2]
		if r < 0 || int(r) >= rows || from < -1 || int(from) >= states || to < 0 || int(to) >= states {
			b.fail("%s: step %d is (row %d, from %d, to %d) with %d rows and %d states", op, i/3, r, from, to, rows, states)
			return s[:i]
		}
	}
	return s
}

// CausalConvSiLU runs the depthwise causal convolution and SiLU of compute.DeltaNet.
func (b *backend) CausalConvSiLU(dst, x, w, state, steps compute.Tensor, rows int) {
	wt := asTensor(w, "CausalConvSiLU", "w")
	if len(wt.shape) != 2 || wt.shape[1] < 1 {
		panic(fmt.Sprintf("cpu: CausalConvSiLU: w has shape %v, want [channels, kernel]", wt.shape))
	}
	c, k := wt.shape[0], wt.shape[1]
	st := asTensor(state, "CausalConvSiLU", "state")
	if st.rowLen() != compute.ConvState(c, k) {
		panic(fmt.Sprintf("cpu: CausalConvSiLU: state rows of %d, want %d", st.rowLen(), compute.ConvState(c, k)))
	}
	sf := f32(state, "CausalConvSiLU", "state", 0)
	t := &b.conv
	*t = convTask{
		dst:      f32(dst, "CausalConvSiLU", "dst", rows*c),
		x:        f32(x, "CausalConvSiLU", "x", rows*c),
		w:        f32(w, "CausalConvSiLU", "w", c*k),
		state:    sf,
		steps:    b.stepList("CausalConvSiLU", steps, rows, len(sf)/max(1, st.rowLen())),
		channels: c,
		kernel:   k,
	}
	b.run(t, c, 64, parFor(rows*c*k*4))
	*t = convTask{}
}

// convTask convolves channels; item c is channel c, through every step.
type convTask struct {
	dst, x, w, state []float32
	steps            []int32
	channels, kernel int
}

func (t *convTask) run(_ *scratch, lo, hi int) {
	c, k := t.channels, t.kernel
	taps := k - 1
	row := taps * c
	for ch := lo; ch < hi; ch++ {
		w := t.w[ch*k : (ch+1)*k]
		for i := 0; i < len(t.steps); i += 3 {
			r, from, to := int(t.steps[i]), int(t.steps[i+1]), int(t.steps[i+2])
			out := t.state[to*row:]
			x := t.x[r*c+ch]
			var y float32
			for j := range taps {
				var in float32 // a zero state: the sequence's first position
				if from >= 0 {
					in = t.state[from*row+j*c+ch]
				}
				y += float32(w[j] * in)
			}
			y += float32(w[taps] * x)
			t.dst[r*c+ch] = y / (1 + expGo(-y))
			// Shift the window: the oldest input leaves, x joins. Reading from before writing to
			// keeps an in-place step (from == to) right.
			for j := range taps {
				var in float32
				switch {
				case j+1 < taps && from >= 0:
					in = t.state[from*row+(j+1)*c+ch]
				case j+1 == taps:
					in = x
				}
				out[j*c+ch] = in
			}
		}
	}
}

// GatedDeltaRule runs the gated delta rule of compute.DeltaNet.
func (b *backend) GatedDeltaRule(dst, qkv, ba, aLog, dtBias, state, steps compute.Tensor, rows int, spec compute.DeltaSpec) {
	if spec.KHeads <= 0 || spec.VHeads%spec.KHeads != 0 || spec.KDim <= 0 || spec.VDim <= 0 {
		panic(fmt.Sprintf("cpu: GatedDeltaRule: bad heads %+v", spec))
	}
	width := 2*spec.KHeads*spec.KDim + spec.VHeads*spec.VDim
	st := asTensor(state, "GatedDeltaRule", "state")
	if st.rowLen() != spec.DeltaState() {
		panic(fmt.Sprintf("cpu: GatedDeltaRule: state rows of %d, want %d", st.rowLen(), spec.DeltaState()))
	}
	sf := f32(state, "GatedDeltaRule", "state", 0)
	t := &b.delta
	*t = deltaTask{
		dst:    f32(dst, "GatedDeltaRule", "dst", rows*spec.VHeads*spec.VDim),
		qkv:    f32(qkv, "GatedDeltaRule", "qkv", rows*width),
		ba:     f32(ba, "GatedDeltaRule", "ba", rows*2*spec.VHeads),
		aLog:   f32(aLog, "GatedDeltaRule", "aLog", spec.VHeads),
		dtBias: f32(dtBias, "GatedDeltaRule", "dtBias", spec.VHeads),
		state:  sf,
		steps:  b.stepList("GatedDeltaRule", steps, rows, len(sf)/st.rowLen()),
		spec:   spec,
		width:  width,
	}
	b.pool.reserve(2*spec.KDim + 2*spec.VDim)
	b.run(t, spec.VHeads, 1, parFor(rows*spec.VHeads*spec.KDim*spec.VDim*4))
	*t = deltaTask{}
}

// deltaTask runs value heads; item h is value head h, through every step.
type deltaTask struct {
	dst, qkv, ba, aLog, dtBias, state []float32
	steps                             []int32
	spec                              compute.DeltaSpec
	width                             int
}

func (t *deltaTask) run(s *scratch, lo, hi int) {
	sp := t.spec
	kd, vd := sp.KDim, sp.VDim
	buf := s.floats(2*kd + 2*vd)
	q, k, u, o := buf[:kd], buf[kd:2*kd], buf[2*kd:2*kd+vd], buf[2*kd+vd:]
	size := kd * vd
	scale := float32(1 / math.Sqrt(float64(kd)))
	for h := lo; h < hi; h++ {
		kh := h / (sp.VHeads / sp.KHeads)
		for i := 0; i < len(t.steps); i += 3 {
			r, from, to := int(t.steps[i]), int(t.steps[i+1]), int(t.steps[i+2])
			row := t.qkv[r*t.width:]
			l2norm(q, row[kh*kd:(kh+1)*kd], scale)
			l2norm(k, row[(sp.KHeads+kh)*kd:(sp.KHeads+kh+1)*kd], 1)
			v := row[2*sp.KHeads*kd+h*vd : 2*sp.KHeads*kd+(h+1)*vd]
			ba := t.ba[r*2*sp.VHeads:]
			beta := sigmoid(ba[h])
			g := -expGo(t.aLog[h]) * softplus(ba[sp.VHeads+h]+t.dtBias[h])
			decay := expGo(g)

			S := t.state[(to*sp.VHeads+h)*size : (to*sp.VHeads+h+1)*size]
			switch {
			case from < 0:
				clear(S)
			case from != to:
				copy(S, t.state[(from*sp.VHeads+h)*size:(from*sp.VHeads+h+1)*size])
			}
			// S ← S·d, and u = Sᵀk summed over k in ascending order.
			clear(u)
			for kk := range kd {
				Sk, kv := S[kk*vd:(kk+1)*vd], k[kk]
				for j := range Sk {
					Sk[j] *= decay
					u[j] += float32(Sk[j] * kv)
				}
			}
			for j := range u {
				u[j] = float32(v[j]-u[j]) * beta // δ
			}
			// S ← S + k·δᵀ, and o = Sᵀq over k in ascending order.
			clear(o)
			for kk := range kd {
				Sk, kv, qv := S[kk*vd:(kk+1)*vd], k[kk], q[kk]
				for j := range Sk {
					Sk[j] += float32(kv * u[j])
					o[j] += float32(Sk[j] * qv)
				}
			}
			copy(t.dst[(r*sp.VHeads+h)*vd:(r*sp.VHeads+h+1)*vd], o)
		}
	}
}

// l2norm writes dst = x·rsqrt(Σx² + 1e−6)·scale (the sum in dot order, each product rounded;
// scale 1 leaves the second product out), as transformers' l2norm and query scaling compute it.
func l2norm(dst, x []float32, scale float32) {
	inv := float32(1 / math.Sqrt(float64(dot(x, x)+1e-6)))
	for i, v := range x {
		dst[i] = v * inv
		if scale != 1 {
			dst[i] *= scale
		}
	}
}

// softplus returns log(1 + exp(x)), or x above 20, as PyTorch's softplus (β 1, threshold 20)
// does; the logarithm is taken in F64 and rounded.
func softplus(x float32) float32 {
	if x > 20 {
		return x
	}
	return float32(math.Log1p(float64(expGo(x))))
}
