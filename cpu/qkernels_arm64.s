#include "textflag.h"
#include "qneon_arm64.h"

// The NEON kernels of Q8_0 and Q4_0 weights in package quant's block order; see qkernels.go and
// qkernels_arm64.go for their contracts, qweights for the layout: per unit the eight F16 d_w,
// then 32-byte words, word k holding the eight columns' quants 4k…4k+3, column c in its 32-bit
// lane c (Q4_0: four words of GGUF's bytes, the low nibbles elements 4k…4k+3, the high ones
// 4k+16…4k+19). A row's four quants 4k…4k+3 meet word k in every lane, so that after a block's
// words each lane holds its column's exact integer sum s of the block's 32 products (plus −8·T,
// T the activations' sum, for Q4_0's nibbles n: Σ(n−8)·x = Σn·x − 8T). SCVTF converts s exactly
// (|s| < 2²⁴), and with f = float32(d_w·d_x) (FCVTL widens the F16 scales exactly, FMUL rounds the
// product as Go's float32 multiply does) FMLA adds acc = fma(f, s, acc), a chain a column. The
// *SDOT kernels take a word's products with SDOT's indexed form (FEAT_DotProd: each 32-bit lane
// gets four int8 products summed, the row's four quants taken from one lane of a register); the
// *NEON kernels, for CPUs without it, broadcast those four quants (DUP) and multiply with
// SMULL/SMULL2 (int8 products as int16, at most 128·128), SADALP adding their pairs into int32
// accumulators, and ADDP adding those pairs at the block's end: the same integers.
//
// Registers: R0 res, R1 the weight units, R2 (and R4) the activation block of row 0 (and 1), R3
// the blocks left, R6 a correction. V0–V1 (V2–V3) the activation quants of row 0 (1), V4 the F16
// scales, V5–V6 the columns' d_w (columns 0–3, 4–7), V7 the nibble mask, V8–V9 a word (Q4_0: its
// low nibbles, V10–V11 its high ones), V12–V13 (V14–V15) row 0's (1's) integer sums, V16–V17
// (V18–V19) its results, V20 (V21) its d_x, V22–V23 scratch, V24–V27 (V28–V31) the NEON kernels'
// pair accumulators of row 0 (1).

#define FCVTL2(d, n) WORD $(0x4e217800 | ((n)<<5) | (d))                // fcvtl2 vd.4s, vn.8h
#define FMLA4S(d, n, m) WORD $(0x4e20cc00 | ((m)<<16) | ((n)<<5) | (d)) // fmla vd.4s, vn.4s, vm.4s
#define ADD4S(d, n, m) WORD $(0x4ea08400 | ((m)<<16) | ((n)<<5) | (d))  // add vd.4s, vn.4s, vm.4s
#define SADALP(d, n) WORD $(0x4e606800 | ((n)<<5) | (d))                // sadalp vd.4s, vn.8h
#define DUPG(d, n) WORD $(0x4e040c00 | ((n)<<5) | (d))                  // dup vd.4s, wn
#define DUPE(d, n, i) WORD $(0x4e040400 | ((i)<<19) | ((n)<<5) | (d))   // dup vd.4s, vn.s[i]
// sdot vd.4s, vn.16b, vm.4b[i]
#define SDOTE(d, n, m, i) WORD $(0x4f80e000 | (((i)&1)<<21) | (((i)>>1)<<11) | ((m)<<16) | ((n)<<5) | (d))

// Steps: word halves Vw0 and Vw1 (columns 0–3, 4–7) against lane i of row r's quants in Vx,
// into the row's integer sums (SDSTEP) or its pair accumulators (NESTEP).
#define SDSTEP(r, w0, w1, x, i) SDOTE(12+2*(r), w0, x, i); SDOTE(13+2*(r), w1, x, i)
#define NESTEP(r, w0, w1, x, i) \
	DUPE(23, x, i); \
	SMULL(22, w0, 23); \
	SADALP(24+4*(r), 22); \
	SMULL2(22, w0, 23); \
	SADALP(25+4*(r), 22); \
	SMULL(22, w1, 23); \
	SADALP(26+4*(r), 22); \
	SMULL2(22, w1, 23); \
	SADALP(27+4*(r), 22)

// Row r's block starts (zero sums or accumulators) and ends (the sums in V12+2r, V13+2r).
#define SDSTART(r) ZERO(12+2*(r)); ZERO(13+2*(r))
#define NESTART(r) ZERO(24+4*(r)); ZERO(25+4*(r)); ZERO(26+4*(r)); ZERO(27+4*(r))
#define SDFIN(r)
#define NEFIN(r) ADDP(12+2*(r), 24+4*(r), 25+4*(r)); ADDP(13+2*(r), 26+4*(r), 27+4*(r))

// Q4_0's correction −8·T of row r's block (its pointer, already 32 bytes on, in ra), and none.
#define CORR(r, ra) \
	MOVWU 72(ra), R6; \
	DUPG(22, 6); \
	ADD4S(12+2*(r), 12+2*(r), 22); \
	ADD4S(13+2*(r), 13+2*(r), 22)
#define NOCORR(r, ra)

// FMA ends row r's block: its sums converted, times f = d_w·d_x, added into its results.
#define FMA(r) \
	SCVTF(12+2*(r), 12+2*(r)); \
	SCVTF(13+2*(r), 13+2*(r)); \
	FMULE(22, 5, 20+(r), 0); \
	FMULE(23, 6, 20+(r), 0); \
	FMLA4S(16+2*(r), 12+2*(r), 22); \
	FMLA4S(17+2*(r), 13+2*(r), 23)

// Words: Q8_0's word k, and Q4_0's split into its low nibbles (V8–V9) and high ones (V10–V11).
#define W8 VLD1.P 32(R1), [V8.B16, V9.B16]
#define W4 \
	VLD1.P 32(R1), [V8.B16, V9.B16]; \
	VUSHR  $4, V8.B16, V10.B16; \
	VUSHR  $4, V9.B16, V11.B16; \
	VAND   V7.B16, V8.B16, V8.B16; \
	VAND   V7.B16, V9.B16, V9.B16

// Word k for one row or two.
#define Q8K1(STEP, k) W8; STEP(0, 8, 9, (k)/4, (k)%4)
#define Q8K2(STEP, k) W8; STEP(0, 8, 9, (k)/4, (k)%4); STEP(1, 8, 9, 2+(k)/4, (k)%4)
#define Q4K1(STEP, k) W4; STEP(0, 8, 9, 0, k); STEP(0, 10, 11, 1, k)
#define Q4K2(STEP, k) W4; STEP(0, 8, 9, 0, k); STEP(0, 10, 11, 1, k); STEP(1, 8, 9, 2, k); STEP(1, 10, 11, 3, k)

// A block's words.
#define WORDS8(K, STEP) K(STEP, 0); K(STEP, 1); K(STEP, 2); K(STEP, 3); K(STEP, 4); K(STEP, 5); K(STEP, 6); K(STEP, 7)
#define WORDS4(K, STEP) K(STEP, 0); K(STEP, 1); K(STEP, 2); K(STEP, 3)

// One row's block, or two rows'.
#define BLOCK1(WORDS, K, STEP, START, FIN, CRR) \
	VLD1.P 32(R2), [V0.B16, V1.B16]; \
	FMOVS  64(R2), F20; \
	START(0); \
	WORDS(K, STEP); \
	FIN(0); \
	CRR(0, R2); \
	FMA(0); \
	ADD    $96, R2
#define BLOCK2(WORDS, K, STEP, START, FIN, CRR) \
	VLD1.P 32(R2), [V0.B16, V1.B16]; \
	FMOVS  64(R2), F20; \
	VLD1.P 32(R4), [V2.B16, V3.B16]; \
	FMOVS  64(R4), F21; \
	START(0); \
	START(1); \
	WORDS(K, STEP); \
	FIN(0); \
	FIN(1); \
	CRR(0, R2); \
	CRR(1, R4); \
	FMA(0); \
	FMA(1); \
	ADD    $96, R2; \
	ADD    $96, R4

#define STORE1 VST1 [V16.S4, V17.S4], (R0)
#define STORE2 VST1.P [V16.S4, V17.S4], 32(R0); VST1 [V18.S4, V19.S4], (R0)

// KERNEL is a whole kernel: per block the eight d_w widened, then BLOCK.
#define KERNEL(BLOCK, WORDS, K, STEP, START, FIN, CRR, STORE) \
	MOVD  res+0(FP), R0; \
	MOVD  w+8(FP), R1; \
	MOVD  act+16(FP), R2; \
	MOVD  nb+24(FP), R3; \
	ADD   R3<<7, R2, R4; \
	ZERO8(16); \
	VMOVI $15, V7.B16; \
loop: \
	VLD1.P 16(R1), [V4.B16]; \
	FCVTL(5, 4); \
	FCVTL2(6, 4); \
	BLOCK(WORDS, K, STEP, START, FIN, CRR); \
	SUBS  $1, R3; \
	BNE   loop; \
	STORE; \
	RET

// func q8x1SDOT(res *[16]float32, w *byte, act *actBlock, nb int)
TEXT ·q8x1SDOT(SB), NOSPLIT, $0-32
	KERNEL(BLOCK1, WORDS8, Q8K1, SDSTEP, SDSTART, SDFIN, NOCORR, STORE1)

// func q8x2SDOT(res *[16]float32, w *byte, act *actBlock, nb int)
TEXT ·q8x2SDOT(SB), NOSPLIT, $0-32
	KERNEL(BLOCK2, WORDS8, Q8K2, SDSTEP, SDSTART, SDFIN, NOCORR, STORE2)

// func q4x1SDOT(res *[16]float32, w *byte, act *actBlock, nb int)
TEXT ·q4x1SDOT(SB), NOSPLIT, $0-32
	KERNEL(BLOCK1, WORDS4, Q4K1, SDSTEP, SDSTART, SDFIN, CORR, STORE1)

// func q4x2SDOT(res *[16]float32, w *byte, act *actBlock, nb int)
TEXT ·q4x2SDOT(SB), NOSPLIT, $0-32
	KERNEL(BLOCK2, WORDS4, Q4K2, SDSTEP, SDSTART, SDFIN, CORR, STORE2)

// func q8x1NEON(res *[16]float32, w *byte, act *actBlock, nb int)
TEXT ·q8x1NEON(SB), NOSPLIT, $0-32
	KERNEL(BLOCK1, WORDS8, Q8K1, NESTEP, NESTART, NEFIN, NOCORR, STORE1)

// func q8x2NEON(res *[16]float32, w *byte, act *actBlock, nb int)
TEXT ·q8x2NEON(SB), NOSPLIT, $0-32
	KERNEL(BLOCK2, WORDS8, Q8K2, NESTEP, NESTART, NEFIN, NOCORR, STORE2)

// func q4x1NEON(res *[16]float32, w *byte, act *actBlock, nb int)
TEXT ·q4x1NEON(SB), NOSPLIT, $0-32
	KERNEL(BLOCK1, WORDS4, Q4K1, NESTEP, NESTART, NEFIN, CORR, STORE1)

// func q4x2NEON(res *[16]float32, w *byte, act *actBlock, nb int)
TEXT ·q4x2NEON(SB), NOSPLIT, $0-32
	KERNEL(BLOCK2, WORDS4, Q4K2, NESTEP, NESTART, NEFIN, CORR, STORE2)
