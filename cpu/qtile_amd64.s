#include "textflag.h"
#include "qblock_amd64.h"

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
