// Package quant holds the arithmetic of quantized weights in plain Go: the block layouts of GGUF's
// Q8_0, Q4_0, Q4_K and Q6_K and of MLX's affine quantization, quantizing rows as their reference
// implementations do, dequantizing, and the reference dot product of a quantized weight row with a
// row of activations. Backends reproduce these dot products bit for bit, so this package is the
// definition their kernels are tested against. It is a leaf: it imports nothing of tfd.
//
// # The dot product
//
// A quantized dot product takes its activations quantized too (see [Activation]): blocks of 32
// values, each an int8 quant times one F32 scale per block, so that the products of a block are
// integers, summed exactly. Q8_0 and Q4_0 run in the block order, the other formats in the lane
// order:
//
//   - Block order (Q8_0 and Q4_0): for each block b of 32 elements, in order, the integer sum s
//     of its 32 products (weight quant × activation quant; exact, |s| ≤ 32·128·127 < 2²⁴, so
//     float32(s) is exact too, and it does not matter how a kernel adds them), and with
//     f = float32(d_w · d_x), the weight block's scale times the activation block's, rounded:
//     acc = fma(f, float32(s), acc), a fused multiply-add rounded once ([FMA32]), from zero. The
//     result is acc: one chain a row, one rounding a block. It is ggml's order of
//     vec_dot_q8_0_q8_0 and of its repacked GEMMs, and it lets a kernel keep eight weight rows'
//     elements 4k…4k+3 in one 32-byte word, each lane ending a block with its column's whole s.
//   - Lane order (the others): for each block b, in order, and each lane k < 8, the integer sum
//     s[k] of the four products of elements 4k … 4k+3 of the block, then:
//   - MLX affine: with the weight group's scale and bias, f = float32(scale · d_x) and
//     e = float32(bias · d_x): lane[k] = fma(f, s[k], lane[k]), then lane[k] = fma(e, t[k],
//     lane[k]), where t[k] is the sum of the four activation quants of the lane (the bias meets
//     every element of the lane). Lanes start at zero.
//   - Q4_K and Q6_K: the sub-block's integer scale (and Q4_K's min) multiply the integer sums
//     and f = float32(d · d_x) with the super-block's d; see DotQ4_K and DotQ6_K.
//   - The lanes are combined as ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)).
//
// The integer sums make the arithmetic exact up to the scales, and the fixed float order makes a
// row's result one set of bits whatever kernel computed it: pure Go, AVX2, AVX-512 VNNI, NEON, or
// a GPU's.
package quant

import "math"

// BlockSize is the number of elements in a block of Q8_0, Q4_0 and quantized activations, and the
// unit of every quantized row's length.
const BlockSize = 32

// F16ToF32 widens an IEEE 754 binary16 value exactly.
func F16ToF32(h uint16) float32 {
	sign, mag := uint32(h&0x8000)<<16, uint32(h&0x7fff)<<13
	if mag >= 0x1f<<23 { // infinity or NaN: F32's all-ones exponent, payload kept
		return math.Float32frombits(sign | mag | 0x70000000)
	}
	// The bits moved to F32's positions read as a value 2¹¹² too small (subnormals included,
	// which land among F32's subnormals), and the product by 2¹¹² is exact. No loop, so it
	// inlines into conversion loops.
	return math.Float32frombits(sign|mag) * 0x1p112
}

// BF16ToF32 widens a bfloat16 value exactly: its bits are the upper half of the F32 value's.
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// F32ToF16 rounds f to the nearest binary16 value, ties to even, as ggml's GGML_FP32_TO_FP16 and
// F16C's VCVTPS2PH do: a value past the largest finite half becomes an infinity, one below half
// the smallest subnormal becomes zero, and a NaN becomes the quiet NaN 0x7e00 with f's sign.
func F32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xff
	if exp == 0xff {
		if b&0x7fffff != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	}
	if exp == 0 {
		return sign // zero or an F32 subnormal, far below half of F16's smallest subnormal
	}
	e := exp - 112 // the F16 biased exponent
	if e >= 31 {
		return sign | 0x7c00
	}
	sig := b&0x7fffff | 1<<23 // the 24-bit significand
	shift := 13
	var base uint32
	if e >= 1 {
		// (e-1)<<10 plus the rounded significand, whose hidden bit is 1<<10, gives e<<10 plus the
		// fraction; a fraction that rounds up past its top carries into the exponent (to infinity
		// from the largest binade).
		base = uint32(e-1) << 10
	} else {
		shift = 14 - e // a subnormal half: the significand in units of 2⁻²⁴
		if shift > 24 {
			return sign // below half the smallest subnormal
		}
	}
	q := sig >> shift
	rem, half := sig&(1<<shift-1), uint32(1)<<(shift-1)
	if rem > half || rem == half && q&1 == 1 {
		q++
	}
	return sign | uint16(base+q)
}

// F32ToBF16 rounds f to the nearest bfloat16 value, ties to even; a NaN stays a (quiet) NaN.
func F32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40
	}
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}

// FMA32 returns a·b + c rounded once to float32 (round to nearest, ties to even), as a fused
// multiply-add instruction computes it. The product of two float32 values is exact in float64;
// the sum is rounded to float64 "to odd" (ties and inexact results moved to the odd neighbour),
// which a second rounding to float32 cannot spoil, since float64 has more than twice float32's
// precision plus two bits.
func FMA32(a, b, c float32) float32 {
	p, cc := float64(a)*float64(b), float64(c)
	s := p + cc
	if math.IsInf(s, 0) || math.IsNaN(s) {
		return float32(s)
	}
	// s's rounding error, exactly (Knuth's two-sum).
	pp := s - cc
	err := (p - pp) + (cc - (s - pp))
	if bits := math.Float64bits(s); err != 0 && bits&1 == 0 {
		if (err > 0) == (s > 0) {
			bits++ // away from zero
		} else {
			bits-- // toward zero
		}
		s = math.Float64frombits(bits)
	}
	return float32(s)
}

// sumLanes combines eight lanes as ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)).
func sumLanes(l *[8]float32) float32 {
	return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]))
}
