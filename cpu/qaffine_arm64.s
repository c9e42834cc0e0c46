#include "textflag.h"
#include "qneon_arm64.h"

// The NEON kernels of 4- and 8-bit MLX affine weights with F16 or BF16 scales, one activation
// row; see qkernels.go and qkernels_arm64.go for their contracts; they use the instruction words
// of qneon_arm64.h. Per block and lane, package quant's lane order:
// lane = fma(scale·d_x, s, lane), then lane = fma(bias·d_x, t, lane), where s is the exact integer
// sum of code × activation quant over the lane's four elements and t the sum of the activation
// quants (−m8/8: SCVTF with three fraction bits divides exactly, FNEG negates). The four rows'
// scales and biases are widened for every block (FCVTL for F16, SHLL by 16 for BF16), from the
// quantization group b/bpg. 4-bit codes (0–15) are int8 as they are; 8-bit ones are taken less
// 128 (EOR 0x80), and 128·t added back as the integer −m128.
//
// Registers: R0 res, R1 the weight units, R2 the activation block, R3 the blocks (pairs of blocks,
// 4 bits) left, R5 a column's codes, R9 sb, R10 bpg, R13 the block's index, R12 and R14 scratch.
// V0–V1 the activation quants, V2 the biases, V4 the scales, V5 scale·d_x and V6 bias·d_x of the
// four columns, V7 0x80s (8 bits) or the nibble mask (4 bits), V9–V10 a column's codes, V12–V15
// integer sums, V16–V23 the lanes (column c's 0–3 in V(16+2c), 4–7 in V(17+2c)), V24–V25 t,
// V26–V27 −m128.

// Widening of four scales in Vd's low half.
#define WIDENF16(d) FCVTL(d, d)
#define WIDENBF16(d) SHLL16(d, d)

// Codes of a column (V9–V10) as int8, and the correction of their sums.
#define CODES8 VEOR V7.B16, V9.B16, V9.B16; VEOR V7.B16, V10.B16, V10.B16
#define CORR8 SUB4S(12, 12, 26); SUB4S(14, 14, 27)
#define LO4 VAND V7.B16, V9.B16, V9.B16; VAND V7.B16, V10.B16, V10.B16
#define HI4 VUSHR $4, V9.B16, V9.B16; VUSHR $4, V10.B16, V10.B16
#define NONE

// AFFCOL adds column c's block, its codes from R5 (advancing).
#define AFFCOL(SUMS, CODES, CORR, c) \
	VLD1.P 32(R5), [V9.B16, V10.B16]; \
	CODES; \
	SUMS(12, 13, 9, 0); \
	SUMS(14, 15, 10, 1); \
	CORR; \
	SCVTF(12, 12); \
	SCVTF(14, 14); \
	FMLAE(16+2*c, 12, 5, c); \
	FMLAE(17+2*c, 14, 5, c); \
	FMLAE(16+2*c, 24, 6, c); \
	FMLAE(17+2*c, 25, 6, c)

// AFFBLOCK adds block R13 (the activation block at R2, its codes from R5), advancing R2 and R13.
#define AFFBLOCK(SUMS, WIDEN, CODES, CORR) \
	UDIV  R10, R13, R14; \
	ADD   R14<<4, R9, R14; \
	FMOVD (R14), F4; \
	FMOVD 8(R14), F2; \
	WIDEN(4); \
	WIDEN(2); \
	MOVD  R2, R12; \
	VLD1.P 32(R12), [V0.B16, V1.B16]; \
	VLD1.P 32(R12), [V24.S4, V25.S4]; \
	VLD1.P 32(R12), [V26.S4, V27.S4]; \
	FMOVS (R12), F5; \
	ADD   $128, R2; \
	ADD   $1, R13; \
	SCVTF8TH(24, 24); \
	SCVTF8TH(25, 25); \
	FNEG(24, 24); \
	FNEG(25, 25); \
	FMULE(6, 2, 5, 0); \
	FMULE(5, 4, 5, 0); \
	AFFCOL(SUMS, CODES, CORR, 0); \
	AFFCOL(SUMS, CODES, CORR, 1); \
	AFFCOL(SUMS, CODES, CORR, 2); \
	AFFCOL(SUMS, CODES, CORR, 3)

#define ARGS \
	MOVD res+0(FP), R0; \
	MOVD w+8(FP), R1; \
	MOVD sb+16(FP), R9; \
	MOVD act+24(FP), R2; \
	MOVD nb+32(FP), R3; \
	MOVD bpg+40(FP), R10; \
	MOVD ZR, R13; \
	ZERO8(16)

// AFF8: a unit is a block, the columns' 32 codes each.
#define AFF8(SUMS, WIDEN) \
	ARGS; \
	VMOVI $128, V7.B16; \
loop: \
	MOVD R1, R5; \
	AFFBLOCK(SUMS, WIDEN, CODES8, CORR8); \
	MOVD R5, R1; \
	SUBS $1, R3; \
	BNE  loop; \
	SUMLANES(16); \
	RET

// AFF4: a unit is a pair of blocks, the columns' 32 bytes each, the first block's codes in the
// low nibbles and the second's in the high ones; an odd last block is alone in its unit.
#define AFF4(SUMS, WIDEN) \
	ARGS; \
	VMOVI $15, V7.B16; \
	LSR   $1, R3, R3; \
	CBZ   R3, last; \
pair: \
	MOVD R1, R5; \
	AFFBLOCK(SUMS, WIDEN, LO4, NONE); \
	MOVD R1, R5; \
	AFFBLOCK(SUMS, WIDEN, HI4, NONE); \
	MOVD R5, R1; \
	SUBS $1, R3; \
	BNE  pair; \
last: \
	MOVD nb+32(FP), R3; \
	TBZ  $0, R3, done; \
	MOVD R1, R5; \
	AFFBLOCK(SUMS, WIDEN, LO4, NONE); \
done: \
	SUMLANES(16); \
	RET

// func aff8F16SDOT(res *[8]float32, w *byte, sb *byte, act *actBlock, nb int, bpg int)
TEXT ·aff8F16SDOT(SB), NOSPLIT, $0-48
	AFF8(SUMSDOT, WIDENF16)

// func aff8BF16SDOT(res *[8]float32, w *byte, sb *byte, act *actBlock, nb int, bpg int)
TEXT ·aff8BF16SDOT(SB), NOSPLIT, $0-48
	AFF8(SUMSDOT, WIDENBF16)

// func aff4F16SDOT(res *[8]float32, w *byte, sb *byte, act *actBlock, nb int, bpg int)
TEXT ·aff4F16SDOT(SB), NOSPLIT, $0-48
	AFF4(SUMSDOT, WIDENF16)

// func aff4BF16SDOT(res *[8]float32, w *byte, sb *byte, act *actBlock, nb int, bpg int)
TEXT ·aff4BF16SDOT(SB), NOSPLIT, $0-48
	AFF4(SUMSDOT, WIDENBF16)

// func aff8F16NEON(res *[8]float32, w *byte, sb *byte, act *actBlock, nb int, bpg int)
TEXT ·aff8F16NEON(SB), NOSPLIT, $0-48
	AFF8(SUMSNEON, WIDENF16)

// func aff8BF16NEON(res *[8]float32, w *byte, sb *byte, act *actBlock, nb int, bpg int)
TEXT ·aff8BF16NEON(SB), NOSPLIT, $0-48
	AFF8(SUMSNEON, WIDENBF16)

// func aff4F16NEON(res *[8]float32, w *byte, sb *byte, act *actBlock, nb int, bpg int)
TEXT ·aff4F16NEON(SB), NOSPLIT, $0-48
	AFF4(SUMSNEON, WIDENF16)

// func aff4BF16NEON(res *[8]float32, w *byte, sb *byte, act *actBlock, nb int, bpg int)
TEXT ·aff4BF16NEON(SB), NOSPLIT, $0-48
	AFF4(SUMSNEON, WIDENBF16)
