#include "textflag.h"

// AVX2/FMA kernels for 16-bit weights; see kernels_amd64.go for their contracts and
// kernels_amd64.s for the lanes and the reduction they share.

#include "hsum_amd64.h"

// The kernels for 16-bit weights are gemm1x4 and dot1 with each weight vector widened in a
// register before its multiply-add, the loop index counting elements (x at 4 bytes, w at 2). A
// BF16 value is the upper half of its F32 value: zero-extend each to 32 bits (VPMOVZXWD), shift it
// up (VPSLLD $16). F16 converts with F16C's VCVTPH2PS, exactly (every F16 value, subnormals
// included, is a normal F32 value; a signaling NaN comes back quieted, which no product can tell).
// Lanes, multiply-adds and reduction are gemm1x4's and dot1's, so a 16-bit weight gives the bits of
// the same weight widened beforehand.

// func gemm1x4BF16(out *float32, x *float32, w *uint16, wstride int, groups int, n8 int)
// Weights widened by VPMOVZXWD, VPSLLD $16.
TEXT ·gemm1x4BF16(SB), NOSPLIT, $0-48
	MOVQ out+0(FP), R9
	MOVQ x+8(FP), SI
	MOVQ w+16(FP), DI
	MOVQ wstride+24(FP), R8
	SHLQ $1, R8                      // bytes from one weight row to the next
	MOVQ groups+32(FP), R13
	MOVQ n8+40(FP), DX               // elements: x is read at AX*4, w at AX*2

b1group:
	TESTQ  R13, R13
	JZ     b1done
	LEAQ   (DI)(R8*1), R10
	LEAQ   (R10)(R8*1), R11
	LEAQ   (R11)(R8*1), R12
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	XORQ   AX, AX

b1loop:
	VMOVUPS     (SI)(AX*4), Y4
	VPMOVZXWD   (DI)(AX*2), Y5
	VPMOVZXWD   (R10)(AX*2), Y6
	VPMOVZXWD   (R11)(AX*2), Y7
	VPMOVZXWD   (R12)(AX*2), Y8
	VPSLLD      $16, Y5, Y5
	VPSLLD      $16, Y6, Y6
	VPSLLD      $16, Y7, Y7
	VPSLLD      $16, Y8, Y8
	VFMADD231PS Y5, Y4, Y0
	VFMADD231PS Y6, Y4, Y1
	VFMADD231PS Y7, Y4, Y2
	VFMADD231PS Y8, Y4, Y3
	ADDQ        $8, AX
	CMPQ        AX, DX
	JB          b1loop

	HSUM4(Y0, Y1, Y2, Y3, X0, X2)
	VMOVUPS X0, (R9)
	ADDQ    $16, R9
	LEAQ    (DI)(R8*4), DI
	DECQ    R13
	JMP     b1group

b1done:
	VZEROUPPER
	RET

// func gemm1x4F16(out *float32, x *float32, w *uint16, wstride int, groups int, n8 int)
// Weights widened by VCVTPH2PS.
TEXT ·gemm1x4F16(SB), NOSPLIT, $0-48
	MOVQ out+0(FP), R9
	MOVQ x+8(FP), SI
	MOVQ w+16(FP), DI
	MOVQ wstride+24(FP), R8
	SHLQ $1, R8                      // bytes from one weight row to the next
	MOVQ groups+32(FP), R13
	MOVQ n8+40(FP), DX               // elements: x is read at AX*4, w at AX*2

h1group:
	TESTQ  R13, R13
	JZ     h1done
	LEAQ   (DI)(R8*1), R10
	LEAQ   (R10)(R8*1), R11
	LEAQ   (R11)(R8*1), R12
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	XORQ   AX, AX

h1loop:
	VMOVUPS     (SI)(AX*4), Y4
	VCVTPH2PS   (DI)(AX*2), Y5
	VCVTPH2PS   (R10)(AX*2), Y6
	VCVTPH2PS   (R11)(AX*2), Y7
	VCVTPH2PS   (R12)(AX*2), Y8
	VFMADD231PS Y5, Y4, Y0
	VFMADD231PS Y6, Y4, Y1
	VFMADD231PS Y7, Y4, Y2
	VFMADD231PS Y8, Y4, Y3
	ADDQ        $8, AX
	CMPQ        AX, DX
	JB          h1loop

	HSUM4(Y0, Y1, Y2, Y3, X0, X2)
	VMOVUPS X0, (R9)
	ADDQ    $16, R9
	LEAQ    (DI)(R8*4), DI
	DECQ    R13
	JMP     h1group

h1done:
	VZEROUPPER
	RET

// func dot1BF16(x *float32, w *uint16, n8 int) float32
TEXT ·dot1BF16(SB), NOSPLIT, $0-28
	MOVQ   x+0(FP), SI
	MOVQ   w+8(FP), DI
	MOVQ   n8+16(FP), DX
	VXORPS Y0, Y0, Y0
	XORQ   AX, AX

dbloop:
	VMOVUPS     (SI)(AX*4), Y4
	VPMOVZXWD   (DI)(AX*2), Y5
	VPSLLD      $16, Y5, Y5
	VFMADD231PS Y5, Y4, Y0
	ADDQ        $8, AX
	CMPQ        AX, DX
	JB          dbloop

	VHADDPS      Y0, Y0, Y0          // the dot1 reduction
	VHADDPS      Y0, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VMOVSS       X0, ret+24(FP)
	VZEROUPPER
	RET

// func dot1F16(x *float32, w *uint16, n8 int) float32
TEXT ·dot1F16(SB), NOSPLIT, $0-28
	MOVQ   x+0(FP), SI
	MOVQ   w+8(FP), DI
	MOVQ   n8+16(FP), DX
	VXORPS Y0, Y0, Y0
	XORQ   AX, AX

dhloop:
	VMOVUPS     (SI)(AX*4), Y4
	VCVTPH2PS   (DI)(AX*2), Y5
	VFMADD231PS Y5, Y4, Y0
	ADDQ        $8, AX
	CMPQ        AX, DX
	JB          dhloop

	VHADDPS      Y0, Y0, Y0          // the dot1 reduction
	VHADDPS      Y0, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VMOVSS       X0, ret+24(FP)
	VZEROUPPER
	RET

// func widenBF16(dst *float32, src *uint16, n8 int)
TEXT ·widenBF16(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n8+16(FP), DX
	XORQ AX, AX

wbloop:
	VPMOVZXWD (SI)(AX*2), Y0
	VPSLLD    $16, Y0, Y0
	VMOVUPS   Y0, (DI)(AX*4)
	ADDQ      $8, AX
	CMPQ      AX, DX
	JB        wbloop

	VZEROUPPER
	RET

// func widenF16(dst *float32, src *uint16, n8 int)
TEXT ·widenF16(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n8+16(FP), DX
	XORQ AX, AX

whloop:
	VCVTPH2PS (SI)(AX*2), Y0
	VMOVUPS   Y0, (DI)(AX*4)
	ADDQ      $8, AX
	CMPQ      AX, DX
	JB        whloop

	VZEROUPPER
	RET

// WSUMH_ACC sets accumulator a for the eight floats at off(DI): loaded from there when R9
// (accumulate) is nonzero, else zero (kernels_amd64.s's WSUM_ACC).
#define WSUMH_ACC(off, a) \
	VXORPS a, a, a; \
	TESTQ  R9, R9; \
	JZ     2(PC); \
	VMOVUPS off(DI), a

// func wsumF16(out *float32, p *float32, v *uint16, vstride int, keys int, n8 int, accumulate int)
// wsumAsm's sums over F16 values, each eight widened by VCVTPH2PS before their multiply-add: the
// bits of wsumAsm over the values widened beforehand. Needs F16C.
TEXT ·wsumF16(SB), NOSPLIT, $0-56
	MOVQ out+0(FP), DI
	MOVQ p+8(FP), SI
	MOVQ v+16(FP), BX
	MOVQ vstride+24(FP), R8
	SHLQ $1, R8                      // bytes from one key's values to the next's
	MOVQ keys+32(FP), CX
	MOVQ n8+40(FP), DX               // floats left to write
	MOVQ accumulate+48(FP), R9

wh32:
	CMPQ DX, $32
	JB   wh8
	WSUMH_ACC(0, Y0)
	WSUMH_ACC(32, Y1)
	WSUMH_ACC(64, Y2)
	WSUMH_ACC(96, Y3)
	XORQ AX, AX
	MOVQ BX, R10

wh32key:
	VBROADCASTSS (SI)(AX*4), Y4
	VCVTPH2PS    (R10), Y5
	VCVTPH2PS    16(R10), Y6
	VCVTPH2PS    32(R10), Y7
	VCVTPH2PS    48(R10), Y8
	VFMADD231PS  Y5, Y4, Y0
	VFMADD231PS  Y6, Y4, Y1
	VFMADD231PS  Y7, Y4, Y2
	VFMADD231PS  Y8, Y4, Y3
	ADDQ         R8, R10
	INCQ         AX
	CMPQ         AX, CX
	JB           wh32key

	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	ADDQ    $128, DI
	ADDQ    $64, BX
	SUBQ    $32, DX
	JMP     wh32

wh8:
	CMPQ DX, $8
	JB   whdone
	WSUMH_ACC(0, Y0)
	XORQ AX, AX
	MOVQ BX, R10

wh8key:
	VBROADCASTSS (SI)(AX*4), Y4
	VCVTPH2PS    (R10), Y5
	VFMADD231PS  Y5, Y4, Y0
	ADDQ         R8, R10
	INCQ         AX
	CMPQ         AX, CX
	JB           wh8key

	VMOVUPS Y0, (DI)
	ADDQ    $32, DI
	ADDQ    $16, BX
	SUBQ    $8, DX
	JMP     wh8

whdone:
	VZEROUPPER
	RET
