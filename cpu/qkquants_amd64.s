#include "textflag.h"
#include "hsum_amd64.h"

// Kernels for Q4_K and Q6_K weights (qkquants.go has the layout of a unit, one super-block of the
// four rows of a group): one activation row of nsb·8 blocks at act against four weight rows; res
// gets the four dot products. Per block and lane they compute package quant's order:
//
//   Q4_K: lane = fma(d·d_x, sc·s, lane), then lane = fma(dmin·d_x, m·(−t), lane), where s is the
//         exact integer sum of quant × activation quant (VPMADDUBSW: 4-bit quants are unsigned),
//         multiplied by sc in the same VPMADDWD that sums the pairs; −t is m8/8, converted
//         exactly, and m·(−t) is an exact product of small integers.
//   Q6_K: lane = fma(d·d_x, sc·s, lane), where s sums (q − 32) × activation quant: VPMADDUBSW
//         takes |x| and (q − 32) with x's sign (VPSIGNB), and VPMADDWD multiplies by the block's
//         two scales, the first for lanes 0–3, the second for lanes 4–7.
//
// Registers: DI the unit, SI the activation block, CX the super-blocks left, DX the runs or halves
// left in it, R10 the block's scales (and R11 Q4_K's mins as floats on the stack), R12 the quants
// of the run or half, R9 res. Y0–Y3 the lanes of the four columns, Y8 the activation quants, Y9
// −t (Q4_K) or |x| (Q6_K), Y10 a column's quants, Y11 the nibble mask. The stack holds the four
// columns' d·d_x at 0 and Q4_K's dmin·d_x at 16 and its 32 mins as floats from 32.

DATA kqnibble<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA kqnibble<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA kqnibble<>+16(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA kqnibble<>+24(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL kqnibble<>(SB), RODATA|NOPTR, $32

DATA kqlowbytes<>+0(SB)/8, $0x00ff00ff00ff00ff
DATA kqlowbytes<>+8(SB)/8, $0x00ff00ff00ff00ff
DATA kqlowbytes<>+16(SB)/8, $0x00ff00ff00ff00ff
DATA kqlowbytes<>+24(SB)/8, $0x00ff00ff00ff00ff
GLOBL kqlowbytes<>(SB), RODATA|NOPTR, $32

DATA kqeighth<>+0(SB)/8, $0x3e0000003e000000
DATA kqeighth<>+8(SB)/8, $0x3e0000003e000000
DATA kqeighth<>+16(SB)/8, $0x3e0000003e000000
DATA kqeighth<>+24(SB)/8, $0x3e0000003e000000
GLOBL kqeighth<>(SB), RODATA|NOPTR, $32

DATA kqtwobits<>+0(SB)/8, $0x0303030303030303
DATA kqtwobits<>+8(SB)/8, $0x0303030303030303
DATA kqtwobits<>+16(SB)/8, $0x0303030303030303
DATA kqtwobits<>+24(SB)/8, $0x0303030303030303
GLOBL kqtwobits<>(SB), RODATA|NOPTR, $32

DATA kq32<>+0(SB)/8, $0x2020202020202020
DATA kq32<>+8(SB)/8, $0x2020202020202020
DATA kq32<>+16(SB)/8, $0x2020202020202020
DATA kq32<>+24(SB)/8, $0x2020202020202020
GLOBL kq32<>(SB), RODATA|NOPTR, $32

// KBLOCK starts a block: the four columns' d·d_x (X14 holds their d) on the stack, the quants in
// Y8.
#define KBLOCK \
	VBROADCASTSS 96(SI), X13; \
	VMULPS       X13, X14, X12; \
	VMOVUPS      X12, 0(SP); \
	VMOVDQU      (SI), Y8

// Q4KBLOCK adds Q4_K's dmin·d_x (X15 holds dmin) and −t in Y9.
#define Q4KBLOCK \
	KBLOCK; \
	VMULPS    X13, X15, X12; \
	VMOVUPS   X12, 16(SP); \
	VCVTDQ2PS 32(SI), Y9; \
	VMULPS    kqeighth<>(SB), Y9, Y9

// Q4KLO and Q4KHI load column quants at off in the run (sub-block 2r, then 2r+1) into Y10.
#define Q4KLO(off) \
	VPAND off(R12), Y11, Y10
#define Q4KHI(off) \
	VMOVDQU off(R12), Y10; \
	VPSRLW  $4, Y10, Y10; \
	VPAND   Y11, Y10, Y10

// Q4KCOL adds column c's (its scale at c(R10), its min at 4c(R11)) two multiply-adds into acc.
#define Q4KCOL(c, c4, acc) \
	VPMADDUBSW   Y8, Y10, Y12; \
	VPBROADCASTB c(R10), Y13; \
	VPAND        kqlowbytes<>(SB), Y13, Y13; \
	VPMADDWD     Y13, Y12, Y12; \
	VCVTDQ2PS    Y12, Y12; \
	VBROADCASTSS c4(SP), Y13; \
	VFMADD231PS  Y13, Y12, acc; \
	VBROADCASTSS c4(R11), Y13; \
	VMULPS       Y9, Y13, Y13; \
	VBROADCASTSS 16+c4(SP), Y12; \
	VFMADD231PS  Y12, Y13, acc

// Q4KMINS widens eight mins (two sub-blocks' four columns) at off(DI) to floats at soff(SP).
#define Q4KMINS(off, soff) \
	VPMOVZXBD off(DI), Y12; \
	VCVTDQ2PS Y12, Y12; \
	VMOVUPS   Y12, soff(SP)

// func q4kx1AVX2(res *[8]float32, w *byte, act *actBlock, nsb int)
TEXT ·q4kx1AVX2(SB), NOSPLIT, $160-32
	MOVQ    res+0(FP), R9
	MOVQ    w+8(FP), DI
	MOVQ    act+16(FP), SI
	MOVQ    nsb+24(FP), CX
	VXORPS  Y0, Y0, Y0
	VXORPS  Y1, Y1, Y1
	VXORPS  Y2, Y2, Y2
	VXORPS  Y3, Y3, Y3
	VMOVDQU kqnibble<>(SB), Y11

q4ksuper:
	VCVTPH2PS 0(DI), X14
	VCVTPH2PS 8(DI), X15
	Q4KMINS(48, 32)
	Q4KMINS(56, 64)
	Q4KMINS(64, 96)
	Q4KMINS(72, 128)
	LEAQ      16(DI), R10
	LEAQ      32(SP), R11
	LEAQ      80(DI), R12
	MOVQ      $4, DX

q4krun:
	Q4KBLOCK
	Q4KLO(0)
	Q4KCOL(0, 0, Y0)
	Q4KLO(32)
	Q4KCOL(1, 4, Y1)
	Q4KLO(64)
	Q4KCOL(2, 8, Y2)
	Q4KLO(96)
	Q4KCOL(3, 12, Y3)
	ADDQ $128, SI
	ADDQ $4, R10
	ADDQ $16, R11
	Q4KBLOCK
	Q4KHI(0)
	Q4KCOL(0, 0, Y0)
	Q4KHI(32)
	Q4KCOL(1, 4, Y1)
	Q4KHI(64)
	Q4KCOL(2, 8, Y2)
	Q4KHI(96)
	Q4KCOL(3, 12, Y3)
	ADDQ $128, SI
	ADDQ $4, R10
	ADDQ $16, R11
	ADDQ $128, R12
	DECQ DX
	JNZ  q4krun
	ADDQ $592, DI
	DECQ CX
	JNZ  q4ksuper
	HSUM4(Y0, Y1, Y2, Y3, X0, X2)
	VMOVUPS X0, (R9)
	VZEROUPPER
	RET

// Q6KCOL adds column c of block i of the half (its ql at qloff(R12), a nibble shift of lo; its qh
// at qhoff(R12), shifted right by hi; its scales at soff(R10)) into acc.
#define Q6KCOL(qloff, lo, qhoff, hi, soff, c4, acc) \
	VMOVDQU      qloff(R12), Y10; \
	VPSRLW       $lo, Y10, Y10; \
	VPAND        Y11, Y10, Y10; \
	VMOVDQU      qhoff(R12), Y12; \
	VPSRLW       $hi, Y12, Y12; \
	VPAND        kqtwobits<>(SB), Y12, Y12; \
	VPSLLW       $4, Y12, Y12; \
	VPOR         Y12, Y10, Y10; \
	VPSUBB       kq32<>(SB), Y10, Y10; \
	VPSIGNB      Y8, Y10, Y10; \
	VPMADDUBSW   Y10, Y9, Y12; \
	VPBROADCASTW soff(R10), Y13; \
	VPSLLW       $8, Y13, Y15; \
	VPBLENDD     $0xf0, Y13, Y15, Y13; \
	VPSRAW       $8, Y13, Y13; \
	VPMADDWD     Y13, Y12, Y12; \
	VCVTDQ2PS    Y12, Y12; \
	VBROADCASTSS c4(SP), Y13; \
	VFMADD231PS  Y13, Y12, acc

// Q6KBLOCK runs block i of a half: its ql at 32·(i%2) in each column's 96 bytes, the nibble
// 4·(i/2), its qh bits at 2i.
#define Q6KBLOCK(ql, lo, hi) \
	KBLOCK; \
	VPSIGNB Y8, Y8, Y9; \
	Q6KCOL(ql, lo, 64, hi, 0, 0, Y0); \
	Q6KCOL(96+ql, lo, 160, hi, 2, 4, Y1); \
	Q6KCOL(192+ql, lo, 256, hi, 4, 8, Y2); \
	Q6KCOL(288+ql, lo, 352, hi, 6, 12, Y3); \
	ADDQ $128, SI; \
	ADDQ $8, R10

// func q6kx1AVX2(res *[8]float32, w *byte, act *actBlock, nsb int)
TEXT ·q6kx1AVX2(SB), NOSPLIT, $32-32
	MOVQ    res+0(FP), R9
	MOVQ    w+8(FP), DI
	MOVQ    act+16(FP), SI
	MOVQ    nsb+24(FP), CX
	VXORPS  Y0, Y0, Y0
	VXORPS  Y1, Y1, Y1
	VXORPS  Y2, Y2, Y2
	VXORPS  Y3, Y3, Y3
	VMOVDQU kqnibble<>(SB), Y11

q6ksuper:
	VCVTPH2PS 0(DI), X14
	LEAQ      8(DI), R10
	LEAQ      72(DI), R12
	MOVQ      $2, DX

q6khalf:
	Q6KBLOCK(0, 0, 0)
	Q6KBLOCK(32, 0, 2)
	Q6KBLOCK(0, 4, 4)
	Q6KBLOCK(32, 4, 6)
	ADDQ $384, R12
	DECQ DX
	JNZ  q6khalf
	ADDQ $840, DI
	DECQ CX
	JNZ  q6ksuper
	HSUM4(Y0, Y1, Y2, Y3, X0, X2)
	VMOVUPS X0, (R9)
	VZEROUPPER
	RET
