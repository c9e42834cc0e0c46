//go:build amd64 || arm64

package cuda

import (
	"fmt"

	"tfd/compute"
	"tfd/kernels"
	"tfd/quant"
)

// Quantized weights (Q8_0, Q4_0, Q4_K, Q6_K, MLX affine) stay on the device as the checkpoint stores them
// (compute.Q8_0 says how), and MatMul runs in two launches: quantize_act quantizes the rows of x
// into the backend's scratch, then qmatmul_F_R takes package quant's dot product of each weight
// row with each of them, in quant's order, so the results are the cpu backend's bits
// (kernels/src/quant.kern).

// quantMatrix returns a quantized weight's format and its shape as a matrix, out rows (every
// dimension but the last) of in elements, and the kernels' arguments after the common ones into
// extra (an affine format's bits and group size): n of them.
func (b *backend) quantMatrix(t *tensor, op string, extra *[2]uint64) (format string, out, in, n int) {
	format, bits, group, ok := kernels.QuantFormat(t.dtype)
	if !ok || len(t.shape) < 2 {
		panic(fmt.Sprintf("cuda: %s: %v %v is not a quantized matrix the kernels read", op, t.dtype, t.shape))
	}
	in = t.shape[len(t.shape)-1]
	out = t.n / max(in, 1)
	if _, _, affine := t.dtype.AffineParams(); affine {
		*extra, n = [2]uint64{i32(bits), i32(group)}, 2
	}
	return format, out, in, n
}

// matmulQuant is MatMul with quantized weights wt.
func (b *backend) matmulQuant(dst, x compute.Tensor, wt *tensor, bias compute.Tensor, rows int) {
	var extra [2]uint64
	format, out, in, ne := b.quantMatrix(wt, "MatMul", &extra)
	dt := b.tensorOf(dst, "MatMul", "dst", compute.F32, rows*out)
	xt := b.tensorOf(x, "MatMul", "x", compute.F32, rows*in)
	var bp, hasBias uint64
	if bias != nil {
		bp, hasBias = ptr(b.tensorOf(bias, "MatMul", "bias", compute.F32, out)), 1
	}
	qx, dx, ok := b.quantizeActivations(xt, rows*in/quant.BlockSize)
	if !ok {
		return
	}
	// An array, not a slice literal grown by append: recording allocates nothing.
	args := [11]uint64{ptr(dt), qx, dx, ptr(wt), bp, i32(rows), i32(in), i32(out), hasBias, extra[0], extra[1]}
	b.launchAs(kernels.QMatMulLaunch(format, rows, out), args[:9+ne]...)
}

// embedQuant is Embed from a quantized table tt: each row dequantized as package quant does.
func (b *backend) embedQuant(x compute.Tensor, tt *tensor, tokens compute.Tensor, rows int) {
	var extra [2]uint64
	format, vocab, dim, ne := b.quantMatrix(tt, "Embed", &extra)
	xt := b.tensorOf(x, "Embed", "x", compute.F32, rows*dim)
	ids := b.tensorOf(tokens, "Embed", "tokens", compute.I32, rows)
	args := [8]uint64{ptr(xt), ptr(tt), ptr(ids), i32(vocab), i32(dim), extra[0], extra[1]}
	args[5+ne] = uint64(b.errWord) // the error word follows an affine format's two arguments
	b.launchAs(kernels.QEmbedLaunch(format, rows, dim), args[:6+ne]...)
}

// quantizeActivations enqueues the quantization of the first blocks blocks of 32 of xt's rows as
// package quant quantizes them, for quant's dot products that follow, and returns where the
// quants and the scales lie; false if there are none, or, with the error kept for the next Sync,
// if the device has no room for them.
func (b *backend) quantizeActivations(xt *tensor, blocks int) (qx, dx uint64, ok bool) {
	if blocks <= 0 {
		return 0, 0, false
	}
	if qx, dx, ok = b.quantScratch(blocks); ok {
		b.launchAs(kernels.QuantizeActLaunch(blocks), qx, dx, ptr(xt), i32(blocks))
	}
	return qx, dx, ok
}

// quantScratch returns the addresses of the quantized activations for blocks blocks of 32 (eight
// words of quants each, then an F32 scale each), growing the scratch as scratch does; false, with
// the error kept for the next Sync, if the device has no room for it.
func (b *backend) quantScratch(blocks int) (qx, dx uint64, ok bool) {
	p, ok := b.scratch(&b.qact, 9*blocks, "MatMul: the scratch for its quantized activations")
	return p, p + uint64(32*blocks), ok
}
