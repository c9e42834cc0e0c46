#include "textflag.h"
#include "qblock_amd64.h"

// The one- and two-row kernels of Q8_0 and Q4_0 weights (see qblock_amd64.h).

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
	V8ROW1(SI, Y2, Y3, Y4, Y5, Y8, Y0)
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
