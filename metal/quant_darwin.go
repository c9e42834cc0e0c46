//go:build darwin && arm64

package metal

import (
	"fmt"

	"tfd/compute"
	"tfd/kernels"
	"tfd/quant"
)

// Quantized weights (Q8_0, Q4_0, Q4_K, Q6_K, MLX affine) stay in their buffers as the checkpoint stores them
// (compute.Q8_0 says how), and MatMul runs in two dispatches: quantize_act quantizes the rows of
// x into the backend's scratch, then qmatmul_F_R takes package quant's dot product of each weight
// row with each of them, in quant's order, so the results are the cpu backend's bits
// (kernels/src/quant.kern).

// quantMatrix returns a quantized weight's format and its shape as a matrix, out rows (every
// dimension but the last) of in elements, and the kernels' arguments after the common ones into
// extra (an affine format's bits and group size): n of them.
func (b *backend) quantMatrix(t *tensor, op string, extra *[2]arg) (format string, out, in, n int) {
	format, bits, group, ok := kernels.QuantFormat(t.dtype)
	if !ok || len(t.shape) < 2 {
		panic(fmt.Sprintf("metal: %s: %v %v is not a quantized matrix the kernels read", op, t.dtype, t.shape))
	}
	in = t.shape[len(t.shape)-1]
	out = t.n / max(in, 1)
	if _, _, affine := t.dtype.AffineParams(); affine {
		*extra, n = [2]arg{i32(bits), i32(group)}, 2
	}
	return format, out, in, n
}

// matmulQuant is MatMul with quantized weights wt.
func (b *backend) matmulQuant(dst, x compute.Tensor, wt *tensor, bias compute.Tensor, rows int) {
	var extra [2]arg
	format, out, in, ne := b.quantMatrix(wt, "MatMul", &extra)
	dt := b.tensorOf(dst, "MatMul", "dst", compute.F32, rows*out)
	xt := b.tensorOf(x, "MatMul", "x", compute.F32, rows*in)
	var bt arg
	hasBias := 0
	if bias != nil {
		bt, hasBias = bufArg(b.tensorOf(bias, "MatMul", "bias", compute.F32, out)), 1
	}
	qx, dx, ok := b.quantizeActivations(xt, rows*in/quant.BlockSize)
	if !ok {
		return
	}
	args := [11]arg{bufArg(dt), qx, dx, bufArg(wt), bt, i32(rows), i32(in), i32(out), i32(hasBias), extra[0], extra[1]}
	b.dispatch(kernels.QMatMulLaunch(format, rows, out), args[:9+ne]...)
}

// embedQuant is Embed from a quantized table tt: each row dequantized as package quant does.
func (b *backend) embedQuant(x compute.Tensor, tt *tensor, tokens compute.Tensor, rows int) {
	var extra [2]arg
	format, vocab, dim, ne := b.quantMatrix(tt, "Embed", &extra)
	xt := b.tensorOf(x, "Embed", "x", compute.F32, rows*dim)
	ids := b.tensorOf(tokens, "Embed", "tokens", compute.I32, rows)
	args := [8]arg{bufArg(xt), bufArg(tt), bufArg(ids), i32(vocab), i32(dim), extra[0], extra[1]}
	args[5+ne] = b.errArg() // the error word follows an affine format's two arguments
	b.dispatch(kernels.QEmbedLaunch(format, rows, dim), args[:6+ne]...)
}

// quantizeActivations dispatches the quantization of the first blocks blocks of 32 of xt's rows
// as package quant quantizes them, for quant's dot products that follow, and returns where the
// quants and the scales lie; false if there are none, or, with the error kept for the next Sync,
// if there is no room for them.
func (b *backend) quantizeActivations(xt *tensor, blocks int) (qx, dx arg, ok bool) {
	if blocks <= 0 {
		return arg{}, arg{}, false
	}
	act := b.quantScratch(blocks)
	if act == nil {
		return arg{}, arg{}, false
	}
	// The quants (eight words a block), then the scales: offsets of 32 bytes a block.
	qx, dx = bufArg(act), arg{buf: act.buf, off: uint64(32 * blocks)}
	b.dispatch(kernels.QuantizeActLaunch(blocks), qx, dx, bufArg(xt), i32(blocks))
	return qx, dx, true
}

// quantScratch returns the scratch for the quantized activations of blocks blocks of 32 (eight
// words of quants each, then an F32 scale each), grown as attentionScratch grows its own; nil,
// with the error kept for the next Sync, if there is no room for it.
func (b *backend) quantScratch(blocks int) *tensor {
	n := 9 * blocks
	if b.qact != nil && b.qact.n >= n {
		return b.qact
	}
	t, err := b.Alloc(compute.F32, n)
	if err != nil {
		if b.pending == nil {
			b.pending = fmt.Errorf("metal: MatMul: the scratch for its quantized activations: %w", err)
		}
		return nil
	}
	if b.qact != nil {
		b.Free(b.qact)
	}
	b.qact = t.(*tensor)
	return b.qact
}
