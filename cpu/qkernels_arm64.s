#include "textflag.h"
#include "qneon_arm64.h"

// The NEON kernels of Q8_0 and Q4_0 weights; see qkernels.go and qkernels_arm64.go for their
// contracts. Per block, column and lane, package quant's order: the lane's integer sum s of four
// weight quant × activation quant products, exact, then lane = fma(f, s, lane) with
// f = float32(d_w·d_x), the four columns' f at once (FCVTL widens the F16 scales exactly, FMUL
// rounds the product as Go's float32 multiply does). The *SDOT kernels sum a lane with one SDOT
// (FEAT_DotProd: each 32-bit lane gets the sum of four int8 products); the *NEON kernels, for CPUs
// without it, with SMULL/SMULL2 (int8 products as int16, at most 128·128), SADDLP (pairs widened to
// int32) and ADDP (the pairs of pairs): the same integers. SCVTF converts them exactly
// (|s| ≤ 4·128·127 < 2²⁴) and FMLA fuses the multiply-add. At the end FADDP combines a column's
// lanes as ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)).
//
// Registers: R0 res, R1 the weight units, R2 (and R4) the activation block of row 0 (and 1), R3
// the blocks (pairs of blocks, Q4_0) left, R5 a column's quants. V0–V1 (V2–V3) the activation
// quants of row 0 (1), V4 the four columns' d_w, V5 (V6) their f for row 0 (1), V7 the nibble
// mask, V8 eights, V9–V10 a column's 32 weight quants, V12–V15 integer sums (and the NEON
// kernels' products), V16–V23 (V24–V31) the lanes of row 0 (1): column c's lanes 0–3 in V(16+2c),
// 4–7 in V(17+2c).

// COLUMN adds column c's block (its quants in V9–V10) into one row's lanes: activation quants in
// Vx0–Vx1, the combined scales in Vf, lanes in Vlo and Vhi.
#define COLUMN(SUMS, c, x0, x1, f, lo, hi) \
	SUMS(12, 13, 9, x0); \
	SUMS(14, 15, 10, x1); \
	SCVTF(12, 12); \
	SCVTF(14, 14); \
	FMLAE(lo, 12, f, c); \
	FMLAE(hi, 14, f, c)

// ACT loads row 0's (and ROW1 row 1's) activation block, advancing to the next, and sets f from
// the d_w in V4.
#define ACT \
	VLD1.P 32(R2), [V0.B16, V1.B16]; \
	FMOVS  64(R2), F5; \
	ADD    $96, R2; \
	FMULE(5, 4, 5, 0)
#define ACT1 \
	VLD1.P 32(R4), [V2.B16, V3.B16]; \
	FMOVS  64(R4), F6; \
	ADD    $96, R4; \
	FMULE(6, 4, 6, 0)

// Q4QUANTS turns column quants of nibbles into quants: the low nibbles (LO) or the high ones
// (HI), less 8.
#define LO \
	VAND V7.B16, V9.B16, V9.B16; \
	VAND V7.B16, V10.B16, V10.B16; \
	VSUB V8.B16, V9.B16, V9.B16; \
	VSUB V8.B16, V10.B16, V10.B16
#define HI \
	VUSHR $4, V9.B16, V9.B16; \
	VUSHR $4, V10.B16, V10.B16; \
	VSUB  V8.B16, V9.B16, V9.B16; \
	VSUB  V8.B16, V10.B16, V10.B16
#define NONE

// Column c of a block for one row (COL1) or two (COL2): its quants from R5, advancing.
#define COL1(SUMS, QUANTS, c) \
	VLD1.P 32(R5), [V9.B16, V10.B16]; \
	QUANTS; \
	COLUMN(SUMS, c, 0, 1, 5, 16+2*c, 17+2*c)
#define COL2(SUMS, QUANTS, c) \
	COL1(SUMS, QUANTS, c); \
	COLUMN(SUMS, c, 2, 3, 6, 24+2*c, 25+2*c)

// BLOCK1 and BLOCK2 add one block for one or two rows: d_w at soff(R1), the quants from R5.
#define BLOCK1(SUMS, QUANTS, soff) \
	FMOVD soff(R1), F4; \
	FCVTL(4, 4); \
	ACT; \
	COL1(SUMS, QUANTS, 0); \
	COL1(SUMS, QUANTS, 1); \
	COL1(SUMS, QUANTS, 2); \
	COL1(SUMS, QUANTS, 3)
#define BLOCK2(SUMS, QUANTS, soff) \
	FMOVD soff(R1), F4; \
	FCVTL(4, 4); \
	ACT; \
	ACT1; \
	COL2(SUMS, QUANTS, 0); \
	COL2(SUMS, QUANTS, 1); \
	COL2(SUMS, QUANTS, 2); \
	COL2(SUMS, QUANTS, 3)

// Q8 is a Q8_0 kernel: a unit is a block, the four F16 d_w, then the columns' 32 quants each.
#define Q8(SUMS, BLOCK, ROWS) \
	MOVD res+0(FP), R0; \
	MOVD w+8(FP), R1; \
	MOVD act+16(FP), R2; \
	MOVD nb+24(FP), R3; \
	ADD  R3<<7, R2, R4; \
	ZERO8(16); \
	ZERO8(24); \
loop: \
	ADD $8, R1, R5; \
	BLOCK(SUMS, NONE, 0); \
	MOVD R5, R1; \
	SUBS $1, R3; \
	BNE  loop; \
	ROWS

// Q4 is a Q4_0 kernel: a unit is a pair of blocks, their d_w (at 0 and 8), then the columns'
// 32 bytes of nibbles each, the first block's low and the second's high. An odd last block is
// alone in its unit.
#define Q4(SUMS, BLOCK, ROWS) \
	MOVD  res+0(FP), R0; \
	MOVD  w+8(FP), R1; \
	MOVD  act+16(FP), R2; \
	MOVD  nb+24(FP), R3; \
	ADD   R3<<7, R2, R4; \
	ZERO8(16); \
	ZERO8(24); \
	VMOVI $15, V7.B16; \
	VMOVI $8, V8.B16; \
	LSR   $1, R3, R3; \
	CBZ   R3, last; \
pair: \
	ADD $16, R1, R5; \
	BLOCK(SUMS, LO, 0); \
	ADD $16, R1, R5; \
	BLOCK(SUMS, HI, 8); \
	MOVD R5, R1; \
	SUBS $1, R3; \
	BNE  pair; \
last: \
	MOVD nb+24(FP), R3; \
	TBZ  $0, R3, done; \
	ADD  $16, R1, R5; \
	BLOCK(SUMS, LO, 0); \
done: \
	ROWS

#define ROW1 SUMLANES(16); RET
#define ROW2 SUMLANES(16); SUMLANES(24); RET

// func q8x1SDOT(res *[8]float32, w *byte, act *actBlock, nb int)
TEXT ·q8x1SDOT(SB), NOSPLIT, $0-32
	Q8(SUMSDOT, BLOCK1, ROW1)

// func q8x2SDOT(res *[8]float32, w *byte, act *actBlock, nb int)
TEXT ·q8x2SDOT(SB), NOSPLIT, $0-32
	Q8(SUMSDOT, BLOCK2, ROW2)

// func q4x1SDOT(res *[8]float32, w *byte, act *actBlock, nb int)
TEXT ·q4x1SDOT(SB), NOSPLIT, $0-32
	Q4(SUMSDOT, BLOCK1, ROW1)

// func q4x2SDOT(res *[8]float32, w *byte, act *actBlock, nb int)
TEXT ·q4x2SDOT(SB), NOSPLIT, $0-32
	Q4(SUMSDOT, BLOCK2, ROW2)

// func q8x1NEON(res *[8]float32, w *byte, act *actBlock, nb int)
TEXT ·q8x1NEON(SB), NOSPLIT, $0-32
	Q8(SUMSNEON, BLOCK1, ROW1)

// func q8x2NEON(res *[8]float32, w *byte, act *actBlock, nb int)
TEXT ·q8x2NEON(SB), NOSPLIT, $0-32
	Q8(SUMSNEON, BLOCK2, ROW2)

// func q4x1NEON(res *[8]float32, w *byte, act *actBlock, nb int)
TEXT ·q4x1NEON(SB), NOSPLIT, $0-32
	Q4(SUMSNEON, BLOCK1, ROW1)

// func q4x2NEON(res *[8]float32, w *byte, act *actBlock, nb int)
TEXT ·q4x2NEON(SB), NOSPLIT, $0-32
	Q4(SUMSNEON, BLOCK2, ROW2)
