package quant

import (
	"fmt"
	"math"
)

// Affine is MLX's affine quantization ("mode": "affine") with Bits bits a code and GroupSize
// elements a group, as mlx.core.quantize makes it and mlx-community checkpoints store it: for
// each group of a row, a scale and a bias in the model's dtype (`<name>.scales`,
// `<name>.biases`, [out, in/GroupSize]) and, for each element, an unsigned code q of Bits bits;
// the element is scale·q + bias. The codes of a row form one little-endian bit stream (code i in
// bits i·Bits … (i+1)·Bits−1, counting from the lowest bit of the first byte) stored as uint32
// words (`<name>.weight`, [out, in·Bits/32]), which is how MLX packs every width: 4 and 8 bits
// as 8 and 4 codes a word, 3, 5 and 6 bits as 8, 8 and 4 codes in 3, 5 and 3 bytes.
//
// Checked against MLX's source (mlx/backend/cpu/quantized.cpp: quantize, extract_bits, _qmm_t;
// mlx/backend/metal/kernels/quantized.h: affine_quantize) and its documentation of
// mlx.core.quantize. The documentation gives the scale as (max − min)/(2^Bits − 1) and the bias as
// the min; the kernels then move the edge of larger magnitude onto a code exactly (see
// QuantizeAffine), so a checkpoint's scales may be negative, its bias the group's max. Reading
// needs only scale·q + bias, the same in both, with scales and biases in the weights' dtype ("same
// as input" in MLX's table of modes). MLX's own matrix products use unquantized activations in
// floating point; tfd's use quantized activations in package quant's order (see the package doc),
// so their results are close to MLX's, not equal.
type Affine struct {
	Bits, GroupSize int
}

// Check reports whether MLX defines f: bits 2, 3, 4, 5, 6 or 8, groups of 32, 64 or 128.
func (f Affine) Check() error {
	switch {
	case f.Bits < 2 || f.Bits > 8 || f.Bits == 7:
		return fmt.Errorf("quant: affine quantization with %d bits: MLX defines 2, 3, 4, 5, 6 and 8", f.Bits)
	case f.GroupSize != 32 && f.GroupSize != 64 && f.GroupSize != 128:
		return fmt.Errorf("quant: affine quantization in groups of %d: MLX defines 32, 64 and 128", f.GroupSize)
	}
	return nil
}

// RowBytes returns the bytes of the packed codes of a row of n elements (n a multiple of the group
// size): n·Bits/8, a whole number of uint32 words.
func (f Affine) RowBytes(n int) int { return n * f.Bits / 8 }

// Groups returns the groups of a row of n elements.
func (f Affine) Groups(n int) int { return n / f.GroupSize }

func (f Affine) checkRow(n, packed, scales, biases int) {
	if err := f.Check(); err != nil {
		panic(err)
	}
	if n%f.GroupSize != 0 || packed != f.RowBytes(n) || scales != f.Groups(n) || biases != f.Groups(n) {
		panic(fmt.Sprintf("quant: affine %d-bit row of %d elements in groups of %d with %d bytes, %d scales, %d biases: want %d, %d, %d",
			f.Bits, n, f.GroupSize, packed, scales, biases, f.RowBytes(n), f.Groups(n), f.Groups(n)))
	}
}

// Code returns code i of a packed row of bits-bit codes.
func Code(packed []byte, i, bits int) uint8 {
	at := i * bits
	v := uint16(packed[at/8])
	if at%8+bits > 8 {
		v |= uint16(packed[at/8+1]) << 8
	}
	return uint8(v>>(at%8)) & (1<<bits - 1)
}

// PutCode stores q as code i of a packed row of bits-bit codes.
func PutCode(packed []byte, i, bits int, q uint8) {
	at := i * bits
	mask := uint16(1<<bits-1) << (at % 8)
	v := uint16(q) << (at % 8)
	packed[at/8] = packed[at/8]&^byte(mask) | byte(v)
	if at%8+bits > 8 {
		packed[at/8+1] = packed[at/8+1]&^byte(mask>>8) | byte(v>>8)
	}
}

// QuantizeAffine quantizes the row src as mlx.core.quantize does on MLX's CPU (affine_quantize):
// per group, with the group's min and max, the scale is (max − min)/(2^Bits − 1) (at least 1e-7),
// negated unless |min| > |max|; the edge of larger magnitude is q0 = edge/scale rounded to even,
// and unless q0 is 0 the scale becomes edge/q0 and the bias the edge (else the bias is 0); each
// code is (x − bias)/scale rounded to even and clamped to [0, 2^Bits − 1]. It writes the packed
// codes and the F32 scales and biases; MLX then stores the scales and biases in the model's dtype
// (rounded to nearest even), which dequantizing uses, while the codes were computed with the F32
// values.
//
// MLX's GPU kernels (Metal's and CUDA's affine_quantize, which mlx_lm.convert runs on a Mac's GPU)
// differ in two details, so a checkpoint made there can differ from these codes in a few
// elements: the max starts at 0, not −∞ (a group of negative weights gets the range min … 0), and
// round() takes ties away from zero. It matters only for making checkpoints, never for reading
// them; tfd uses this quantizer in tests.
func QuantizeAffine(f Affine, packed []byte, scales, biases []float32, src []float32) {
	f.checkRow(len(src), len(packed), len(scales), len(biases))
	clear(packed)
	bins := float32(int(1)<<f.Bits - 1)
	for g := range f.Groups(len(src)) {
		x := src[g*f.GroupSize : (g+1)*f.GroupSize]
		lo, hi := float32(math.Inf(1)), float32(math.Inf(-1))
		for _, v := range x {
			lo, hi = min(lo, v), max(hi, v)
		}
		neg := abs32(lo) > abs32(hi)
		scale := max((hi-lo)/bins, 1e-7)
		edge := lo
		if !neg {
			scale, edge = -scale, hi
		}
		var bias float32
		if q0 := rint(edge / scale); q0 != 0 {
			scale, bias = edge/q0, edge
		}
		for j, v := range x {
			q := min(max(rint((v-bias)/scale), 0), bins)
			if q != q {
				q = 0 // a NaN weight
			}
			PutCode(packed, g*f.GroupSize+j, f.Bits, uint8(q))
		}
		scales[g], biases[g] = scale, bias
	}
}

// DequantizeAffine writes the values of a packed affine row into dst: scale·q + bias per element,
// the product rounded, then the sum (no fused multiply-add).
func DequantizeAffine(f Affine, dst []float32, packed []byte, scales, biases []float32) {
	f.checkRow(len(dst), len(packed), len(scales), len(biases))
	for i := range dst {
		g := i / f.GroupSize
		dst[i] = float32(scales[g]*float32(Code(packed, i, f.Bits))) + biases[g]
	}
}

// rint rounds v to an integer, ties to even, as C's rint in the default rounding mode.
func rint(v float32) float32 { return float32(math.RoundToEven(float64(v))) }
