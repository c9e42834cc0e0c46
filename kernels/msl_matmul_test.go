package kernels_test

import (
	"bytes"
	"fmt"
	"math"
	"slices"

	"tfd/compute"
	"tfd/compute/computetest"
	"tfd/kernels"
)

// The matmul kernels' run checks of TestMSLRuns (msl_ops_test.go): row-major and packed weights,
// the tensor-core tiles, the splits of x and the SwiGLU's split, each against the cpu backend or
// against the kernels it stands for, bit for bit.

// cpuMatMul is the cpu backend's MatMul of the rows rows of xs (in long; a row of zeros past
// them) by the weights wb of dtype dt (out × in), with bias bs where withBias: its rows+1 rows
// of out outputs, and the bias as a kernel's arguments (an empty buffer and 0 without one, so
// that any read of it faults).
func (o *op) cpuMatMul(dt compute.DType, xs []float32, wb []byte, bs []float32, in, out, rows int, withBias bool) (want []float32, mbias *mbuf, hasBias int32) {
	x := o.upload(compute.F32, computetest.F32Bytes(pad(xs, (rows+1)*in)), rows+1, in)
	w := o.upload(dt, wb, out, in)
	dst := o.upload(compute.F32, make([]byte, 4*(rows+1)*out), rows+1, out)
	var bias compute.Tensor
	mbias = &mbuf{}
	if withBias {
		bias, mbias, hasBias = o.upload(compute.F32, computetest.F32Bytes(bs), out), &mbuf{computetest.F32Bytes(bs)}, 1
	}
	o.cpu.MatMul(dst, x, w, bias, rows)
	return o.read(dst, (rows+1)*out), mbias, hasBias
}

func (o *op) matMul(dt compute.DType, in, out, rows int, withBias bool) {
	xs, ws, bs := computetest.Randn(1, rows*in), computetest.Randn(2, out*in), computetest.Randn(3, out)
	wb := computetest.Encode(dt, ws) // ws now holds the rounded weights
	want, mbias, hasBias := o.cpuMatMul(dt, xs, wb, bs, in, out, rows, withBias)

	md := &mbuf{make([]byte, 4*(rows+1)*out)}
	mx := &mbuf{computetest.F32Bytes(pad(xs, (rows+1)*in))}
	if l := kernels.MatMulLaunch(weightSuffix(dt), rows, in, out); kernels.UsesMMA(weightSuffix(dt), in) {
		// The matrix unit's kernel takes three matrices; the absent two are empty buffers, so
		// any read or write of them faults.
		o.launch(l, md, &mbuf{}, &mbuf{}, mx, &mbuf{wb}, &mbuf{}, &mbuf{}, mbias, &mbuf{}, &mbuf{},
			int32(rows), int32(in), int32(out), int32(0), int32(0), hasBias)
	} else {
		o.launch(l, md, mx, &mbuf{wb}, mbias, int32(rows), int32(in), int32(out), hasBias)
	}
	got := floats(md)
	for r := range rows {
		for c := range out {
			var mag float64
			for i := range in {
				mag += math.Abs(float64(xs[r*in+i]) * float64(ws[c*in+i]))
			}
			if withBias {
				mag += math.Abs(float64(bs[c]))
			}
			if d := math.Abs(float64(got[r*out+c] - want[r*out+c])); !(d <= 1e-5*mag) {
				o.t.Fatalf("dst[%d][%d] = %v, cpu %v: |Δ| %.3g > 1e-5·Σ|xw| (%.3g)", r, c, got[r*out+c], want[r*out+c], d, mag)
			}
		}
	}
	computetest.SameBits(o.t, "the row past rows", got[rows*out:], make([]float32, out))
}

// matMuls runs three BF16 matrices of 37, 16 and 50 outputs (the second with a bias) against one
// x in one launch, and checks each against the launch of its matrix alone, bit for bit.
func (o *op) matMuls(rows int) {
	const in = 96
	outs := [3]int{37, 16, 50}
	mx := &mbuf{computetest.F32Bytes(computetest.Randn(1, rows*in))}
	bias := &mbuf{computetest.F32Bytes(computetest.Randn(2, outs[1]))}
	var ws, dsts [3]*mbuf
	for m, out := range outs {
		ws[m] = &mbuf{computetest.Encode(compute.BF16, computetest.Randn(uint64(3+m), out*in))}
		dsts[m] = &mbuf{make([]byte, 4*rows*out)}
	}
	o.launch(kernels.MatMulsLaunch(rows, outs), dsts[0], dsts[1], dsts[2], mx, ws[0], ws[1], ws[2], &mbuf{}, bias, &mbuf{},
		int32(rows), int32(in), int32(outs[0]), int32(outs[1]), int32(outs[2]), int32(2))
	for m, out := range outs {
		alone, b, hasBias := &mbuf{make([]byte, 4*rows*out)}, &mbuf{}, int32(0)
		if m == 1 {
			b, hasBias = bias, 1
		}
		o.launch(kernels.MatMulLaunch("bf16", rows, in, out), alone, &mbuf{}, &mbuf{}, mx, ws[m], &mbuf{}, &mbuf{}, b, &mbuf{}, &mbuf{},
			int32(rows), int32(in), int32(out), int32(0), int32(0), hasBias)
		computetest.SameBits(o.t, fmt.Sprintf("matrix %d of three against alone", m), floats(dsts[m]), floats(alone))
	}
}

// matMulsPacked runs three BF16 matrices of 37, 16 and 50 outputs (the second with a bias) in
// the packed order against one x in one launch, and checks each against the row-major kernel's
// launch of the same matrices, bit for bit; each packed matrix is a buffer of its whole bands, so
// a read past them faults. With split (1 or 2; 0: none), x is split once by mma_split_x and the
// launch is matmul_mma_xs_bf16_S's for S = split; with split = kernels.WGRows, by mma_split_wg
// for matmul_wg4_bf16_N, and with −kernels.WGRows for matmul_wg1_bf16_N and mma_sum_quarters.
func (o *op) matMulsPacked(in, rows, split int) {
	outs := [3]int{37, 16, 50}
	switch split {
	case 0:
		o.packedAgainstRowMajor(in, rows, outs, kernels.Launch{}, kernels.MatMulsPackedLaunch(rows, outs), kernels.Launch{})
	case kernels.WGRows:
		o.packedAgainstRowMajor(in, rows, outs, kernels.SplitWGLaunch(rows, in), kernels.MatMulsWGLaunch(rows, outs), kernels.Launch{})
	case -kernels.WGRows:
		ml, sum := kernels.MatMulsWGQuartersLaunch(rows, outs)
		o.packedAgainstRowMajor(in, rows, outs, kernels.SplitWGLaunch(rows, in), ml, sum)
	default:
		o.packedAgainstRowMajor(in, rows, outs, kernels.SplitXLaunch(rows, in), kernels.MatMulsSplitLaunch(rows, outs, split), kernels.Launch{})
	}
}

// matMulsCopied is matMulsPacked for matmul_wgtP_bf16_N (x split by mma_split_wg; the maps,
// on Metal, the buffers), its ring of stages last.
func (o *op) matMulsCopied(in, rows, n, p int) {
	outs := [3]int{37, 16, 50}
	ml, sum := kernels.MatMulsWGTLaunch(rows, outs, n, p)
	o.packedAgainstRowMajor(in, rows, outs, kernels.SplitWGLaunch(rows, in), ml, sum, int32(kernels.WGTStages(n)))
}

// packedAgainstRowMajor runs matrices of outs outputs (the second with a bias) in the packed order
// against one x of rows rows by in in one launch, ml (after the split sl of x, unless sl is
// empty; then sum adding ml's quarters, unless sum is empty; extra: ml's arguments past the
// others), and checks each against the row-major kernel's launch of the same matrices, bit for
// bit; each packed matrix is a buffer of its whole bands, so a read past them faults.
func (o *op) packedAgainstRowMajor(in, rows int, outs [3]int, sl, ml, sum kernels.Launch, extra ...any) {
	mx := &mbuf{computetest.F32Bytes(computetest.Randn(1, rows*in))}
	bias := &mbuf{computetest.F32Bytes(computetest.Randn(2, outs[1]))}
	var ws, packed, got, want [3]*mbuf
	for m, out := range outs {
		ws[m] = &mbuf{computetest.Encode(compute.BF16, computetest.Randn(uint64(3+m), out*in))}
		packed[m] = &mbuf{make([]byte, 2*kernels.MMAPackedLen(out, in))}
		kernels.PackMMA(packed[m].b, ws[m].b, out, in)
		got[m], want[m] = &mbuf{make([]byte, 4*rows*out)}, &mbuf{make([]byte, 4*rows*out)}
	}
	args := func(w [3]*mbuf, dst [3]*mbuf) []any {
		return []any{dst[0], dst[1], dst[2], mx, w[0], w[1], w[2], &mbuf{}, bias, &mbuf{},
			int32(rows), int32(in), int32(outs[0]), int32(outs[1]), int32(outs[2]), int32(2)}
	}
	a := append(args(packed, got), extra...)
	if sl.Kernel != "" {
		xs := &mbuf{make([]byte, 4*kernels.SplitXWords(rows, in))}
		o.launch(sl, xs, mx, int32(rows), int32(in))
		a[3] = xs
	}
	if sum.Kernel == "" {
		o.launch(ml, a...)
	} else {
		part := &mbuf{make([]byte, 4*kernels.WGQuarterWords(rows, outs))}
		a[0], a[1], a[2] = part, &mbuf{}, &mbuf{}
		o.launch(ml, a...)
		o.launch(sum, got[0], got[1], got[2], part, &mbuf{}, bias, &mbuf{},
			int32(rows), int32(outs[0]), int32(outs[1]), int32(outs[2]), int32(2))
	}
	o.launch(kernels.MatMulsLaunch(rows, outs), args(ws, want)...)
	for m := range outs {
		computetest.SameBits(o.t, fmt.Sprintf("matrix %d packed against row-major", m), floats(got[m]), floats(want[m]))
	}
}

// splitSiLU checks mma_split_silu_wg of gate and up against silu_mul's product split by
// mma_split_wg, bit for bit, padding rows included.
func (o *op) splitSiLU(in, rows int) {
	n := rows * in
	gate := &mbuf{computetest.F32Bytes(computetest.Randn(5, n))}
	up := &mbuf{computetest.F32Bytes(computetest.Randn(6, n))}
	prod := &mbuf{make([]byte, 4*n)}
	o.launch(kernels.SiLUMulLaunch(n), prod, gate, up, int32(n))
	want := &mbuf{make([]byte, 4*kernels.SplitXWords(rows, in))}
	o.launch(kernels.SplitWGLaunch(rows, in), want, prod, int32(rows), int32(in))
	got := &mbuf{bytes.Repeat([]byte{0xff}, len(want.b))}
	o.launch(kernels.SplitSiLUWGLaunch(rows, in), got, gate, up, int32(rows), int32(in), &mbuf{}, &mbuf{}, &mbuf{}, &mbuf{}, int32(0), int32(0))
	sameBytes(o.t, "mma_split_silu_wg against silu_mul then mma_split_wg", got.b, want.b)
}

// splitSiLUQuarters checks mma_split_silu_wg on a gate and up matmul's quarters (quarters set;
// hasBias's bits: gate's bias, up's) against mma_sum_quarters of them and then
// mma_split_silu_wg on the sums, bit for bit: the split and the sums it writes.
func (o *op) splitSiLUQuarters(in, rows int, hasBias int32) {
	size := rows * in
	gate, up := computetest.Randn(15, 4*size), computetest.Randn(16, 4*size)
	gb, ub := &mbuf{computetest.F32Bytes(computetest.Randn(17, in))}, &mbuf{computetest.F32Bytes(computetest.Randn(18, in))}
	wantG, wantU := &mbuf{make([]byte, 4*size)}, &mbuf{make([]byte, 4*size)}
	_, sum := kernels.MatMulsWGQuartersLaunch(rows, [3]int{in, in})
	o.launch(sum, wantG, wantU, &mbuf{}, &mbuf{computetest.F32Bytes(append(slices.Clone(gate), up...))}, gb, ub, &mbuf{},
		int32(rows), int32(in), int32(in), int32(0), hasBias)
	l := kernels.SplitSiLUWGLaunch(rows, in)
	want := &mbuf{make([]byte, 4*kernels.SplitXWords(rows, in))}
	o.launch(l, want, wantG, wantU, int32(rows), int32(in), &mbuf{}, &mbuf{}, &mbuf{}, &mbuf{}, int32(0), int32(0))
	got := &mbuf{bytes.Repeat([]byte{0xff}, len(want.b))}
	gotG, gotU := &mbuf{make([]byte, 4*size)}, &mbuf{make([]byte, 4*size)}
	o.launch(l, got, &mbuf{computetest.F32Bytes(gate)}, &mbuf{computetest.F32Bytes(up)}, int32(rows), int32(in), gotG, gotU, gb, ub, int32(1), hasBias)
	computetest.SameBits(o.t, "gate's sum", floats(gotG), floats(wantG))
	computetest.SameBits(o.t, "up's sum", floats(gotU), floats(wantU))
	sameBytes(o.t, "mma_split_silu_wg on quarters against mma_sum_quarters then mma_split_silu_wg", got.b, want.b)
}

// weightSuffix names a weight dtype as the kernels' variants do.
func weightSuffix(dt compute.DType) string {
	return map[compute.DType]string{compute.F32: "f32", compute.BF16: "bf16", compute.F16: "f16"}[dt]
}
