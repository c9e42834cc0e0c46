// Shared by qkernels_amd64.s and qtile_amd64.s: the Q8_0 and Q4_0 kernels' constants, the VNNI
// kernels' macros, and what all of them compute.

// Kernels for Q8_0 and Q4_0 weights in package quant's block order; see qkernels.go and
// qkernels_amd64.go for their contracts. Each takes one, two or four rows of quantized activations
// (actBlock, 128 bytes a block: quants at 0, the scale at 96, the block's corrections −128·T at
// 100 and −8·T at 104) against a group of eight weight rows (qweights: per unit the eight F16
// scales, then 32-byte words, word k holding the eight rows' quants 4k…4k+3, row c in its 32-bit
// lane c). A row's four quants 4k…4k+3, broadcast to every lane, meet word k, so that after a
// block's words lane c holds the exact integer sum s of column c's 32 products, which is
// converted (exactly: |s| < 2²⁴) and added as acc = fma(d_w·d_x, s, acc), d_w·d_x rounded once
// (VCVTPH2PS widens the F16 scales exactly, VMULPS rounds the product). Only the way to s
// differs between the kernels:
//
//   AVX2, Q8_0: VPMADDUBSW takes an unsigned and a signed operand, so it gets |w| (VPABSB; −128
//   becomes 128, right as unsigned) and x with w's sign (VPSIGNB), which leaves each product as
//   it was; it sums pairs to int16 (at most 2·128·127, no saturation: activations never hold
//   −128), and VPMADDWD by ones sums pairs of those to int32, added word by word.
//   AVX2, Q4_0: the nibbles n are unsigned already: VPMADDUBSW(n, x) sums pairs to int16 (at most
//   2·15·127), which add up over the block's eight half-words without overflow (8·3810 < 2¹⁵);
//   one VPMADDWD by ones, and −8·T added, gives Σ(n−8)·x.
//   VNNI: VPDPBUSD sums four u8·s8 products into an int32 lane that starts at the correction:
//   w+128 (w XOR 0x80) with −128·T for Q8_0, n with −8·T for Q4_0; the broadcast of the row's
//   four quants is EVEX's embedded one, a load and no shuffle.

DATA ones16<>+0(SB)/8, $0x0001000100010001
DATA ones16<>+8(SB)/8, $0x0001000100010001
DATA ones16<>+16(SB)/8, $0x0001000100010001
DATA ones16<>+24(SB)/8, $0x0001000100010001
GLOBL ones16<>(SB), RODATA|NOPTR, $32

DATA mask0f<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA mask0f<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA mask0f<>+16(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA mask0f<>+24(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL mask0f<>(SB), RODATA|NOPTR, $32

DATA sign80<>+0(SB)/8, $0x8080808080808080
DATA sign80<>+8(SB)/8, $0x8080808080808080
DATA sign80<>+16(SB)/8, $0x8080808080808080
DATA sign80<>+24(SB)/8, $0x8080808080808080
GLOBL sign80<>(SB), RODATA|NOPTR, $32


// Registers (VNNI): as AVX2's, and Y24–Y31 the block's words made unsigned (Q8_0: w XOR 0x80,
// Q4_0: words 0–3's low and high nibbles in turn), Y15 the sign bits (Q8_0) or the nibble mask
// (Q4_0).

// V8WORDS loads a Q8_0 unit's eight words, made unsigned.
#define V8WORDS \
	VPXORD 16(DI), Y15, Y24; \
	VPXORD 48(DI), Y15, Y25; \
	VPXORD 80(DI), Y15, Y26; \
	VPXORD 112(DI), Y15, Y27; \
	VPXORD 144(DI), Y15, Y28; \
	VPXORD 176(DI), Y15, Y29; \
	VPXORD 208(DI), Y15, Y30; \
	VPXORD 240(DI), Y15, Y31

// V4WORD: Q4_0 word k at off into its low nibbles in lo and high nibbles in hi.
#define V4WORD(off, lo, hi) \
	VMOVDQU32 off(DI), hi; \
	VPANDD    Y15, hi, lo; \
	VPSRLW    $4, hi, hi; \
	VPANDD    Y15, hi, hi

#define V4WORDS \
	V4WORD(16, Y24, Y25); \
	V4WORD(48, Y26, Y27); \
	V4WORD(80, Y28, Y29); \
	V4WORD(112, Y30, Y31)

// V8ROW: row r's Q8_0 block at p, its sums in two chains a and b (a starting at the correction),
// into acc with the combined scales in f.
#define V8ROW(p, a, b, f, acc) \
	VPBROADCASTD     100(p), a; \
	VPXORD           b, b, b; \
	VPDPBUSD.BCST    (p), Y24, a; \
	VPDPBUSD.BCST    4(p), Y25, b; \
	VPDPBUSD.BCST    8(p), Y26, a; \
	VPDPBUSD.BCST    12(p), Y27, b; \
	VPDPBUSD.BCST    16(p), Y28, a; \
	VPDPBUSD.BCST    20(p), Y29, b; \
	VPDPBUSD.BCST    24(p), Y30, a; \
	VPDPBUSD.BCST    28(p), Y31, b; \
	VPADDD           b, a, a; \
	VCVTDQ2PS        a, a; \
	VMULPS.BCST      96(p), Y14, f; \
	VFMADD231PS      f, a, acc

// V4ROW is V8ROW for Q4_0: word k's low nibbles meet quants 4k…4k+3, its high ones 4k+16….
#define V4ROW(p, a, b, f, acc) \
	VPBROADCASTD     104(p), a; \
	VPXORD           b, b, b; \
	VPDPBUSD.BCST    (p), Y24, a; \
	VPDPBUSD.BCST    16(p), Y25, b; \
	VPDPBUSD.BCST    4(p), Y26, a; \
	VPDPBUSD.BCST    20(p), Y27, b; \
	VPDPBUSD.BCST    8(p), Y28, a; \
	VPDPBUSD.BCST    24(p), Y29, b; \
	VPDPBUSD.BCST    12(p), Y30, a; \
	VPDPBUSD.BCST    28(p), Y31, b; \
	VPADDD           b, a, a; \
	VCVTDQ2PS        a, a; \
	VMULPS.BCST      96(p), Y14, f; \
	VFMADD231PS      f, a, acc

// V8ROW1 is V8ROW with four chains a, b, c, d, for one row, which the chains' latency rather than
// the ports bounds (BenchmarkQDots: about 15% faster for Q8_0; no gain measured for Q4_0, whose
// block has half the words).
#define V8ROW1(p, a, b, c, d, f, acc) \
	VPBROADCASTD     100(p), a; \
	VPXORD           b, b, b; \
	VPXORD           c, c, c; \
	VPXORD           d, d, d; \
	VPDPBUSD.BCST    (p), Y24, a; \
	VPDPBUSD.BCST    4(p), Y25, b; \
	VPDPBUSD.BCST    8(p), Y26, c; \
	VPDPBUSD.BCST    12(p), Y27, d; \
	VPDPBUSD.BCST    16(p), Y28, a; \
	VPDPBUSD.BCST    20(p), Y29, b; \
	VPDPBUSD.BCST    24(p), Y30, c; \
	VPDPBUSD.BCST    28(p), Y31, d; \
	VPADDD           b, a, a; \
	VPADDD           d, c, c; \
	VPADDD           c, a, a; \
	VCVTDQ2PS        a, a; \
	VMULPS.BCST      96(p), Y14, f; \
	VFMADD231PS      f, a, acc
