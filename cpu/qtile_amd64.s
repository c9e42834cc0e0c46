#include "textflag.h"
#include "hsum_amd64.h"

// Kernels of four activation rows against groups of four Q8_0 or Q4_0 weight rows, one group after
// the other, with AVX-512 VNNI on YMM registers (qkernels_amd64.go states the contract). They are the two-row VNNI
// kernels of qkernels_amd64.s widened to four rows: each column's weights are loaded once and used
// by four rows, which halves the weight loads per product that bound the two-row kernels on
// prompts. Every (row, column) pair accumulates its eight lanes block by block exactly as the
// one- and two-row kernels do and reduces them with the same HSUM4, so a row's bits do not depend
// on which kernel ran it.
//
// The combined scales d_w·d_x of a block (sixteen: four rows by four columns) are computed four
// blocks ahead into a ring of eight 64-byte slots on the stack, whence each multiply-add
// broadcasts its own. Computed in the block that uses them, as the one- and two-row kernels do,
// the broadcasts read stores still in flight, which a store cannot forward to a narrower load at
// an offset on this machine (AMD Zen 4): every block then waited for its own stores to retire, and
// the kernel took 233 ns a 1024-wide group against 180 ns with the ring (Q8_0, best of 60,000
// calls, one thread).
//
// Registers: DI the weight unit, SI, BX, R10, R11 the activation blocks of rows 0–3, CX the blocks
// left, DX the blocks left whose scales are still to compute, R12 the ring slot being written, R13
// the slot being read, R9 the group's four results of row 0 (R14 bytes on to each next row), AX
// the groups left, R8 a scratch. Accumulators: row 0 in Y0–Y3, row 1 in Y4–Y7, row 2 in Y24–Y27,
// row 3 in Y28–Y31 (columns 0–3). Y16–Y19 the rows' quants, Y20–Y23 their corrections, Y10 a
// column's unsigned weights, Y8, Y9, Y12, Y13 one product each row, X14 the four weight scales,
// Y11 the nibble mask (Q4_0), Y15 the sign bits (Q8_0); the other of X11 and X15 a scale being
// computed. The combined scales of row r and column c are at 16r+4c in a slot.

DATA tsign80<>+0(SB)/8, $0x8080808080808080
DATA tsign80<>+8(SB)/8, $0x8080808080808080
DATA tsign80<>+16(SB)/8, $0x8080808080808080
DATA tsign80<>+24(SB)/8, $0x8080808080808080
GLOBL tsign80<>(SB), RODATA|NOPTR, $32

DATA tmask0f<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA tmask0f<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA tmask0f<>+16(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA tmask0f<>+24(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL tmask0f<>(SB), RODATA|NOPTR, $32

// ringAhead is how many blocks ahead the scales are computed, ringMask the ring's bytes less one.
#define ringAhead 4
#define ringMask 511

// TSCALES computes the sixteen combined scales of one block into a slot: from the four F16
// weight scales at ws and the activation scales at a0 … a3, row r's four to sr; tmp is a scratch
// X register.
#define TSCALES(ws, a0, a1, a2, a3, s0, s1, s2, s3, tmp) \
	VCVTPH2PS    ws, X14; \
	VBROADCASTSS a0, tmp; \
	VMULPS       tmp, X14, tmp; \
	VMOVUPS      tmp, s0; \
	VBROADCASTSS a1, tmp; \
	VMULPS       tmp, X14, tmp; \
	VMOVUPS      tmp, s1; \
	VBROADCASTSS a2, tmp; \
	VMULPS       tmp, X14, tmp; \
	VMOVUPS      tmp, s2; \
	VBROADCASTSS a3, tmp; \
	VMULPS       tmp, X14, tmp; \
	VMOVUPS      tmp, s3

// TAHEAD computes the scales of the block ringAhead blocks on, if the matrix has it (DX counts
// the blocks from the current one to the end), from its weight scales at ws, into slot R12, and
// moves both slots on.
#define TAHEAD(ws, tmp, label) \
	CMPQ    DX, $ringAhead; \
	JLE     label; \
	TSCALES(ws, (ringAhead*128+96)(SI), (ringAhead*128+96)(BX), (ringAhead*128+96)(R10), (ringAhead*128+96)(R11), (SP)(R12*1), 16(SP)(R12*1), 32(SP)(R12*1), 48(SP)(R12*1), tmp); \
label: \
	DECQ    DX; \
	ADDQ    $64, R12; \
	ANDQ    $ringMask, R12; \
	ADDQ    $64, R13; \
	ANDQ    $ringMask, R13

// TFIRST computes the scales of block j (< ringAhead), whose weight scales are at ws, into slot
// j, if the matrix has it; done is where to go once it has none.
#define TFIRST(j, ws, tmp, done) \
	CMPQ    CX, $j; \
	JLE     done; \
	TSCALES(ws, (j*128+96)(SI), (j*128+96)(BX), (j*128+96)(R10), (j*128+96)(R11), (j*64)(SP), (j*64+16)(SP), (j*64+32)(SP), (j*64+48)(SP), tmp)

// TLOAD loads the four rows' quants and their corrections (at coff in each block).
#define TLOAD(coff) \
	VMOVDQU32 (SI), Y16; \
	VMOVDQU32 (BX), Y17; \
	VMOVDQU32 (R10), Y18; \
	VMOVDQU32 (R11), Y19; \
	VMOVDQU32 coff(SI), Y20; \
	VMOVDQU32 coff(BX), Y21; \
	VMOVDQU32 coff(R10), Y22; \
	VMOVDQU32 coff(R11), Y23

// TROW: one row's quants x against the unsigned weights in Y10, from its correction corr, in tmp,
// into acc with the combined scale at soff in slot R13.
#define TROW(x, corr, tmp, soff, acc) \
	VMOVDQA32        corr, tmp; \
	VPDPBUSD         x, Y10, tmp; \
	VCVTDQ2PS        tmp, tmp; \
	VFMADD231PS.BCST soff(SP)(R13*1), tmp, acc

// TCOL: a column's weights, already in Y10, against the four rows, whose combined scales for
// that column are at o0 … o3 (SP).
#define TCOL(o0, o1, o2, o3, a0, a1, a2, a3) \
	TROW(Y16, Y20, Y8, o0, a0); \
	TROW(Y17, Y21, Y9, o1, a1); \
	TROW(Y18, Y22, Y12, o2, a2); \
	TROW(Y19, Y23, Y13, o3, a3)

// TSTART sets up one group: the activation rows from act, the blocks from nb, the accumulators
// zeroed, the ring at its start.
#define TSTART \
	MOVQ    act+24(FP), SI; \
	MOVQ    nb+32(FP), CX; \
	MOVQ    CX, R8; \
	SHLQ    $7, R8; \
	LEAQ    (SI)(R8*1), BX; \
	LEAQ    (BX)(R8*1), R10; \
	LEAQ    (R10)(R8*1), R11; \
	VPXORD  Y0, Y0, Y0; \
	VPXORD  Y1, Y1, Y1; \
	VPXORD  Y2, Y2, Y2; \
	VPXORD  Y3, Y3, Y3; \
	VPXORD  Y4, Y4, Y4; \
	VPXORD  Y5, Y5, Y5; \
	VPXORD  Y6, Y6, Y6; \
	VPXORD  Y7, Y7, Y7; \
	VPXORD  Y24, Y24, Y24; \
	VPXORD  Y25, Y25, Y25; \
	VPXORD  Y26, Y26, Y26; \
	VPXORD  Y27, Y27, Y27; \
	VPXORD  Y28, Y28, Y28; \
	VPXORD  Y29, Y29, Y29; \
	VPXORD  Y30, Y30, Y30; \
	VPXORD  Y31, Y31, Y31; \
	MOVQ    CX, DX; \
	MOVQ    $(ringAhead*64), R12; \
	XORQ    R13, R13

#define TARGS \
	MOVQ    dst+0(FP), R9; \
	MOVQ    stride+8(FP), R14; \
	MOVQ    w+16(FP), DI; \
	MOVQ    ng+40(FP), AX

#define TNEXT \
	ADDQ $128, SI; \
	ADDQ $128, BX; \
	ADDQ $128, R10; \
	ADDQ $128, R11

// TSTORE reduces the sixteen accumulators with HSUM4 and writes row r's four at R9 + r·R14.
#define TSTORE \
	HSUM4(Y0, Y1, Y2, Y3, X0, X2); \
	HSUM4(Y4, Y5, Y6, Y7, X4, X6); \
	VMOVDQA32 Y24, Y8; \
	VMOVDQA32 Y25, Y9; \
	VMOVDQA32 Y26, Y10; \
	VMOVDQA32 Y27, Y11; \
	HSUM4(Y8, Y9, Y10, Y11, X8, X10); \
	VMOVDQA32 Y28, Y12; \
	VMOVDQA32 Y29, Y13; \
	VMOVDQA32 Y30, Y14; \
	VMOVDQA32 Y31, Y15; \
	HSUM4(Y12, Y13, Y14, Y15, X12, X14); \
	VMOVUPS X0, (R9); \
	VMOVUPS X4, (R9)(R14*1); \
	LEAQ    (R9)(R14*2), R8; \
	VMOVUPS X8, (R8); \
	VMOVUPS X12, (R8)(R14*1)

// func q8x4VNNI(dst *float32, stride int, w *byte, act *actBlock, nb, ng int)
TEXT ·q8x4VNNI(SB), NOSPLIT, $512-48
	TARGS

q8x4vgroup:
	TSTART
	TFIRST(0, (DI), X11, q8x4vfirst)
	TFIRST(1, 136(DI), X11, q8x4vfirst)
	TFIRST(2, 272(DI), X11, q8x4vfirst)
	TFIRST(3, 408(DI), X11, q8x4vfirst)

q8x4vfirst:
	VMOVDQU tsign80<>(SB), Y15

q8x4v:
	TLOAD(64)
	VPXOR     8(DI), Y15, Y10
	TCOL(0, 16, 32, 48, Y0, Y4, Y24, Y28)
	VPXOR     40(DI), Y15, Y10
	TCOL(4, 20, 36, 52, Y1, Y5, Y25, Y29)
	VPXOR     72(DI), Y15, Y10
	TCOL(8, 24, 40, 56, Y2, Y6, Y26, Y30)
	VPXOR     104(DI), Y15, Y10
	TCOL(12, 28, 44, 60, Y3, Y7, Y27, Y31)
	TAHEAD((ringAhead*136)(DI), X11, q8x4vnext)
	ADDQ      $136, DI
	TNEXT
	DECQ      CX
	JNZ       q8x4v

	TSTORE
	ADDQ      $16, R9
	DECQ      AX
	JNZ       q8x4vgroup
	VZEROUPPER
	RET

// T4LO and T4HI: column c's nibbles of a unit's first or second block, as 32 unsigned bytes in
// element order, into Y10 (Y11 holds the mask).
#define T4LO(woff) \
	VPAND woff(DI), Y11, Y10
#define T4HI(woff) \
	VMOVDQU woff(DI), Y10; \
	VPSRLW  $4, Y10, Y10; \
	VPAND   Y11, Y10, Y10

#define T4BLOCKLO \
	TLOAD(32); \
	T4LO(16); \
	TCOL(0, 16, 32, 48, Y0, Y4, Y24, Y28); \
	T4LO(48); \
	TCOL(4, 20, 36, 52, Y1, Y5, Y25, Y29); \
	T4LO(80); \
	TCOL(8, 24, 40, 56, Y2, Y6, Y26, Y30); \
	T4LO(112); \
	TCOL(12, 28, 44, 60, Y3, Y7, Y27, Y31)
#define T4BLOCKHI \
	TLOAD(32); \
	T4HI(16); \
	TCOL(0, 16, 32, 48, Y0, Y4, Y24, Y28); \
	T4HI(48); \
	TCOL(4, 20, 36, 52, Y1, Y5, Y25, Y29); \
	T4HI(80); \
	TCOL(8, 24, 40, 56, Y2, Y6, Y26, Y30); \
	T4HI(112); \
	TCOL(12, 28, 44, 60, Y3, Y7, Y27, Y31)

// func q4x4VNNI(dst *float32, stride int, w *byte, act *actBlock, nb, ng int)
TEXT ·q4x4VNNI(SB), NOSPLIT, $512-48
	TARGS

q4x4vgroup:
	TSTART
	TFIRST(0, (DI), X15, q4x4vfirst)
	TFIRST(1, 8(DI), X15, q4x4vfirst)
	TFIRST(2, 144(DI), X15, q4x4vfirst)
	TFIRST(3, 152(DI), X15, q4x4vfirst)

q4x4vfirst:
	VMOVDQU tmask0f<>(SB), Y11
	SUBQ    $2, CX
	JB      q4x4vtail

q4x4v:
	T4BLOCKLO
	TAHEAD(288(DI), X15, q4x4vlo)
	TNEXT
	T4BLOCKHI
	TAHEAD(296(DI), X15, q4x4vhi)
	TNEXT
	ADDQ    $144, DI
	SUBQ    $2, CX
	JAE     q4x4v

q4x4vtail:
	CMPQ    CX, $-1 // one block left
	JNE     q4x4vdone
	T4BLOCKLO
	ADDQ    $144, DI // the next group's units

q4x4vdone:
	TSTORE
	ADDQ    $16, R9
	DECQ    AX
	JNZ     q4x4vgroup
	VZEROUPPER
	RET
