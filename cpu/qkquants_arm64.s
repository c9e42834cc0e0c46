#include "textflag.h"
#include "qneon_arm64.h"

// The NEON kernels of Q4_K and Q6_K weights, one activation row; see qkquants.go for the layout
// and qkquants_arm64.go for the contract. Per block and lane, quant.DotQ4_K's and DotQ6_K's order:
// with s the lane's exact integer sum of quant × activation quant (SDOT, or the widening
// multiplies of qkernels_arm64.s), Q4_K's lane = fma(float32(d·d_x), sc·s, lane) then
// lane = fma(float32(dmin·d_x), m·(m8/8), lane), with its sub-block's scale sc and min m;
// Q6_K's lane = fma(float32(d·d_x), sc·s, lane), lanes 0–3 taking the block's first scale and 4–7
// its second. The integer products (MUL by element) are below 2²⁴ and convert exactly.
//
// Registers: R0 res, R1 the super-block's unit, R2 the activation block, R3 the super-blocks
// left, R5 and R6 a column's quants. V0–V1 the activation quants, V4 the four columns' d (and V6
// Q4_K's dmin), V5 d_x, V29 d·d_x (and V30 dmin·d_x), V2–V3 the integer scales (Q4_K: V2 its
// scales, V3 its mins), V7 the nibble mask, V9–V10 a column's quants, V12–V15 integer sums,
// V16–V23 the lanes (column c's 0–3 in V(16+2c), 4–7 in V(17+2c)), V24–V25 m8/8 (Q4_K) or the
// top 2 bits of the quants (Q6_K), V27 threes, V28 32s.

#define NONE

// ACTK loads the activation block, advancing to the next, and sets V29 (and V30) from V4 (and V6).
#define ACTK \
	VLD1.P 32(R2), [V0.B16, V1.B16]; \
	FMOVS  64(R2), F5; \
	FMULE(29, 4, 5, 0)
#define MINS4K \
	VLD1   (R2), [V24.S4, V25.S4]; \
	SSHR3(24, 24); \
	SSHR3(25, 25); \
	FMULE(30, 6, 5, 0)

// Q4KCOL adds column c of block j: its nibbles from R5 (advancing), LO or HI.
#define NIBLO VAND V7.B16, V9.B16, V9.B16; VAND V7.B16, V10.B16, V10.B16
#define NIBHI VUSHR $4, V9.B16, V9.B16; VUSHR $4, V10.B16, V10.B16
#define Q4KCOL(SUMS, NIB, c) \
	VLD1.P 32(R5), [V9.B16, V10.B16]; \
	NIB; \
	SUMS(12, 13, 9, 0); \
	SUMS(14, 15, 10, 1); \
	MULE(12, 12, 2, c); \
	MULE(14, 14, 2, c); \
	SCVTF(12, 12); \
	SCVTF(14, 14); \
	FMLAE(16+2*c, 12, 29, c); \
	FMLAE(17+2*c, 14, 29, c); \
	MULE(13, 24, 3, c); \
	MULE(15, 25, 3, c); \
	SCVTF(13, 13); \
	SCVTF(15, 15); \
	FMLAE(16+2*c, 13, 30, c); \
	FMLAE(17+2*c, 15, 30, c)

// Q4KBLOCK adds block j of the super-block at R1.
#define Q4KBLOCK(SUMS, j, NIB) \
	ACTK; \
	MINS4K; \
	ADD   $96, R2; \
	FMOVS (16+4*j)(R1), F2; \
	UXTL8(2, 2); \
	UXTL16(2, 2); \
	FMOVS (48+4*j)(R1), F3; \
	UXTL8(3, 3); \
	UXTL16(3, 3); \
	ADD   $(80+128*(j/2)), R1, R5; \
	Q4KCOL(SUMS, NIB, 0); \
	Q4KCOL(SUMS, NIB, 1); \
	Q4KCOL(SUMS, NIB, 2); \
	Q4KCOL(SUMS, NIB, 3)

#define Q4K(SUMS) \
	MOVD  res+0(FP), R0; \
	MOVD  w+8(FP), R1; \
	MOVD  act+16(FP), R2; \
	MOVD  nsb+24(FP), R3; \
	ZERO8(16); \
	VMOVI $15, V7.B16; \
loop: \
	FMOVD (R1), F4; \
	FCVTL(4, 4); \
	FMOVD 8(R1), F6; \
	FCVTL(6, 6); \
	Q4KBLOCK(SUMS, 0, NIBLO); \
	Q4KBLOCK(SUMS, 1, NIBHI); \
	Q4KBLOCK(SUMS, 2, NIBLO); \
	Q4KBLOCK(SUMS, 3, NIBHI); \
	Q4KBLOCK(SUMS, 4, NIBLO); \
	Q4KBLOCK(SUMS, 5, NIBHI); \
	Q4KBLOCK(SUMS, 6, NIBLO); \
	Q4KBLOCK(SUMS, 7, NIBHI); \
	ADD   $592, R1; \
	SUBS  $1, R3; \
	BNE   loop; \
	SUMLANES(16); \
	RET

// Q6KCOL adds column c of block j (i = j%4 within its half): the low 4 bits from ql at R5 + 96c
// (NIB), the top 2 from qh at R6 + 96c shifted right by 2i (QH), the scales in Vs at 2·(c%2).
#define QH0
#define QH2 VUSHR $2, V24.B16, V24.B16; VUSHR $2, V25.B16, V25.B16
#define QH4 VUSHR $4, V24.B16, V24.B16; VUSHR $4, V25.B16, V25.B16
#define QH6 VUSHR $6, V24.B16, V24.B16; VUSHR $6, V25.B16, V25.B16
#define Q6KCOL(SUMS, NIB, QH, c, s) \
	ADD  $(96*c), R5, R12; \
	VLD1 (R12), [V9.B16, V10.B16]; \
	ADD  $(96*c), R6, R12; \
	VLD1 (R12), [V24.B16, V25.B16]; \
	NIB; \
	QH; \
	VAND V27.B16, V24.B16, V24.B16; \
	VAND V27.B16, V25.B16, V25.B16; \
	VSHL $4, V24.B16, V24.B16; \
	VSHL $4, V25.B16, V25.B16; \
	VORR V24.B16, V9.B16, V9.B16; \
	VORR V25.B16, V10.B16, V10.B16; \
	VSUB V28.B16, V9.B16, V9.B16; \
	VSUB V28.B16, V10.B16, V10.B16; \
	SUMS(12, 13, 9, 0); \
	SUMS(14, 15, 10, 1); \
	MULE(12, 12, s, 2*(c%2)); \
	MULE(14, 14, s, 2*(c%2)+1); \
	SCVTF(12, 12); \
	SCVTF(14, 14); \
	FMLAE(16+2*c, 12, 29, c); \
	FMLAE(17+2*c, 14, 29, c)

// Q6KBLOCK adds block j of the super-block at R1: half j/4, i = j%4.
#define Q6KBLOCK(SUMS, j, NIB, QH) \
	ACTK; \
	ADD   $96, R2; \
	FMOVD (8+8*j)(R1), F2; \
	SXTL8(2, 2); \
	SXTL16HI(3, 2); \
	SXTL16(2, 2); \
	ADD   $(72+384*(j/4)+32*(j%2)), R1, R5; \
	ADD   $(72+384*(j/4)+64), R1, R6; \
	Q6KCOL(SUMS, NIB, QH, 0, 2); \
	Q6KCOL(SUMS, NIB, QH, 1, 2); \
	Q6KCOL(SUMS, NIB, QH, 2, 3); \
	Q6KCOL(SUMS, NIB, QH, 3, 3)

#define Q6K(SUMS) \
	MOVD  res+0(FP), R0; \
	MOVD  w+8(FP), R1; \
	MOVD  act+16(FP), R2; \
	MOVD  nsb+24(FP), R3; \
	ZERO8(16); \
	VMOVI $15, V7.B16; \
	VMOVI $3, V27.B16; \
	VMOVI $32, V28.B16; \
loop: \
	FMOVD (R1), F4; \
	FCVTL(4, 4); \
	Q6KBLOCK(SUMS, 0, NIBLO, QH0); \
	Q6KBLOCK(SUMS, 1, NIBLO, QH2); \
	Q6KBLOCK(SUMS, 2, NIBHI, QH4); \
	Q6KBLOCK(SUMS, 3, NIBHI, QH6); \
	Q6KBLOCK(SUMS, 4, NIBLO, QH0); \
	Q6KBLOCK(SUMS, 5, NIBLO, QH2); \
	Q6KBLOCK(SUMS, 6, NIBHI, QH4); \
	Q6KBLOCK(SUMS, 7, NIBHI, QH6); \
	ADD   $840, R1; \
	SUBS  $1, R3; \
	BNE   loop; \
	SUMLANES(16); \
	RET

// func q4kx1SDOT(res *[8]float32, w *byte, act *actBlock, nsb int)
TEXT ·q4kx1SDOT(SB), NOSPLIT, $0-32
	Q4K(SUMSDOT)

// func q4kx1NEON(res *[8]float32, w *byte, act *actBlock, nsb int)
TEXT ·q4kx1NEON(SB), NOSPLIT, $0-32
	Q4K(SUMSNEON)

// func q6kx1SDOT(res *[8]float32, w *byte, act *actBlock, nsb int)
TEXT ·q6kx1SDOT(SB), NOSPLIT, $0-32
	Q6K(SUMSDOT)

// func q6kx1NEON(res *[8]float32, w *byte, act *actBlock, nsb int)
TEXT ·q6kx1NEON(SB), NOSPLIT, $0-32
	Q6K(SUMSNEON)
