package computetest

import (
	"testing"

	"tfd/compute"
)

// The DeltaNet ops (compute.DeltaNet) of a GPU backend against the cpu backend.

// DeltaSteps returns a step list (compute.DeltaNet's layout) over three sequences of a ring of
// depth state rows each, and the rows it covers: the first starts at position 0 (a zero state),
// the others further on, reading a state left in their rings; the rows are listed sequence by
// sequence in position order, as the engine lists them, while their rows sit interleaved.
func DeltaSteps(depth int) (steps []int32, rows, states int) {
	type seq struct{ first, n int }
	seqs := []seq{{0, 4}, {5, 3}, {2, 6}}
	var order [][2]int // (sequence, position) of each row, interleaved
	for k := 0; ; k++ {
		more := false
		for s, q := range seqs {
			if k < q.n {
				order = append(order, [2]int{s, q.first + k})
				more = true
			}
		}
		if !more {
			break
		}
	}
	for s, q := range seqs {
		for p := q.first; p < q.first+q.n; p++ {
			row := -1
			for i, o := range order {
				if o == [2]int{s, p} {
					row = i
				}
			}
			from := int32(-1)
			if p > 0 {
				from = int32(s*depth + (p-1)%depth)
			}
			steps = append(steps, int32(row), from, int32(s*depth+p%depth))
		}
	}
	return steps, len(order), len(seqs) * depth
}

// CheckDeltaNet: SigmoidMul and AddSigmoidScaled within 2e-6; CausalConvSiLU within 2e-6 and its
// states bit for bit; GatedDeltaRule (its norms reduce in another order) within 2e-5 of the row's
// largest value, its states alike; with rings of 3 states and of 1 (each step in place); CopyRows
// bit for bit. Both backends must be compute.DeltaNet.
func CheckDeltaNet(t *testing.T, p *Pair) {
	var dn [2]compute.DeltaNet
	for i, b := range p.Backends {
		var ok bool
		if dn[i], ok = b.(compute.DeltaNet); !ok {
			t.Fatalf("the %s backend has no DeltaNet ops", b.Name())
		}
	}
	const rows, width = 5, 300
	x, gate := p.F32(Randn(20, rows*width), rows, width), p.F32(Randn(21, rows*width), rows, width)
	p.Do(func(b compute.Backend, i int) { dn[i].SigmoidMul(x[i], x[i], gate[i], rows) })
	g, c := p.Read(x, rows*width)
	Near(t, "SigmoidMul", g, c, 2e-6, 1e-30)
	dst, score := p.F32(Randn(22, rows*width), rows, width), p.F32(Randn(23, rows), rows, 1)
	p.Do(func(b compute.Backend, i int) { dn[i].AddSigmoidScaled(dst[i], x[i], score[i], rows) })
	g, c = p.Read(dst, rows*width)
	Near(t, "AddSigmoidScaled", g, c, 2e-6, 1) // a sum of terms of about 1: an absolute bound

	for _, depth := range []int{3, 1} {
		steps, n, states := DeltaSteps(depth)
		st := p.I32(steps, len(steps))
		const channels, taps = 77, 4
		convState := p.F32(Randn(24, states*(taps-1)*channels), states, (taps-1)*channels)
		in, w := p.F32(Randn(25, n*channels), n, channels), p.F32(Randn(26, channels*taps), channels, taps)
		out := p.F32(nil, n, channels)
		p.Do(func(b compute.Backend, i int) { dn[i].CausalConvSiLU(out[i], in[i], w[i], convState[i], st[i], n) })
		g, c = p.Read(out, n*channels)
		Near(t, "CausalConvSiLU", g, c, 2e-6, 1e-6)
		g, c = p.Read(convState, states*(taps-1)*channels)
		SameBits(t, "CausalConvSiLU's states", g, c)

		spec := compute.DeltaSpec{KHeads: 2, VHeads: 4, KDim: 48, VDim: 40}
		qkvWidth := 2*spec.KHeads*spec.KDim + spec.VHeads*spec.VDim
		ba := Randn(27, n*2*spec.VHeads)
		for i := range ba {
			ba[i] *= 8 // a + dtBias on both sides of softplus's threshold of 20, and far below 0
		}
		qkv, bat := p.F32(Randn(28, n*qkvWidth), n, qkvWidth), p.F32(ba, n, 2*spec.VHeads)
		aLog, dtBias := p.F32(Randn(29, spec.VHeads), spec.VHeads), p.F32([]float32{0.5, 14, -3, 1}, spec.VHeads)
		rec := p.F32(Randn(30, states*spec.DeltaState()), states, spec.DeltaState())
		core := p.F32(nil, n, spec.VHeads*spec.VDim)
		p.Do(func(b compute.Backend, i int) {
			dn[i].GatedDeltaRule(core[i], qkv[i], bat[i], aLog[i], dtBias[i], rec[i], st[i], n, spec)
		})
		g, c = p.Read(core, n*spec.VHeads*spec.VDim)
		nearRows(t, "GatedDeltaRule", g, c, spec.VHeads*spec.VDim, 2e-5)
		g, c = p.Read(rec, states*spec.DeltaState())
		nearRows(t, "GatedDeltaRule's states", g, c, spec.DeltaState(), 2e-5)

		// Each backend's own states, moved down a row within the tensor: bits unchanged.
		before := [2][]float32{g, c}
		p.Do(func(b compute.Backend, i int) { dn[i].CopyRows(rec[i], 0, rec[i], 1, states-1) })
		g, c = p.Read(rec, states*spec.DeltaState())
		for i, after := range [2][]float32{g, c} {
			row := spec.DeltaState()
			SameBits(t, "CopyRows "+p.Backends[i].Name(), after[:(states-1)*row], before[i][row:])
			SameBits(t, "CopyRows' last row "+p.Backends[i].Name(), after[(states-1)*row:], before[i][(states-1)*row:])
		}
	}
}

// nearRows checks got against want row by row, each element within tol of its row's largest
// magnitude.
func nearRows(t testing.TB, what string, got, want []float32, width int, tol float64) {
	t.Helper()
	for r := 0; r < len(want); r += width {
		var scale float64
		for _, v := range want[r : r+width] {
			scale = max(scale, float64(abs32(v)))
		}
		Near(t, what, got[r:r+width], want[r:r+width], tol, max(scale, 1e-30)) // relative to the row's largest
	}
}

func abs32(v float32) float32 {
	if v < 0 {
		return -v
	}
	return v
}
