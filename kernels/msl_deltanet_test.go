package kernels_test

import (
	"fmt"

	"tfd/compute"
	"tfd/compute/computetest"
	"tfd/kernels"
)

// The DeltaNet kernels (deltanet.kern) against the cpu backend's compute.DeltaNet.

// deltaCases are the MSL run check's cases of the DeltaNet kernels.
func deltaCases(check func(name string, f func(o *op))) {
	for _, n := range []int{1, 257, 5000} {
		check(fmt.Sprint("sigmoid_mul ", n), func(o *op) { o.sigmoidGates(n, 1) })
	}
	for _, width := range []int{1, 64, 300} {
		check(fmt.Sprint("add_sigmoid_scaled ", width), func(o *op) { o.sigmoidGates(3, width) })
	}
	for _, depth := range []int{3, 1} { // 1: every step in place
		for _, c := range []struct{ channels, taps int }{{77, 4}, {300, 2}, {5, 3}} {
			check(fmt.Sprint("causal_conv_silu ", depth, c), func(o *op) { o.causalConv(depth, c.channels, c.taps, false) })
		}
		for _, spec := range []compute.DeltaSpec{{KHeads: 2, VHeads: 4, KDim: 16, VDim: 16}, {KHeads: 1, VHeads: 3, KDim: 48, VDim: 40}, {KHeads: 2, VHeads: 2, KDim: 256, VDim: 33}} {
			check(fmt.Sprint("gated_delta_rule ", depth, spec), func(o *op) { o.deltaRule(depth, spec, false) })
		}
	}
	check("causal_conv_silu, a bad step", func(o *op) { o.causalConv(3, 20, 4, true) })
	check("gated_delta_rule, a bad step", func(o *op) { o.deltaRule(3, compute.DeltaSpec{KHeads: 1, VHeads: 1, KDim: 8, VDim: 8}, true) })
}

// sigmoidGates runs sigmoid_mul (width 1: one row of n) or add_sigmoid_scaled (n rows of width).
func (o *op) sigmoidGates(n, width int) {
	dn := o.cpu.(compute.DeltaNet)
	total := n * width
	xs, gs, ds := computetest.Randn(40, total), computetest.Randn(41, total), computetest.Randn(42, total)
	x, d := o.upload(compute.F32, computetest.F32Bytes(xs), n, width), o.upload(compute.F32, computetest.F32Bytes(ds), n, width)
	mx, md := &mbuf{computetest.F32Bytes(xs)}, &mbuf{computetest.F32Bytes(ds)}
	if width == 1 {
		g := o.upload(compute.F32, computetest.F32Bytes(gs), n, 1)
		dn.SigmoidMul(d, x, g, n)
		o.launch(kernels.SigmoidMulLaunch(total), md, mx, &mbuf{computetest.F32Bytes(gs)}, int32(total))
		computetest.Near(o.t, "sigmoid_mul", floats(md), o.read(d, total), 2e-6, 1e-30)
		return
	}
	g := o.upload(compute.F32, computetest.F32Bytes(gs[:n]), n, 1)
	dn.AddSigmoidScaled(d, x, g, n)
	o.launch(kernels.AddSigmoidScaledLaunch(total), md, mx, &mbuf{computetest.F32Bytes(gs[:n])}, int32(total), int32(width))
	computetest.Near(o.t, "add_sigmoid_scaled", floats(md), o.read(d, total), 2e-6, 1e-6)
}

// stepList returns computetest.DeltaSteps' list, with its third step's row out of range when bad.
func stepList(depth int, bad bool) (steps []int32, rows, states int) {
	steps, rows, states = computetest.DeltaSteps(depth)
	if bad {
		steps[3*2] = int32(rows)
	}
	return steps, rows, states
}

func (o *op) causalConv(depth, channels, taps int, bad bool) {
	steps, rows, states := stepList(depth, bad)
	stateLen := compute.ConvState(channels, taps)
	xs, ws, ss := computetest.Randn(43, rows*channels), computetest.Randn(44, channels*taps), computetest.Randn(45, states*stateLen)
	dst := o.upload(compute.F32, make([]byte, 4*rows*channels), rows, channels)
	state := o.upload(compute.F32, computetest.F32Bytes(ss), states, stateLen)
	o.cpu.(compute.DeltaNet).CausalConvSiLU(dst, o.upload(compute.F32, computetest.F32Bytes(xs), rows, channels),
		o.upload(compute.F32, computetest.F32Bytes(ws), channels, taps), state, o.upload(compute.I32, computetest.I32Bytes(steps), len(steps)), rows)
	cpuErr := o.cpu.Sync()
	want, wantState := o.read(dst, rows*channels), o.read(state, states*stateLen)

	md, ms, errWord := &mbuf{make([]byte, 4*rows*channels)}, &mbuf{computetest.F32Bytes(ss)}, &mbuf{make([]byte, 16)}
	o.launch(kernels.CausalConvSiLULaunch(channels), md, &mbuf{computetest.F32Bytes(xs)}, &mbuf{computetest.F32Bytes(ws)}, ms,
		&mbuf{computetest.I32Bytes(steps)}, int32(rows), int32(channels), int32(taps), int32(states), errWord)
	computetest.Near(o.t, "dst", floats(md), want, 2e-6, 1e-6)
	computetest.SameBits(o.t, "state", floats(ms), wantState)
	o.checkError(errWord, cpuErr, bad, 6, 2, rows) // ERR_STEP: step 2, its row
}

func (o *op) deltaRule(depth int, spec compute.DeltaSpec, bad bool) {
	steps, rows, states := stepList(depth, bad)
	width := 2*spec.KHeads*spec.KDim + spec.VHeads*spec.VDim
	out := spec.VHeads * spec.VDim
	qkv, ba := computetest.Randn(46, rows*width), computetest.Randn(47, rows*2*spec.VHeads)
	for i := range ba {
		ba[i] *= 8 // a + dtBias on both sides of softplus's threshold, and far below 0
	}
	aLog, dtBias, ss := computetest.Randn(48, spec.VHeads), computetest.Randn(49, spec.VHeads), computetest.Randn(50, states*spec.DeltaState())
	dst := o.upload(compute.F32, make([]byte, 4*rows*out), rows, out)
	state := o.upload(compute.F32, computetest.F32Bytes(ss), states, spec.DeltaState())
	o.cpu.(compute.DeltaNet).GatedDeltaRule(dst, o.upload(compute.F32, computetest.F32Bytes(qkv), rows, width),
		o.upload(compute.F32, computetest.F32Bytes(ba), rows, 2*spec.VHeads), o.upload(compute.F32, computetest.F32Bytes(aLog), spec.VHeads),
		o.upload(compute.F32, computetest.F32Bytes(dtBias), spec.VHeads), state, o.upload(compute.I32, computetest.I32Bytes(steps), len(steps)), rows, spec)
	cpuErr := o.cpu.Sync()
	want, wantState := o.read(dst, rows*out), o.read(state, states*spec.DeltaState())

	md, ms, errWord := &mbuf{make([]byte, 4*rows*out)}, &mbuf{computetest.F32Bytes(ss)}, &mbuf{make([]byte, 16)}
	o.launch(kernels.GatedDeltaRuleLaunch(spec.VHeads, spec.KDim, spec.VDim), md, &mbuf{computetest.F32Bytes(qkv)}, &mbuf{computetest.F32Bytes(ba)},
		&mbuf{computetest.F32Bytes(aLog)}, &mbuf{computetest.F32Bytes(dtBias)}, ms, &mbuf{computetest.I32Bytes(steps)},
		int32(rows), int32(spec.KHeads), int32(spec.VHeads), int32(spec.KDim), int32(spec.VDim), int32(states), errWord)
	// The norms' sums of squares reduce in another order: within 2e-5 of each row's largest.
	near := func(what string, got, want []float32, w int) {
		for r := 0; r < len(want); r += w {
			var scale float64
			for _, v := range want[r : r+w] {
				scale = max(scale, float64(max(v, -v)))
			}
			computetest.Near(o.t, what, got[r:r+w], want[r:r+w], 2e-5, max(scale, 1e-30))
		}
	}
	near("dst", floats(md), want, out)
	near("state", floats(ms), wantState, spec.DeltaState())
	o.checkError(errWord, cpuErr, bad, 6, 2, rows)
}
