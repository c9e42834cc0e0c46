#include "textflag.h"
#include "hsum_amd64.h"

// Kernels for Q8_0 and Q4_0 weights; see qkernels.go and qkernels_amd64.go for their contracts.
// Each takes one or two rows of quantized activations (actBlock, 128 bytes a block: quants at 0,
// −8·t at 32, −128·t at 64, the scale at 96) against a group of four weight rows (qweights: per
// unit the four F16 scales, then the four rows' quants), and accumulates, for each row and column,
// eight lanes: lane k gets fma(d_w·d_x, s_k, lane) per block, s_k the exact integer sum of the
// products of elements 4k … 4k+3. Only the way to s_k differs between the kernels:
//
//   AVX2, Q8_0: VPMADDUBSW takes an unsigned and a signed operand, so it gets |w| and x with w's
//   sign (VPSIGNB), which leaves each product as it was; it sums pairs to int16 (at most 2·128·127,
//   no saturation: activations never hold −128), VPMADDWD by ones sums pairs of those to int32.
//   AVX2, Q4_0: the nibbles n are unsigned already: VPMADDUBSW(n, x), VPMADDWD, and −8·t added
//   gives Σ(n−8)·x.
//   VNNI: VPDPBUSD sums four u8·s8 products into an int32 lane that starts at the correction:
//   w+128 (w XOR 0x80) with −128·t for Q8_0, n with −8·t for Q4_0.
//
// The combined scales d_w·d_x of a block are computed four at a time (VCVTPH2PS of the four F16
// weight scales, times the activation's scale) and kept on the stack, whence each lane's
// multiply-add broadcasts its own. Lanes reduce with HSUM4, as the F32 kernels do.

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

// Registers: DI the weight unit, SI (and BX) the activation block of row 0 (and 1), CX the blocks
// left, R9 res. Y0–Y3 (and Y4–Y7) the lanes of row 0 (and 1) against columns 0–3, Y8 (and Y9) the
// activation quants where a kernel keeps them, Y10 and Y11 a column's weights, Y12 a lane vector,
// Y13 a broadcast scale, Y14 the four weight scales, Y15 a constant.

// SCALES computes a block's four combined scales for the activation row at ra into soff(SP).
#define SCALES(ra, soff) \
	VBROADCASTSS 96(ra), X13; \
	VMULPS       X13, X14, X13; \
	VMOVUPS      X13, soff(SP)

// LANES adds the int32 lane sums in Y12, converted, times the scale at soff(SP), into acc.
#define LANES(soff, acc) \
	VCVTDQ2PS    Y12, Y12; \
	VBROADCASTSS soff(SP), Y13; \
	VFMADD231PS  Y13, Y12, acc

// Q8 (AVX2): column c's weights into Y10 and |w| into Y11, then one activation row (quants in x)
// into Y12.
#define Q8W(woff) \
	VMOVDQU woff(DI), Y10; \
	VPSIGNB Y10, Y10, Y11
#define Q8ROW(x) \
	VPSIGNB    Y10, x, Y12; \
	VPMADDUBSW Y12, Y11, Y12; \
	VPMADDWD   Y15, Y12, Y12

// Q4LO and Q4HI (AVX2 and VNNI): column c's nibbles of a unit's first or second block, as 32
// unsigned bytes in element order, into Y10; Y11 holds the 0x0f mask.
#define Q4LO(woff) \
	VPAND woff(DI), Y11, Y10
#define Q4HI(woff) \
	VMOVDQU woff(DI), Y10; \
	VPSRLW  $4, Y10, Y10; \
	VPAND   Y11, Y10, Y10
#define Q4ROW(x, ra) \
	VPMADDUBSW x, Y10, Y12; \
	VPMADDWD   Y15, Y12, Y12; \
	VPADDD     32(ra), Y12, Y12

#define ZERO4(a, b, c, d) \
	VXORPS a, a, a; \
	VXORPS b, b, b; \
	VXORPS c, c, c; \
	VXORPS d, d, d

#define ARGS \
	MOVQ res+0(FP), R9; \
	MOVQ w+8(FP), DI; \
	MOVQ act+16(FP), SI; \
	MOVQ nb+24(FP), CX

// ROW1 points BX at the second row: nb blocks of 128 bytes after the first.
#define ROW1 \
	MOVQ CX, BX; \
	SHLQ $7, BX; \
	ADDQ SI, BX

// func q8x1AVX2(res *[8]float32, w *byte, act *actBlock, nb int)
TEXT ·q8x1AVX2(SB), NOSPLIT, $16-32
	ARGS
	ZERO4(Y0, Y1, Y2, Y3)
	VMOVDQU ones16<>(SB), Y15

q8x1a:
	VCVTPH2PS (DI), X14
	SCALES(SI, 0)
	VMOVDQU   (SI), Y8
	Q8W(8)
	Q8ROW(Y8)
	LANES(0, Y0)
	Q8W(40)
	Q8ROW(Y8)
	LANES(4, Y1)
	Q8W(72)
	Q8ROW(Y8)
	LANES(8, Y2)
	Q8W(104)
	Q8ROW(Y8)
	LANES(12, Y3)
	ADDQ      $136, DI
	ADDQ      $128, SI
	DECQ      CX
	JNZ       q8x1a

	HSUM4(Y0, Y1, Y2, Y3, X0, X2)
	VMOVUPS X0, (R9)
	VZEROUPPER
	RET

// func q8x2AVX2(res *[8]float32, w *byte, act *actBlock, nb int)
TEXT ·q8x2AVX2(SB), NOSPLIT, $32-32
	ARGS
	ROW1
	ZERO4(Y0, Y1, Y2, Y3)
	ZERO4(Y4, Y5, Y6, Y7)
	VMOVDQU ones16<>(SB), Y15

q8x2a:
	VCVTPH2PS (DI), X14
	SCALES(SI, 0)
	SCALES(BX, 16)
	VMOVDQU   (SI), Y8
	VMOVDQU   (BX), Y9
	Q8W(8)
	Q8ROW(Y8)
	LANES(0, Y0)
	Q8ROW(Y9)
	LANES(16, Y4)
	Q8W(40)
	Q8ROW(Y8)
	LANES(4, Y1)
	Q8ROW(Y9)
	LANES(20, Y5)
	Q8W(72)
	Q8ROW(Y8)
	LANES(8, Y2)
	Q8ROW(Y9)
	LANES(24, Y6)
	Q8W(104)
	Q8ROW(Y8)
	LANES(12, Y3)
	Q8ROW(Y9)
	LANES(28, Y7)
	ADDQ      $136, DI
	ADDQ      $128, SI
	ADDQ      $128, BX
	DECQ      CX
	JNZ       q8x2a

	HSUM4(Y0, Y1, Y2, Y3, X0, X2)
	HSUM4(Y4, Y5, Y6, Y7, X4, X6)
	VMOVUPS X0, (R9)
	VMOVUPS X4, 16(R9)
	VZEROUPPER
	RET

// The Q4_0 kernels go through a unit's two blocks (see qweights) and then, for an odd number
// of blocks, the first block of a last unit.

#define Q4A1LO \
	VCVTPH2PS (DI), X14; \
	SCALES(SI, 0); \
	VMOVDQU (SI), Y8; \
	Q4LO(16); \
	Q4ROW(Y8, SI); \
	LANES(0, Y0); \
	Q4LO(48); \
	Q4ROW(Y8, SI); \
	LANES(4, Y1); \
	Q4LO(80); \
	Q4ROW(Y8, SI); \
	LANES(8, Y2); \
	Q4LO(112); \
	Q4ROW(Y8, SI); \
	LANES(12, Y3)
#define Q4A1HI \
	VCVTPH2PS 8(DI), X14; \
	SCALES(SI, 0); \
	VMOVDQU (SI), Y8; \
	Q4HI(16); \
	Q4ROW(Y8, SI); \
	LANES(0, Y0); \
	Q4HI(48); \
	Q4ROW(Y8, SI); \
	LANES(4, Y1); \
	Q4HI(80); \
	Q4ROW(Y8, SI); \
	LANES(8, Y2); \
	Q4HI(112); \
	Q4ROW(Y8, SI); \
	LANES(12, Y3)

// func q4x1AVX2(res *[8]float32, w *byte, act *actBlock, nb int)
TEXT ·q4x1AVX2(SB), NOSPLIT, $16-32
	ARGS
	ZERO4(Y0, Y1, Y2, Y3)
	VMOVDQU ones16<>(SB), Y15
	VMOVDQU mask0f<>(SB), Y11
	SUBQ    $2, CX
	JB      q4x1atail

q4x1a:
	Q4A1LO
	ADDQ    $128, SI
	Q4A1HI
	ADDQ    $128, SI
	ADDQ    $144, DI
	SUBQ    $2, CX
	JAE     q4x1a

q4x1atail:
	CMPQ    CX, $-1 // one block left
	JNE     q4x1adone
	Q4A1LO

q4x1adone:
	HSUM4(Y0, Y1, Y2, Y3, X0, X2)
	VMOVUPS X0, (R9)
	VZEROUPPER
	RET

#define Q4A2LO \
	VCVTPH2PS (DI), X14; \
	SCALES(SI, 0); \
	SCALES(BX, 16); \
	VMOVDQU (SI), Y8; \
	VMOVDQU (BX), Y9; \
	Q4LO(16); \
	Q4ROW(Y8, SI); \
	LANES(0, Y0); \
	Q4ROW(Y9, BX); \
	LANES(16, Y4); \
	Q4LO(48); \
	Q4ROW(Y8, SI); \
	LANES(4, Y1); \
	Q4ROW(Y9, BX); \
	LANES(20, Y5); \
	Q4LO(80); \
	Q4ROW(Y8, SI); \
	LANES(8, Y2); \
	Q4ROW(Y9, BX); \
	LANES(24, Y6); \
	Q4LO(112); \
	Q4ROW(Y8, SI); \
	LANES(12, Y3); \
	Q4ROW(Y9, BX); \
	LANES(28, Y7)
#define Q4A2HI \
	VCVTPH2PS 8(DI), X14; \
	SCALES(SI, 0); \
	SCALES(BX, 16); \
	VMOVDQU (SI), Y8; \
	VMOVDQU (BX), Y9; \
	Q4HI(16); \
	Q4ROW(Y8, SI); \
	LANES(0, Y0); \
	Q4ROW(Y9, BX); \
	LANES(16, Y4); \
	Q4HI(48); \
	Q4ROW(Y8, SI); \
	LANES(4, Y1); \
	Q4ROW(Y9, BX); \
	LANES(20, Y5); \
	Q4HI(80); \
	Q4ROW(Y8, SI); \
	LANES(8, Y2); \
	Q4ROW(Y9, BX); \
	LANES(24, Y6); \
	Q4HI(112); \
	Q4ROW(Y8, SI); \
	LANES(12, Y3); \
	Q4ROW(Y9, BX); \
	LANES(28, Y7)

// func q4x2AVX2(res *[8]float32, w *byte, act *actBlock, nb int)
TEXT ·q4x2AVX2(SB), NOSPLIT, $32-32
	ARGS
	ROW1
	ZERO4(Y0, Y1, Y2, Y3)
	ZERO4(Y4, Y5, Y6, Y7)
	VMOVDQU ones16<>(SB), Y15
	VMOVDQU mask0f<>(SB), Y11
	SUBQ    $2, CX
	JB      q4x2atail

q4x2a:
	Q4A2LO
	ADDQ    $128, SI
	ADDQ    $128, BX
	Q4A2HI
	ADDQ    $128, SI
	ADDQ    $128, BX
	ADDQ    $144, DI
	SUBQ    $2, CX
	JAE     q4x2a

q4x2atail:
	CMPQ    CX, $-1 // one block left
	JNE     q4x2adone
	Q4A2LO

q4x2adone:
	HSUM4(Y0, Y1, Y2, Y3, X0, X2)
	HSUM4(Y4, Y5, Y6, Y7, X4, X6)
	VMOVUPS X0, (R9)
	VMOVUPS X4, 16(R9)
	VZEROUPPER
	RET

// The VNNI kernels keep a row's quants and its correction in registers that only EVEX reaches
// (Y16–Y19), so that each column costs its weights' load and the scale's broadcast, folded into
// the multiply-add, and nothing else from memory: reloading them made these kernels slower than
// the AVX2 ones on a Zen 4, whose loads ran out before its arithmetic.

// Q8V: column c's weights plus 128 (XOR 0x80), unsigned, into Y10.
#define Q8V(woff) \
	VPXOR woff(DI), Y15, Y10

// VROW: the activation quants in x against the unsigned bytes in Y10, from the correction in
// corr, into acc with the combined scale at soff(SP).
#define VROW(x, corr, soff, acc) \
	VMOVDQA32        corr, Y12; \
	VPDPBUSD         x, Y10, Y12; \
	VCVTDQ2PS        Y12, Y12; \
	VFMADD231PS.BCST soff(SP), Y12, acc

// VLOAD loads the quants of the row at ra into x and its correction at ra+coff into corr.
#define VLOAD(ra, coff, x, corr) \
	VMOVDQU32 (ra), x; \
	VMOVDQU32 coff(ra), corr

// func q8x1VNNI(res *[8]float32, w *byte, act *actBlock, nb int)
TEXT ·q8x1VNNI(SB), NOSPLIT, $16-32
	ARGS
	ZERO4(Y0, Y1, Y2, Y3)
	VMOVDQU sign80<>(SB), Y15

q8x1v:
	VCVTPH2PS (DI), X14
	SCALES(SI, 0)
	VLOAD(SI, 64, Y16, Y18)
	Q8V(8)
	VROW(Y16, Y18, 0, Y0)
	Q8V(40)
	VROW(Y16, Y18, 4, Y1)
	Q8V(72)
	VROW(Y16, Y18, 8, Y2)
	Q8V(104)
	VROW(Y16, Y18, 12, Y3)
	ADDQ      $136, DI
	ADDQ      $128, SI
	DECQ      CX
	JNZ       q8x1v

	HSUM4(Y0, Y1, Y2, Y3, X0, X2)
	VMOVUPS X0, (R9)
	VZEROUPPER
	RET

// func q8x2VNNI(res *[8]float32, w *byte, act *actBlock, nb int)
TEXT ·q8x2VNNI(SB), NOSPLIT, $32-32
	ARGS
	ROW1
	ZERO4(Y0, Y1, Y2, Y3)
	ZERO4(Y4, Y5, Y6, Y7)
	VMOVDQU sign80<>(SB), Y15

q8x2v:
	VCVTPH2PS (DI), X14
	SCALES(SI, 0)
	SCALES(BX, 16)
	VLOAD(SI, 64, Y16, Y18)
	VLOAD(BX, 64, Y17, Y19)
	Q8V(8)
	VROW(Y16, Y18, 0, Y0)
	VROW(Y17, Y19, 16, Y4)
	Q8V(40)
	VROW(Y16, Y18, 4, Y1)
	VROW(Y17, Y19, 20, Y5)
	Q8V(72)
	VROW(Y16, Y18, 8, Y2)
	VROW(Y17, Y19, 24, Y6)
	Q8V(104)
	VROW(Y16, Y18, 12, Y3)
	VROW(Y17, Y19, 28, Y7)
	ADDQ      $136, DI
	ADDQ      $128, SI
	ADDQ      $128, BX
	DECQ      CX
	JNZ       q8x2v

	HSUM4(Y0, Y1, Y2, Y3, X0, X2)
	HSUM4(Y4, Y5, Y6, Y7, X4, X6)
	VMOVUPS X0, (R9)
	VMOVUPS X4, 16(R9)
	VZEROUPPER
	RET

#define Q4V1LO \
	VCVTPH2PS (DI), X14; \
	SCALES(SI, 0); \
	VLOAD(SI, 32, Y16, Y18); \
	Q4LO(16); \
	VROW(Y16, Y18, 0, Y0); \
	Q4LO(48); \
	VROW(Y16, Y18, 4, Y1); \
	Q4LO(80); \
	VROW(Y16, Y18, 8, Y2); \
	Q4LO(112); \
	VROW(Y16, Y18, 12, Y3)
#define Q4V1HI \
	VCVTPH2PS 8(DI), X14; \
	SCALES(SI, 0); \
	VLOAD(SI, 32, Y16, Y18); \
	Q4HI(16); \
	VROW(Y16, Y18, 0, Y0); \
	Q4HI(48); \
	VROW(Y16, Y18, 4, Y1); \
	Q4HI(80); \
	VROW(Y16, Y18, 8, Y2); \
	Q4HI(112); \
	VROW(Y16, Y18, 12, Y3)

// func q4x1VNNI(res *[8]float32, w *byte, act *actBlock, nb int)
TEXT ·q4x1VNNI(SB), NOSPLIT, $16-32
	ARGS
	ZERO4(Y0, Y1, Y2, Y3)
	VMOVDQU mask0f<>(SB), Y11
	SUBQ    $2, CX
	JB      q4x1vtail

q4x1v:
	Q4V1LO
	ADDQ    $128, SI
	Q4V1HI
	ADDQ    $128, SI
	ADDQ    $144, DI
	SUBQ    $2, CX
	JAE     q4x1v

q4x1vtail:
	CMPQ    CX, $-1 // one block left
	JNE     q4x1vdone
	Q4V1LO

q4x1vdone:
	HSUM4(Y0, Y1, Y2, Y3, X0, X2)
	VMOVUPS X0, (R9)
	VZEROUPPER
	RET

#define Q4V2LO \
	VCVTPH2PS (DI), X14; \
	SCALES(SI, 0); \
	SCALES(BX, 16); \
	VLOAD(SI, 32, Y16, Y18); \
	VLOAD(BX, 32, Y17, Y19); \
	Q4LO(16); \
	VROW(Y16, Y18, 0, Y0); \
	VROW(Y17, Y19, 16, Y4); \
	Q4LO(48); \
	VROW(Y16, Y18, 4, Y1); \
	VROW(Y17, Y19, 20, Y5); \
	Q4LO(80); \
	VROW(Y16, Y18, 8, Y2); \
	VROW(Y17, Y19, 24, Y6); \
	Q4LO(112); \
	VROW(Y16, Y18, 12, Y3); \
	VROW(Y17, Y19, 28, Y7)
#define Q4V2HI \
	VCVTPH2PS 8(DI), X14; \
	SCALES(SI, 0); \
	SCALES(BX, 16); \
	VLOAD(SI, 32, Y16, Y18); \
	VLOAD(BX, 32, Y17, Y19); \
	Q4HI(16); \
	VROW(Y16, Y18, 0, Y0); \
	VROW(Y17, Y19, 16, Y4); \
	Q4HI(48); \
	VROW(Y16, Y18, 4, Y1); \
	VROW(Y17, Y19, 20, Y5); \
	Q4HI(80); \
	VROW(Y16, Y18, 8, Y2); \
	VROW(Y17, Y19, 24, Y6); \
	Q4HI(112); \
	VROW(Y16, Y18, 12, Y3); \
	VROW(Y17, Y19, 28, Y7)

// func q4x2VNNI(res *[8]float32, w *byte, act *actBlock, nb int)
TEXT ·q4x2VNNI(SB), NOSPLIT, $32-32
	ARGS
	ROW1
	ZERO4(Y0, Y1, Y2, Y3)
	ZERO4(Y4, Y5, Y6, Y7)
	VMOVDQU mask0f<>(SB), Y11
	SUBQ    $2, CX
	JB      q4x2vtail

q4x2v:
	Q4V2LO
	ADDQ    $128, SI
	ADDQ    $128, BX
	Q4V2HI
	ADDQ    $128, SI
	ADDQ    $128, BX
	ADDQ    $144, DI
	SUBQ    $2, CX
	JAE     q4x2v

q4x2vtail:
	CMPQ    CX, $-1 // one block left
	JNE     q4x2vdone
	Q4V2LO

q4x2vdone:
	HSUM4(Y0, Y1, Y2, Y3, X0, X2)
	HSUM4(Y4, Y5, Y6, Y7, X4, X6)
	VMOVUPS X0, (R9)
	VMOVUPS X4, 16(R9)
	VZEROUPPER
	RET
