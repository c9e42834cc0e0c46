package kernels_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"tfd/compute"
	"tfd/compute/computetest"
	"tfd/kernels"
	"tfd/quant"
)

// The quantized-weight kernels on the MSL runner against the cpu backend (TestMSLRuns calls
// them): the quantized activations bit for bit equal to package quant's, and MatMul and Embed bit
// for bit equal to the cpu backend's, whose results are quant's: the kernels do the same
// arithmetic in the same order.

// quantChecks adds the quantized kernels' cases to TestMSLRuns: every format and scale dtype,
// every row group R (rows 1, 2, 3, 7, 20), columns that leave partial groups.
func quantChecks(t *testing.T, check func(name string, f func(o *op))) {
	for _, dt := range computetest.QuantDTypes(t) {
		unit := computetest.QuantUnit(dt)
		check(fmt.Sprint("qmatmul ", dt, " one block"), func(o *op) { o.quantMatMul(dt, unit, 5, 1, false) })
		// Whole batches of every row group's size (32, 16, 8, 4 blocks) and a rest.
		in := computetest.QuantBatchLen(dt)
		for _, rows := range []int{1, 2, 3, 7, 20} {
			check(fmt.Sprint("qmatmul ", dt, " rows ", rows), func(o *op) { o.quantMatMul(dt, in, 37, rows, rows%2 == 1) })
		}
		check(fmt.Sprint("qmatmul ", dt, " three groups"), func(o *op) { o.quantMatMul(dt, 3*unit, 5, 2, false) })
		check(fmt.Sprint("qembed ", dt), func(o *op) { o.quantEmbed(dt, 3*unit, -1) })
		// Pairs among 8 experts pick every row group R (1, 2, 4, 8, 16); share: x rows per token
		// (2 pairs each) and per pair.
		for i, c := range []struct{ in, out, pairs, share int }{{unit, 5, 8, 2}, {in, 37, 16, 1}, {3 * unit, 9, 20, 2}, {unit, 18, 60, 1}, {unit, 3, 100, 2}} {
			check(fmt.Sprint("expert_qmatmul ", dt, c), func(o *op) { o.expertQMatMul(dt, c.in, c.out, c.pairs, 8, c.share, i%2 == 1) })
		}
	}
	check("qembed bad token", func(o *op) { o.quantEmbed(compute.Q4_0, 64, 50) })
}

// quantFormat names a quantized dtype as the kernels' variants do.
func quantFormat(dt compute.DType) (format string, bits, group int) {
	switch dt {
	case compute.Q8_0:
		return "q8_0", 8, 32
	case compute.Q4_0:
		return "q4_0", 4, 32
	case compute.Q4_K:
		return "q4_k", 4, 256
	case compute.Q6_K:
		return "q6_k", 6, 256
	}
	f, scales, _ := dt.AffineParams()
	return "affine_" + weightSuffix(scales), f.Bits, f.GroupSize
}

func (o *op) quantMatMul(dt compute.DType, in, out, rows int, withBias bool) {
	xs, bs := computetest.Randn(uint64(in*rows), rows*in), computetest.Randn(3, out)
	for i := range 32 {
		xs[i] = 0 // a block of zeros: a zero scale
	}
	wb := computetest.QuantizedWeights(o.t, dt, out, in, uint64(out))
	want, mbias, hasBias := o.cpuMatMul(dt, xs, wb, bs, in, out, rows, withBias)

	blocks := rows * in / quant.BlockSize
	qx, dx := &mbuf{make([]byte, 32*blocks)}, &mbuf{make([]byte, 4*blocks)}
	o.launch(kernels.QuantizeActLaunch(blocks), qx, dx, &mbuf{computetest.F32Bytes(xs)}, int32(blocks))
	var a quant.Activation
	for r := range rows {
		a.Quantize(xs[r*in : (r+1)*in])
		for j, q := range a.Q {
			if got := int8(qx.b[r*in+j]); got != q {
				o.t.Fatalf("activation quant %d of row %d: %d, quant %d", j, r, got, q)
			}
		}
		nb := in / quant.BlockSize
		computetest.SameBits(o.t, "activation scales", floats(dx)[r*nb:(r+1)*nb], a.D)
	}

	format, bits, group := quantFormat(dt)
	md := &mbuf{make([]byte, 4*(rows+1)*out)}
	args := []any{md, qx, dx, &mbuf{wb}, mbias, int32(rows), int32(in), int32(out), hasBias}
	if _, _, affine := dt.AffineParams(); affine {
		args = append(args, int32(bits), int32(group))
	}
	o.launch(kernels.QMatMulLaunch(format, rows, out), args...)
	got := floats(md)
	computetest.SameBits(o.t, "dst", got[:rows*out], want[:rows*out])
	computetest.SameBits(o.t, "the row past rows", got[rows*out:], make([]float32, out))
}

func (o *op) quantEmbed(dt compute.DType, dim, badToken int) {
	const vocab = 50
	rng := rand.New(rand.NewPCG(uint64(vocab), uint64(dim)))
	ids := make([]int32, 9)
	for i := range ids {
		ids[i] = int32(rng.IntN(vocab))
	}
	ids[0], ids[1] = 0, vocab-1 // the first and last rows of the table
	if badToken >= 0 {
		ids[4] = int32(badToken)
	}
	tb := computetest.QuantizedWeights(o.t, dt, vocab, dim, 4)
	x := o.upload(compute.F32, make([]byte, 4*len(ids)*dim), len(ids), dim)
	o.cpu.Embed(x, o.upload(dt, tb, vocab, dim), o.upload(compute.I32, computetest.I32Bytes(ids), len(ids)), len(ids))
	cpuErr := o.cpu.Sync()
	want := o.read(x, len(ids)*dim)

	format, bits, group := quantFormat(dt)
	mx, errWord := &mbuf{make([]byte, 4*len(ids)*dim)}, &mbuf{make([]byte, 16)}
	args := []any{mx, &mbuf{tb}, &mbuf{computetest.I32Bytes(ids)}, int32(vocab), int32(dim)}
	if _, _, affine := dt.AffineParams(); affine {
		args = append(args, int32(bits), int32(group))
	}
	o.launch(kernels.QEmbedLaunch(format, len(ids), dim), append(args, errWord)...)
	computetest.SameBits(o.t, "x", floats(mx), want)
	o.checkError(errWord, cpuErr, badToken >= 0, 1, 4, badToken) // ERR_EMBED, row 4
}

// expertQMatMul runs expert_qmatmul on pairs pairs among experts with quantized weights (pair 0's
// id is no expert: its row stays as it was), share pairs to an x row, after quantize_act, and
// compares it with the cpu backend's ExpertMatMul, whose rows are its quantized MatMul's: bit for
// bit.
func (o *op) expertQMatMul(dt compute.DType, in, out, pairs, experts, share int, withBias bool) {
	ids := randomIDs(uint64(pairs+in), pairs, experts, 0)
	groups, _ := o.cpuGroups(ids, experts)
	xrows := (pairs + share - 1) / share
	xs := computetest.Randn(13, xrows*in)
	for i := range 32 {
		xs[i] = 0 // a block of zeros: a zero scale
	}
	stack, _ := computetest.QuantizedExperts(o.t, dt, experts, out, in, uint64(out))
	before := computetest.Randn(15, pairs*out)
	dst := o.upload(compute.F32, computetest.F32Bytes(before), pairs, out)
	var bias compute.Tensor
	mb, hasBias := &mbuf{}, int32(0)
	if withBias {
		bs := computetest.Randn(19, experts*out)
		bias, mb, hasBias = o.upload(compute.F32, computetest.F32Bytes(bs), experts, out), &mbuf{computetest.F32Bytes(bs)}, 1
	}
	o.cpu.ExpertMatMul(dst, o.upload(compute.F32, computetest.F32Bytes(xs), xrows, in), o.upload(dt, stack, experts, out, in), bias,
		o.upload(compute.I32, computetest.I32Bytes(groups), len(groups)), pairs, share)
	want := o.read(dst, pairs*out)

	blocks := xrows * in / quant.BlockSize
	qx, dx := &mbuf{make([]byte, 32*blocks)}, &mbuf{make([]byte, 4*blocks)}
	o.launch(kernels.QuantizeActLaunch(blocks), qx, dx, &mbuf{computetest.F32Bytes(xs)}, int32(blocks))
	format, bits, group := quantFormat(dt)
	md := &mbuf{computetest.F32Bytes(before)}
	l := kernels.ExpertQMatMulLaunch(format, pairs, experts, out)
	o.launch(l, md, qx, dx, &mbuf{stack}, mb, &mbuf{computetest.I32Bytes(groups)},
		int32(pairs), int32(share), int32(in), int32(out), int32(experts), hasBias, int32(bits), int32(group))
	got := floats(md)
	computetest.SameBits(o.t, "the row of the pair in no run", got[:out], before[:out])
	computetest.SameBits(o.t, l.Kernel, got, want)
}
