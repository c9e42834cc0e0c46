#include "textflag.h"

// Kernels for Q8_0 and Q4_0 weights in package quant's block order; see qkernels.go and
// qkernels_amd64.go for their contracts. Each takes one or two rows of quantized activations
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

// Registers (AVX2): DI the weight unit, SI (and BX) the activation block of row 0 (and 1), CX
// the blocks left, R9 res. Y0 (Y1) the results of row 0 (1), Y2–Y3 (Y4–Y5) its integer sums, Y6
// a word (Q4_0: its low nibbles), Y7 |word| (Q4_0: its high nibbles), Y8–Y9 (Y10–Y11) row 0's
// (1's) products, Y12 a combined scale, Y13 the nibble mask (Q4_0), Y14 the eight weight scales,
// Y15 int16 ones.

// A8WORD loads Q8_0 word k at off: the quants in Y6, their magnitudes in Y7.
#define A8WORD(off) \
	VMOVDQU off(DI), Y6; \
	VPABSB  Y6, Y7

// A8ROW adds the products of the word in Y6–Y7 with one row's quants at xoff(x) into acc.
#define A8ROW(x, xoff, p, acc) \
	VPBROADCASTD xoff(x), p; \
	VPSIGNB      Y6, p, p; \
	VPMADDUBSW   p, Y7, p; \
	VPMADDWD     Y15, p, p; \
	VPADDD       p, acc, acc

// AFMA ends a block of one row: its two integer sums a and b, converted, times the combined
// scales (the row's scale at 96(x) times the weights' in Y14), into acc.
#define AFMA(x, a, b, acc) \
	VPADDD       b, a, a; \
	VCVTDQ2PS    a, a; \
	VBROADCASTSS 96(x), Y12; \
	VMULPS       Y12, Y14, Y12; \
	VFMADD231PS  Y12, a, acc

#define A8BLOCK1(k0, k1) \
	A8WORD(16+32*k0); \
	A8ROW(SI, 4*k0, Y8, Y2); \
	A8WORD(16+32*k1); \
	A8ROW(SI, 4*k1, Y9, Y3)

#define A8BLOCK2(k0, k1) \
	A8WORD(16+32*k0); \
	A8ROW(SI, 4*k0, Y8, Y2); \
	A8ROW(BX, 4*k0, Y10, Y4); \
	A8WORD(16+32*k1); \
	A8ROW(SI, 4*k1, Y9, Y3); \
	A8ROW(BX, 4*k1, Y11, Y5)

// func q8x1AVX2(res *[16]float32, w *byte, act *actBlock, nb int)
TEXT ·q8x1AVX2(SB), NOSPLIT, $0-32
	MOVQ    res+0(FP), R9
	MOVQ    w+8(FP), DI
	MOVQ    act+16(FP), SI
	MOVQ    nb+24(FP), CX
	MOVQ    CX, BX
	SHLQ    $7, BX
	ADDQ    SI, BX
	VPXOR   Y0, Y0, Y0
	VPXOR   Y1, Y1, Y1
	VMOVDQU ones16<>(SB), Y15

q8x1a:
	VCVTPH2PS (DI), Y14
	VPXOR     Y2, Y2, Y2
	VPXOR     Y3, Y3, Y3
	A8BLOCK1(0, 1)
	A8BLOCK1(2, 3)
	A8BLOCK1(4, 5)
	A8BLOCK1(6, 7)
	AFMA(SI, Y2, Y3, Y0)
	ADDQ      $272, DI
	ADDQ      $128, SI
	DECQ      CX
	JNZ       q8x1a

	VMOVUPS   Y0, (R9)
	VZEROUPPER
	RET

// func q8x2AVX2(res *[16]float32, w *byte, act *actBlock, nb int)
TEXT ·q8x2AVX2(SB), NOSPLIT, $0-32
	MOVQ    res+0(FP), R9
	MOVQ    w+8(FP), DI
	MOVQ    act+16(FP), SI
	MOVQ    nb+24(FP), CX
	MOVQ    CX, BX
	SHLQ    $7, BX
	ADDQ    SI, BX
	VPXOR   Y0, Y0, Y0
	VPXOR   Y1, Y1, Y1
	VMOVDQU ones16<>(SB), Y15

q8x2a:
	VCVTPH2PS (DI), Y14
	VPXOR     Y2, Y2, Y2
	VPXOR     Y3, Y3, Y3
	VPXOR     Y4, Y4, Y4
	VPXOR     Y5, Y5, Y5
	A8BLOCK2(0, 1)
	A8BLOCK2(2, 3)
	A8BLOCK2(4, 5)
	A8BLOCK2(6, 7)
	AFMA(SI, Y2, Y3, Y0)
	AFMA(BX, Y4, Y5, Y1)
	ADDQ      $272, DI
	ADDQ      $128, SI
	ADDQ      $128, BX
	DECQ      CX
	JNZ       q8x2a

	VMOVUPS   Y0, (R9)
	VMOVUPS   Y1, 32(R9)
	VZEROUPPER
	RET

// A4WORD loads Q4_0 word k at off: its low nibbles in Y6, its high ones in Y7.
#define A4WORD(off) \
	VMOVDQU off(DI), Y6; \
	VPSRLW  $4, Y6, Y7; \
	VPAND   Y13, Y6, Y6; \
	VPAND   Y13, Y7, Y7

// A4ROW adds the int16 pair sums of word k's nibbles in Y6–Y7 with one row's quants 4k…4k+3 and
// 4k+16…4k+19 into lo and hi.
#define A4ROW(x, k, p, lo, hi) \
	VPBROADCASTD 4*k(x), p; \
	VPMADDUBSW   p, Y6, p; \
	VPADDW       p, lo, lo; \
	VPBROADCASTD 16+4*k(x), p; \
	VPMADDUBSW   p, Y7, p; \
	VPADDW       p, hi, hi

// A4END turns one row's int16 sums lo and hi into its block's int32 sums in lo, corrected.
#define A4END(x, lo, hi) \
	VPADDW       hi, lo, lo; \
	VPMADDWD     Y15, lo, lo; \
	VPBROADCASTD 104(x), hi

// func q4x1AVX2(res *[16]float32, w *byte, act *actBlock, nb int)
TEXT ·q4x1AVX2(SB), NOSPLIT, $0-32
	MOVQ    res+0(FP), R9
	MOVQ    w+8(FP), DI
	MOVQ    act+16(FP), SI
	MOVQ    nb+24(FP), CX
	MOVQ    CX, BX
	SHLQ    $7, BX
	ADDQ    SI, BX
	VPXOR   Y0, Y0, Y0
	VPXOR   Y1, Y1, Y1
	VMOVDQU ones16<>(SB), Y15
	VMOVDQU mask0f<>(SB), Y13

q4x1a:
	VCVTPH2PS (DI), Y14
	VPXOR     Y2, Y2, Y2
	VPXOR     Y3, Y3, Y3
	A4WORD(16)
	A4ROW(SI, 0, Y8, Y2, Y3)
	A4WORD(48)
	A4ROW(SI, 1, Y8, Y2, Y3)
	A4WORD(80)
	A4ROW(SI, 2, Y8, Y2, Y3)
	A4WORD(112)
	A4ROW(SI, 3, Y8, Y2, Y3)
	A4END(SI, Y2, Y3)
	AFMA(SI, Y2, Y3, Y0)
	ADDQ      $144, DI
	ADDQ      $128, SI
	DECQ      CX
	JNZ       q4x1a

	VMOVUPS   Y0, (R9)
	VZEROUPPER
	RET

// func q4x2AVX2(res *[16]float32, w *byte, act *actBlock, nb int)
TEXT ·q4x2AVX2(SB), NOSPLIT, $0-32
	MOVQ    res+0(FP), R9
	MOVQ    w+8(FP), DI
	MOVQ    act+16(FP), SI
	MOVQ    nb+24(FP), CX
	MOVQ    CX, BX
	SHLQ    $7, BX
	ADDQ    SI, BX
	VPXOR   Y0, Y0, Y0
	VPXOR   Y1, Y1, Y1
	VMOVDQU ones16<>(SB), Y15
	VMOVDQU mask0f<>(SB), Y13

q4x2a:
	VCVTPH2PS (DI), Y14
	VPXOR     Y2, Y2, Y2
	VPXOR     Y3, Y3, Y3
	VPXOR     Y4, Y4, Y4
	VPXOR     Y5, Y5, Y5
	A4WORD(16)
	A4ROW(SI, 0, Y8, Y2, Y3)
	A4ROW(BX, 0, Y10, Y4, Y5)
	A4WORD(48)
	A4ROW(SI, 1, Y8, Y2, Y3)
	A4ROW(BX, 1, Y10, Y4, Y5)
	A4WORD(80)
	A4ROW(SI, 2, Y8, Y2, Y3)
	A4ROW(BX, 2, Y10, Y4, Y5)
	A4WORD(112)
	A4ROW(SI, 3, Y8, Y2, Y3)
	A4ROW(BX, 3, Y10, Y4, Y5)
	A4END(SI, Y2, Y3)
	A4END(BX, Y4, Y5)
	AFMA(SI, Y2, Y3, Y0)
	AFMA(BX, Y4, Y5, Y1)
	ADDQ      $144, DI
	ADDQ      $128, SI
	ADDQ      $128, BX
	DECQ      CX
	JNZ       q4x2a

	VMOVUPS   Y0, (R9)
	VMOVUPS   Y1, 32(R9)
	VZEROUPPER
	RET

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

// func q8x1VNNI(res *[16]float32, w *byte, act *actBlock, nb int)
TEXT ·q8x1VNNI(SB), NOSPLIT, $0-32
	MOVQ    res+0(FP), R9
	MOVQ    w+8(FP), DI
	MOVQ    act+16(FP), SI
	MOVQ    nb+24(FP), CX
	MOVQ    CX, BX
	SHLQ    $7, BX
	ADDQ    SI, BX
	VPXOR   Y0, Y0, Y0
	VPXOR   Y1, Y1, Y1
	VMOVDQU ones16<>(SB), Y15
	VMOVDQU sign80<>(SB), Y15

q8x1v:
	VCVTPH2PS (DI), Y14
	V8WORDS
	V8ROW(SI, Y2, Y3, Y8, Y0)
	ADDQ      $272, DI
	ADDQ      $128, SI
	DECQ      CX
	JNZ       q8x1v

	VMOVUPS   Y0, (R9)
	VZEROUPPER
	RET

// func q8x2VNNI(res *[16]float32, w *byte, act *actBlock, nb int)
TEXT ·q8x2VNNI(SB), NOSPLIT, $0-32
	MOVQ    res+0(FP), R9
	MOVQ    w+8(FP), DI
	MOVQ    act+16(FP), SI
	MOVQ    nb+24(FP), CX
	MOVQ    CX, BX
	SHLQ    $7, BX
	ADDQ    SI, BX
	VPXOR   Y0, Y0, Y0
	VPXOR   Y1, Y1, Y1
	VMOVDQU ones16<>(SB), Y15
	VMOVDQU sign80<>(SB), Y15

q8x2v:
	VCVTPH2PS (DI), Y14
	V8WORDS
	V8ROW(SI, Y2, Y3, Y8, Y0)
	V8ROW(BX, Y4, Y5, Y9, Y1)
	ADDQ      $272, DI
	ADDQ      $128, SI
	ADDQ      $128, BX
	DECQ      CX
	JNZ       q8x2v

	VMOVUPS   Y0, (R9)
	VMOVUPS   Y1, 32(R9)
	VZEROUPPER
	RET

// func q4x1VNNI(res *[16]float32, w *byte, act *actBlock, nb int)
TEXT ·q4x1VNNI(SB), NOSPLIT, $0-32
	MOVQ    res+0(FP), R9
	MOVQ    w+8(FP), DI
	MOVQ    act+16(FP), SI
	MOVQ    nb+24(FP), CX
	MOVQ    CX, BX
	SHLQ    $7, BX
	ADDQ    SI, BX
	VPXOR   Y0, Y0, Y0
	VPXOR   Y1, Y1, Y1
	VMOVDQU ones16<>(SB), Y15
	VMOVDQU mask0f<>(SB), Y15

q4x1v:
	VCVTPH2PS (DI), Y14
	V4WORDS
	V4ROW(SI, Y2, Y3, Y8, Y0)
	ADDQ      $144, DI
	ADDQ      $128, SI
	DECQ      CX
	JNZ       q4x1v

	VMOVUPS   Y0, (R9)
	VZEROUPPER
	RET

// func q4x2VNNI(res *[16]float32, w *byte, act *actBlock, nb int)
TEXT ·q4x2VNNI(SB), NOSPLIT, $0-32
	MOVQ    res+0(FP), R9
	MOVQ    w+8(FP), DI
	MOVQ    act+16(FP), SI
	MOVQ    nb+24(FP), CX
	MOVQ    CX, BX
	SHLQ    $7, BX
	ADDQ    SI, BX
	VPXOR   Y0, Y0, Y0
	VPXOR   Y1, Y1, Y1
	VMOVDQU ones16<>(SB), Y15
	VMOVDQU mask0f<>(SB), Y15

q4x2v:
	VCVTPH2PS (DI), Y14
	V4WORDS
	V4ROW(SI, Y2, Y3, Y8, Y0)
	V4ROW(BX, Y4, Y5, Y9, Y1)
	ADDQ      $144, DI
	ADDQ      $128, SI
	ADDQ      $128, BX
	DECQ      CX
	JNZ       q4x2v

	VMOVUPS   Y0, (R9)
	VMOVUPS   Y1, 32(R9)
	VZEROUPPER
	RET

// The four-row kernels (VNNI): q8x2VNNI and q4x2VNNI widened to four rows, each unit's words made
// unsigned once for all four, over ng groups one after the other. Registers: R9 the group's
// results of row 0 (R14 bytes on to each next row), DI the weight unit, R12 row 0's first
// activation block, R8 the bytes of a row's blocks, SI, BX, R10, R11 the activation blocks of rows
// 0–3, R13 nb, CX the blocks left, AX the groups left; results in Y0, Y1, Y16, Y17.

// TGROUP starts a group: the rows' first blocks, the blocks left, zero results.
#define TGROUP \
	MOVQ    R12, SI; \
	LEAQ    (SI)(R8*1), BX; \
	LEAQ    (BX)(R8*1), R10; \
	LEAQ    (R10)(R8*1), R11; \
	MOVQ    R13, CX; \
	VPXORD  Y0, Y0, Y0; \
	VPXORD  Y1, Y1, Y1; \
	VPXORD  Y16, Y16, Y16; \
	VPXORD  Y17, Y17, Y17

// TNEXT moves the rows to their next blocks.
#define TNEXT \
	ADDQ $128, SI; \
	ADDQ $128, BX; \
	ADDQ $128, R10; \
	ADDQ $128, R11

// TSTORE stores the group's four rows of results and moves to the next group's.
#define TSTORE \
	VMOVUPS Y0, (R9); \
	VMOVUPS Y1, (R9)(R14*1); \
	LEAQ    (R9)(R14*2), DX; \
	VMOVUPS Y16, (DX); \
	VMOVUPS Y17, (DX)(R14*1); \
	ADDQ    $32, R9

// func q8x4VNNI(dst *float32, stride int, w *byte, act *actBlock, nb, ng int)
TEXT ·q8x4VNNI(SB), NOSPLIT, $0-48
	MOVQ    dst+0(FP), R9
	MOVQ    stride+8(FP), R14
	MOVQ    w+16(FP), DI
	MOVQ    act+24(FP), R12
	MOVQ    nb+32(FP), R13
	MOVQ    ng+40(FP), AX
	MOVQ    R13, R8
	SHLQ    $7, R8
	VMOVDQU sign80<>(SB), Y15

q8x4group:
	TGROUP

q8x4v:
	VCVTPH2PS (DI), Y14
	V8WORDS
	V8ROW(SI, Y2, Y3, Y8, Y0)
	V8ROW(BX, Y4, Y5, Y9, Y1)
	V8ROW(R10, Y6, Y7, Y10, Y16)
	V8ROW(R11, Y11, Y12, Y13, Y17)
	ADDQ      $272, DI
	TNEXT
	DECQ      CX
	JNZ       q8x4v

	TSTORE
	DECQ      AX
	JNZ       q8x4group
	VZEROUPPER
	RET

// func q4x4VNNI(dst *float32, stride int, w *byte, act *actBlock, nb, ng int)
TEXT ·q4x4VNNI(SB), NOSPLIT, $0-48
	MOVQ    dst+0(FP), R9
	MOVQ    stride+8(FP), R14
	MOVQ    w+16(FP), DI
	MOVQ    act+24(FP), R12
	MOVQ    nb+32(FP), R13
	MOVQ    ng+40(FP), AX
	MOVQ    R13, R8
	SHLQ    $7, R8
	VMOVDQU mask0f<>(SB), Y15

q4x4group:
	TGROUP

q4x4v:
	VCVTPH2PS (DI), Y14
	V4WORDS
	V4ROW(SI, Y2, Y3, Y8, Y0)
	V4ROW(BX, Y4, Y5, Y9, Y1)
	V4ROW(R10, Y6, Y7, Y10, Y16)
	V4ROW(R11, Y11, Y12, Y13, Y17)
	ADDQ      $144, DI
	TNEXT
	DECQ      CX
	JNZ       q4x4v

	TSTORE
	DECQ      AX
	JNZ       q4x4group
	VZEROUPPER
	RET

// The four-row kernels (AVX2): q8x2AVX2 and q4x2AVX2 widened to four rows, over ng groups, with
// q8x4VNNI's registers for the pointers and counts. Y0–Y3 the results of rows 0–3, Y4–Y7 their
// integer sums (Q4_0: int16 pair sums, at most 8·3810 a lane), Y8–Y9 a word as A8WORD or A4WORD
// makes it, Y10–Y11 products, Y12 a combined scale, Y13 the nibble mask, Y14 the weight scales,
// Y15 int16 ones.

// QGROUP starts a group (AVX2): the rows' first blocks, the blocks left, zero results.
#define QGROUP \
	MOVQ   R12, SI; \
	LEAQ   (SI)(R8*1), BX; \
	LEAQ   (BX)(R8*1), R10; \
	LEAQ   (R10)(R8*1), R11; \
	MOVQ   R13, CX; \
	VPXOR  Y0, Y0, Y0; \
	VPXOR  Y1, Y1, Y1; \
	VPXOR  Y2, Y2, Y2; \
	VPXOR  Y3, Y3, Y3

// QSTORE stores the group's four rows of results (AVX2) and moves to the next group's.
#define QSTORE \
	VMOVUPS Y0, (R9); \
	VMOVUPS Y1, (R9)(R14*1); \
	LEAQ    (R9)(R14*2), DX; \
	VMOVUPS Y2, (DX); \
	VMOVUPS Y3, (DX)(R14*1); \
	ADDQ    $32, R9

// QZERO zeroes the four rows' integer sums.
#define QZERO \
	VPXOR Y4, Y4, Y4; \
	VPXOR Y5, Y5, Y5; \
	VPXOR Y6, Y6, Y6; \
	VPXOR Y7, Y7, Y7

// Q8WORD4 adds Q8_0 word k (at 16+32k) into the four rows' sums.
#define Q8WORD4(k) \
	VMOVDQU      16+32*k(DI), Y8; \
	VPABSB       Y8, Y9; \
	VPBROADCASTD 4*k(SI), Y10; \
	VPSIGNB      Y8, Y10, Y10; \
	VPMADDUBSW   Y10, Y9, Y10; \
	VPMADDWD     Y15, Y10, Y10; \
	VPADDD       Y10, Y4, Y4; \
	VPBROADCASTD 4*k(BX), Y11; \
	VPSIGNB      Y8, Y11, Y11; \
	VPMADDUBSW   Y11, Y9, Y11; \
	VPMADDWD     Y15, Y11, Y11; \
	VPADDD       Y11, Y5, Y5; \
	VPBROADCASTD 4*k(R10), Y10; \
	VPSIGNB      Y8, Y10, Y10; \
	VPMADDUBSW   Y10, Y9, Y10; \
	VPMADDWD     Y15, Y10, Y10; \
	VPADDD       Y10, Y6, Y6; \
	VPBROADCASTD 4*k(R11), Y11; \
	VPSIGNB      Y8, Y11, Y11; \
	VPMADDUBSW   Y11, Y9, Y11; \
	VPMADDWD     Y15, Y11, Y11; \
	VPADDD       Y11, Y7, Y7

// Q4ROW4 adds one row's products with Q4_0 word k's nibbles (Y8 low, Y9 high) into its int16 sums.
#define Q4ROW4(x, k, acc) \
	VPBROADCASTD 4*k(x), Y10; \
	VPMADDUBSW   Y10, Y8, Y10; \
	VPADDW       Y10, acc, acc; \
	VPBROADCASTD 16+4*k(x), Y11; \
	VPMADDUBSW   Y11, Y9, Y11; \
	VPADDW       Y11, acc, acc

// Q4WORD4 adds Q4_0 word k (at 16+32k) into the four rows' sums.
#define Q4WORD4(k) \
	VMOVDQU 16+32*k(DI), Y8; \
	VPSRLW  $4, Y8, Y9; \
	VPAND   Y13, Y8, Y8; \
	VPAND   Y13, Y9, Y9; \
	Q4ROW4(SI, k, Y4); \
	Q4ROW4(BX, k, Y5); \
	Q4ROW4(R10, k, Y6); \
	Q4ROW4(R11, k, Y7)

// Q4WIDEN4 turns one row's int16 sums into its block's corrected int32 sums.
#define Q4WIDEN4(x, acc) \
	VPMADDWD     Y15, acc, acc; \
	VPBROADCASTD 104(x), Y10; \
	VPADDD       Y10, acc, acc

// QFMA4 adds one row's block: its int32 sums converted, times its combined scales, into res.
#define QFMA4(x, acc, res) \
	VCVTDQ2PS    acc, acc; \
	VBROADCASTSS 96(x), Y12; \
	VMULPS       Y12, Y14, Y12; \
	VFMADD231PS  Y12, acc, res

// func q8x4AVX2(dst *float32, stride int, w *byte, act *actBlock, nb, ng int)
TEXT ·q8x4AVX2(SB), NOSPLIT, $0-48
	MOVQ    dst+0(FP), R9
	MOVQ    stride+8(FP), R14
	MOVQ    w+16(FP), DI
	MOVQ    act+24(FP), R12
	MOVQ    nb+32(FP), R13
	MOVQ    ng+40(FP), AX
	MOVQ    R13, R8
	SHLQ    $7, R8
	VMOVDQU ones16<>(SB), Y15

q8x4agroup:
	QGROUP

q8x4a:
	VCVTPH2PS (DI), Y14
	QZERO
	Q8WORD4(0)
	Q8WORD4(1)
	Q8WORD4(2)
	Q8WORD4(3)
	Q8WORD4(4)
	Q8WORD4(5)
	Q8WORD4(6)
	Q8WORD4(7)
	QFMA4(SI, Y4, Y0)
	QFMA4(BX, Y5, Y1)
	QFMA4(R10, Y6, Y2)
	QFMA4(R11, Y7, Y3)
	ADDQ      $272, DI
	TNEXT
	DECQ      CX
	JNZ       q8x4a

	QSTORE
	DECQ      AX
	JNZ       q8x4agroup
	VZEROUPPER
	RET

// func q4x4AVX2(dst *float32, stride int, w *byte, act *actBlock, nb, ng int)
TEXT ·q4x4AVX2(SB), NOSPLIT, $0-48
	MOVQ    dst+0(FP), R9
	MOVQ    stride+8(FP), R14
	MOVQ    w+16(FP), DI
	MOVQ    act+24(FP), R12
	MOVQ    nb+32(FP), R13
	MOVQ    ng+40(FP), AX
	MOVQ    R13, R8
	SHLQ    $7, R8
	VMOVDQU ones16<>(SB), Y15
	VMOVDQU mask0f<>(SB), Y13

q4x4agroup:
	QGROUP

q4x4a:
	VCVTPH2PS (DI), Y14
	QZERO
	Q4WORD4(0)
	Q4WORD4(1)
	Q4WORD4(2)
	Q4WORD4(3)
	Q4WIDEN4(SI, Y4)
	Q4WIDEN4(BX, Y5)
	Q4WIDEN4(R10, Y6)
	Q4WIDEN4(R11, Y7)
	QFMA4(SI, Y4, Y0)
	QFMA4(BX, Y5, Y1)
	QFMA4(R10, Y6, Y2)
	QFMA4(R11, Y7, Y3)
	ADDQ      $144, DI
	TNEXT
	DECQ      CX
	JNZ       q4x4a

	QSTORE
	DECQ      AX
	JNZ       q4x4agroup
	VZEROUPPER
	RET
