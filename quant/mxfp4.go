package quant

import "math"

// MXFP4 is the OCP microscaling format as GPT-OSS ships its experts: blocks of 32 weights, each an
// E2M1 code (a 4-bit float: sign, two exponent bits, one mantissa bit) times the block's E8M0
// scale 2^(s−127). Two codes share a byte, the element of the lower index in the lower nibble, as
// openai/gpt-oss-20b's `_blocks` tensors hold them (transformers' convert_moe_packed_tensors
// unpacks them so). A row of n weights is n/2 bytes of codes and n/32 scales.
//
// Every MXFP4 weight is exact in F32 (E2M1 values times a power of two), so a kernel computes
// with the F32 values themselves: an MXFP4 matrix product is the F32 one of the dequantized
// weights, bit for bit, with F32 activations. Nothing is rounded but what F32 weights round.

// e2m1 are the values of the 16 E2M1 codes.
var e2m1 = [16]float32{0, 0.5, 1, 1.5, 2, 3, 4, 6, float32(math.Copysign(0, -1)), -0.5, -1, -1.5, -2, -3, -4, -6}

// MXFP4RowCodes and MXFP4RowScales are the bytes of codes and of scales of a row of n weights.
func MXFP4RowCodes(n int) int  { return n / 2 }
func MXFP4RowScales(n int) int { return n / BlockSize }

// MXFP4Code returns code i of a row's packed codes.
func MXFP4Code(codes []byte, i int) uint8 { return codes[i/2] >> (4 * (i & 1)) & 0xf }

// MXFP4Scale returns the value of an E8M0 scale, 2^(s−127): exact in F32 from s = 1 on, and
// 2⁻¹²⁷ (a subnormal, exact too) for 0. The E8M0 NaN, 255, is taken as the power it encodes,
// 2¹²⁸, which overflows to +Inf as transformers' ldexp does.
func MXFP4Scale(s uint8) float32 { return float32(math.Ldexp(1, int(s)-127)) }

// DequantizeMXFP4 writes the len(dst) weights of one row, whose codes and scales are
// MXFP4RowCodes and MXFP4RowScales bytes: code value times its block's scale, exactly.
func DequantizeMXFP4(dst []float32, codes, scales []byte) {
	n := len(dst)
	if n%BlockSize != 0 || len(codes) < MXFP4RowCodes(n) || len(scales) < MXFP4RowScales(n) {
		panic("quant: DequantizeMXFP4: a row must be whole blocks of 32, with n/2 bytes of codes and n/32 scales")
	}
	for b := range n / BlockSize {
		s := MXFP4Scale(scales[b])
		for j := range BlockSize {
			i := b*BlockSize + j
			dst[i] = e2m1[MXFP4Code(codes, i)] * s
		}
	}
}

// QuantizeMXFP4 packs a row of weights that MXFP4 holds exactly (as GPT-OSS's are) into codes
// and scales; it reports false, with codes and scales undefined, for a row it cannot hold. Each
// block takes the smallest scale that brings its largest magnitude within 6 (1 for an all-zero
// block), so a row packed and dequantized gives back its weights bit for bit. Tests and fixture
// writers use it; the engine reads MXFP4 checkpoints as they are.
func QuantizeMXFP4(codes, scales []byte, src []float32) bool {
	n := len(src)
	if n%BlockSize != 0 || len(codes) < MXFP4RowCodes(n) || len(scales) < MXFP4RowScales(n) {
		panic("quant: QuantizeMXFP4: a row must be whole blocks of 32, with n/2 bytes of codes and n/32 scales")
	}
	for b := range n / BlockSize {
		block := src[b*BlockSize : (b+1)*BlockSize]
		var amax float32
		for _, v := range block {
			amax = max(amax, abs32(v))
		}
		s := uint8(127)
		for s > 0 && amax <= 6*MXFP4Scale(s-1) && amax != 0 {
			s--
		}
		for s < 254 && amax > 6*MXFP4Scale(s) {
			s++
		}
		scales[b] = s
		scale := MXFP4Scale(s)
		for j, v := range block {
			c, ok := e2m1Code(v / scale)
			if !ok || e2m1[c]*scale != v {
				return false
			}
			i := b*BlockSize + j
			codes[i/2] = codes[i/2]&^(0xf<<(4*(i&1))) | c<<(4*(i&1))
		}
	}
	return true
}

// e2m1Code returns the code of an E2M1 value, the sign of zero kept.
func e2m1Code(v float32) (uint8, bool) {
	for c, e := range e2m1 {
		if e == v && math.Signbit(float64(e)) == math.Signbit(float64(v)) {
			return uint8(c), true
		}
	}
	return 0, false
}
