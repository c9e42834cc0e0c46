#include "textflag.h"

// AVX2/FMA kernels; see kernels_amd64.go for their contracts. A YMM accumulator holds the eight
// lanes of one dot product. Every kernel reduces lanes with the same VHADDPS sequence, so a dot
// product has the same bits whichever kernel computed it:
//   hadd(a, b)      = [a0+a1, a2+a3, b0+b1, b2+b3 | a4+a5, a6+a7, b4+b5, b6+b7]
//   hadd(ab, cd)    = [(a0+a1)+(a2+a3), …, (d0+d1)+(d2+d3) | (a4+a5)+(a6+a7), …]
//   low + high      = [a, b, c, d], a = ((a0+a1)+(a2+a3))+((a4+a5)+(a6+a7)).
// R14, R15 and BP are left alone.

#include "hsum_amd64.h"

// func gemm3x4(out *float32, ostride int, x *float32, xstride int, w *float32, wstride int, groups int, n8 int, acc *float32, mode int)
TEXT ·gemm3x4(SB), NOSPLIT, $0-80
	MOVQ x+16(FP), SI
	MOVQ xstride+24(FP), AX
	SHLQ $2, AX
	LEAQ (SI)(AX*1), BX              // row 1
	LEAQ (BX)(AX*1), CX              // row 2
	MOVQ w+32(FP), DI
	MOVQ wstride+40(FP), R8
	SHLQ $2, R8
	MOVQ n8+56(FP), DX
	SHLQ $2, DX                      // bytes of the lane part
	MOVQ out+0(FP), R9
	MOVQ acc+64(FP), R13
	CMPQ groups+48(FP), $0
	JEQ  g3done

g3group:
	LEAQ  (DI)(R8*1), R10            // the group's columns: DI, R10, R11, R12
	LEAQ  (R10)(R8*1), R11
	LEAQ  (R11)(R8*1), R12
	TESTQ $1, mode+72(FP)
	JNZ   g3load
	VXORPS Y0, Y0, Y0                // Y(4r+c): row r, column c
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	JMP    g3start

g3load:
	VMOVUPS (R13), Y0
	VMOVUPS 32(R13), Y1
	VMOVUPS 64(R13), Y2
	VMOVUPS 96(R13), Y3
	VMOVUPS 128(R13), Y4
	VMOVUPS 160(R13), Y5
	VMOVUPS 192(R13), Y6
	VMOVUPS 224(R13), Y7
	VMOVUPS 256(R13), Y8
	VMOVUPS 288(R13), Y9
	VMOVUPS 320(R13), Y10
	VMOVUPS 352(R13), Y11

g3start:
	XORQ AX, AX

g3loop:
	VMOVUPS     (SI)(AX*1), Y12
	VMOVUPS     (BX)(AX*1), Y13
	VMOVUPS     (CX)(AX*1), Y14
	VMOVUPS     (DI)(AX*1), Y15
	VFMADD231PS Y15, Y12, Y0
	VFMADD231PS Y15, Y13, Y4
	VFMADD231PS Y15, Y14, Y8
	VMOVUPS     (R10)(AX*1), Y15
	VFMADD231PS Y15, Y12, Y1
	VFMADD231PS Y15, Y13, Y5
	VFMADD231PS Y15, Y14, Y9
	VMOVUPS     (R11)(AX*1), Y15
	VFMADD231PS Y15, Y12, Y2
	VFMADD231PS Y15, Y13, Y6
	VFMADD231PS Y15, Y14, Y10
	VMOVUPS     (R12)(AX*1), Y15
	VFMADD231PS Y15, Y12, Y3
	VFMADD231PS Y15, Y13, Y7
	VFMADD231PS Y15, Y14, Y11
	ADDQ        $32, AX
	CMPQ        AX, DX
	JB          g3loop

	TESTQ $2, mode+72(FP)
	JZ    g3reduce
	VMOVUPS Y0, (R13)
	VMOVUPS Y1, 32(R13)
	VMOVUPS Y2, 64(R13)
	VMOVUPS Y3, 96(R13)
	VMOVUPS Y4, 128(R13)
	VMOVUPS Y5, 160(R13)
	VMOVUPS Y6, 192(R13)
	VMOVUPS Y7, 224(R13)
	VMOVUPS Y8, 256(R13)
	VMOVUPS Y9, 288(R13)
	VMOVUPS Y10, 320(R13)
	VMOVUPS Y11, 352(R13)
	JMP     g3next

g3reduce:
	HSUM4(Y0, Y1, Y2, Y3, X0, X2)
	HSUM4(Y4, Y5, Y6, Y7, X4, X6)
	HSUM4(Y8, Y9, Y10, Y11, X8, X10)
	MOVQ    ostride+8(FP), AX
	SHLQ    $2, AX
	VMOVUPS X0, (R9)
	VMOVUPS X4, (R9)(AX*1)
	VMOVUPS X8, (R9)(AX*2)

g3next:
	ADDQ $16, R9
	ADDQ $384, R13
	LEAQ (DI)(R8*4), DI
	DECQ groups+48(FP)
	JNZ  g3group

g3done:
	VZEROUPPER
	RET

// func gemm1x4(out *float32, x *float32, w *float32, wstride int, groups int, n8 int)
TEXT ·gemm1x4(SB), NOSPLIT, $0-48
	MOVQ out+0(FP), R9
	MOVQ x+8(FP), SI
	MOVQ w+16(FP), DI
	MOVQ wstride+24(FP), R8
	SHLQ $2, R8
	MOVQ groups+32(FP), R13
	MOVQ n8+40(FP), DX
	SHLQ $2, DX

g1group:
	TESTQ  R13, R13
	JZ     g1done
	LEAQ   (DI)(R8*1), R10
	LEAQ   (R10)(R8*1), R11
	LEAQ   (R11)(R8*1), R12
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	XORQ   AX, AX

g1loop:
	VMOVUPS     (SI)(AX*1), Y4
	VFMADD231PS (DI)(AX*1), Y4, Y0
	VFMADD231PS (R10)(AX*1), Y4, Y1
	VFMADD231PS (R11)(AX*1), Y4, Y2
	VFMADD231PS (R12)(AX*1), Y4, Y3
	ADDQ        $32, AX
	CMPQ        AX, DX
	JB          g1loop

	HSUM4(Y0, Y1, Y2, Y3, X0, X2)
	VMOVUPS X0, (R9)
	ADDQ    $16, R9
	LEAQ    (DI)(R8*4), DI
	DECQ    R13
	JMP     g1group

g1done:
	VZEROUPPER
	RET

// func dot1(x *float32, w *float32, n8 int) float32
TEXT ·dot1(SB), NOSPLIT, $0-28
	MOVQ   x+0(FP), SI
	MOVQ   w+8(FP), DI
	MOVQ   n8+16(FP), DX
	SHLQ   $2, DX
	VXORPS Y0, Y0, Y0
	XORQ   AX, AX

d1loop:
	VMOVUPS     (SI)(AX*1), Y4
	VFMADD231PS (DI)(AX*1), Y4, Y0
	ADDQ        $32, AX
	CMPQ        AX, DX
	JB          d1loop

	// hadd(a, a) twice gives [(a0+a1)+(a2+a3), … | (a4+a5)+(a6+a7), …]: the HSUM4 tree.
	VHADDPS      Y0, Y0, Y0
	VHADDPS      Y0, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VMOVSS       X0, ret+24(FP)
	VZEROUPPER
	RET

// WSUM_ACC sets accumulator a for the eight floats at off(DI): loaded from there when R9 (accumulate)
// is nonzero, else zero.
#define WSUM_ACC(off, a) \
	VXORPS a, a, a; \
	TESTQ  R9, R9; \
	JZ     2(PC); \
	VMOVUPS off(DI), a

// func wsumAsm(out *float32, p *float32, v *float32, vstride int, keys int, n8 int, accumulate int)
TEXT ·wsumAsm(SB), NOSPLIT, $0-56
	MOVQ out+0(FP), DI
	MOVQ p+8(FP), SI
	MOVQ v+16(FP), BX
	MOVQ vstride+24(FP), R8
	SHLQ $2, R8
	MOVQ keys+32(FP), CX
	MOVQ n8+40(FP), DX               // floats left to write
	MOVQ accumulate+48(FP), R9

	// Eight accumulators when the row allows: more independent FMA chains per key.
ws64:
	CMPQ DX, $64
	JB   ws32
	WSUM_ACC(0, Y0)
	WSUM_ACC(32, Y1)
	WSUM_ACC(64, Y2)
	WSUM_ACC(96, Y3)
	WSUM_ACC(128, Y5)
	WSUM_ACC(160, Y6)
	WSUM_ACC(192, Y7)
	WSUM_ACC(224, Y8)
	XORQ AX, AX
	MOVQ BX, R10

ws64key:
	VBROADCASTSS (SI)(AX*4), Y4
	VFMADD231PS  (R10), Y4, Y0
	VFMADD231PS  32(R10), Y4, Y1
	VFMADD231PS  64(R10), Y4, Y2
	VFMADD231PS  96(R10), Y4, Y3
	VFMADD231PS  128(R10), Y4, Y5
	VFMADD231PS  160(R10), Y4, Y6
	VFMADD231PS  192(R10), Y4, Y7
	VFMADD231PS  224(R10), Y4, Y8
	ADDQ         R8, R10
	INCQ         AX
	CMPQ         AX, CX
	JB           ws64key

	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	VMOVUPS Y5, 128(DI)
	VMOVUPS Y6, 160(DI)
	VMOVUPS Y7, 192(DI)
	VMOVUPS Y8, 224(DI)
	ADDQ    $256, DI
	ADDQ    $256, BX
	SUBQ    $64, DX
	JMP     ws64

ws32:
	CMPQ DX, $32
	JB   ws8
	WSUM_ACC(0, Y0)
	WSUM_ACC(32, Y1)
	WSUM_ACC(64, Y2)
	WSUM_ACC(96, Y3)
	XORQ AX, AX
	MOVQ BX, R10

ws32key:
	VBROADCASTSS (SI)(AX*4), Y4
	VFMADD231PS  (R10), Y4, Y0
	VFMADD231PS  32(R10), Y4, Y1
	VFMADD231PS  64(R10), Y4, Y2
	VFMADD231PS  96(R10), Y4, Y3
	ADDQ         R8, R10
	INCQ         AX
	CMPQ         AX, CX
	JB           ws32key

	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	ADDQ    $128, DI
	ADDQ    $128, BX
	SUBQ    $32, DX
	JMP     ws32

ws8:
	CMPQ DX, $8
	JB   wsdone
	WSUM_ACC(0, Y0)
	XORQ AX, AX
	MOVQ BX, R10

ws8key:
	VBROADCASTSS (SI)(AX*4), Y4
	VFMADD231PS  (R10), Y4, Y0
	ADDQ         R8, R10
	INCQ         AX
	CMPQ         AX, CX
	JB           ws8key

	VMOVUPS Y0, (DI)
	ADDQ    $32, DI
	ADDQ    $32, BX
	SUBQ    $8, DX
	JMP     ws8

wsdone:
	VZEROUPPER
	RET

// The exponential, eight lanes at a time: Cephes' expf. exp(x) = 2ⁿ·p(r) with n = ⌊x·log₂e + ½⌋,
// r = x − n·ln2 (in two parts) and p a degree-7 polynomial; see exp.go for its range. The constants, eight copies
// each, at byte offsets: log2e 0, ½ 32, ln2hi 64, ln2lo 96, p0…p5 128…288, 1 320, lo (expLo) 352, hi (expHi) 384,
// the int32 exponent bias 416. expGo in kernels.go is the same algorithm.
DATA expc<>+0(SB)/8, $0x3fb8aa3b3fb8aa3b // log2e
DATA expc<>+8(SB)/8, $0x3fb8aa3b3fb8aa3b
DATA expc<>+16(SB)/8, $0x3fb8aa3b3fb8aa3b
DATA expc<>+24(SB)/8, $0x3fb8aa3b3fb8aa3b
DATA expc<>+32(SB)/8, $0x3f0000003f000000 // half
DATA expc<>+40(SB)/8, $0x3f0000003f000000
DATA expc<>+48(SB)/8, $0x3f0000003f000000
DATA expc<>+56(SB)/8, $0x3f0000003f000000
DATA expc<>+64(SB)/8, $0x3f3180003f318000 // ln2hi
DATA expc<>+72(SB)/8, $0x3f3180003f318000
DATA expc<>+80(SB)/8, $0x3f3180003f318000
DATA expc<>+88(SB)/8, $0x3f3180003f318000
DATA expc<>+96(SB)/8, $0xb95e8083b95e8083 // ln2lo
DATA expc<>+104(SB)/8, $0xb95e8083b95e8083
DATA expc<>+112(SB)/8, $0xb95e8083b95e8083
DATA expc<>+120(SB)/8, $0xb95e8083b95e8083
DATA expc<>+128(SB)/8, $0x3950696739506967 // p0
DATA expc<>+136(SB)/8, $0x3950696739506967
DATA expc<>+144(SB)/8, $0x3950696739506967
DATA expc<>+152(SB)/8, $0x3950696739506967
DATA expc<>+160(SB)/8, $0x3ab743ce3ab743ce // p1
DATA expc<>+168(SB)/8, $0x3ab743ce3ab743ce
DATA expc<>+176(SB)/8, $0x3ab743ce3ab743ce
DATA expc<>+184(SB)/8, $0x3ab743ce3ab743ce
DATA expc<>+192(SB)/8, $0x3c0889083c088908 // p2
DATA expc<>+200(SB)/8, $0x3c0889083c088908
DATA expc<>+208(SB)/8, $0x3c0889083c088908
DATA expc<>+216(SB)/8, $0x3c0889083c088908
DATA expc<>+224(SB)/8, $0x3d2aa9c13d2aa9c1 // p3
DATA expc<>+232(SB)/8, $0x3d2aa9c13d2aa9c1
DATA expc<>+240(SB)/8, $0x3d2aa9c13d2aa9c1
DATA expc<>+248(SB)/8, $0x3d2aa9c13d2aa9c1
DATA expc<>+256(SB)/8, $0x3e2aaaaa3e2aaaaa // p4
DATA expc<>+264(SB)/8, $0x3e2aaaaa3e2aaaaa
DATA expc<>+272(SB)/8, $0x3e2aaaaa3e2aaaaa
DATA expc<>+280(SB)/8, $0x3e2aaaaa3e2aaaaa
DATA expc<>+288(SB)/8, $0x3f0000003f000000 // p5
DATA expc<>+296(SB)/8, $0x3f0000003f000000
DATA expc<>+304(SB)/8, $0x3f0000003f000000
DATA expc<>+312(SB)/8, $0x3f0000003f000000
DATA expc<>+320(SB)/8, $0x3f8000003f800000 // one
DATA expc<>+328(SB)/8, $0x3f8000003f800000
DATA expc<>+336(SB)/8, $0x3f8000003f800000
DATA expc<>+344(SB)/8, $0x3f8000003f800000
DATA expc<>+352(SB)/8, $0xc2aeac50c2aeac50 // lo
DATA expc<>+360(SB)/8, $0xc2aeac50c2aeac50
DATA expc<>+368(SB)/8, $0xc2aeac50c2aeac50
DATA expc<>+376(SB)/8, $0xc2aeac50c2aeac50
DATA expc<>+384(SB)/8, $0x42b1000042b10000 // hi
DATA expc<>+392(SB)/8, $0x42b1000042b10000
DATA expc<>+400(SB)/8, $0x42b1000042b10000
DATA expc<>+408(SB)/8, $0x42b1000042b10000
DATA expc<>+416(SB)/8, $0x0000007f0000007f // the exponent bias, int32
DATA expc<>+424(SB)/8, $0x0000007f0000007f
DATA expc<>+432(SB)/8, $0x0000007f0000007f
DATA expc<>+440(SB)/8, $0x0000007f0000007f
GLOBL expc<>(SB), RODATA|NOPTR, $448

// EXP replaces the floats of x with their exponentials; n, z, y and m are clobbered.
#define EXP(x, n, z, y, m) \
	VMOVUPS      expc<>+352(SB), y; \
	VCMPPS       $1, y, x, m; \
	VMAXPS       x, y, x; \
	VMOVUPS      expc<>+384(SB), y; \
	VMINPS       x, y, x; \
	VMOVUPS      expc<>+32(SB), n; \
	VFMADD231PS  expc<>+0(SB), x, n; \
	VROUNDPS     $1, n, n; \
	VFNMADD231PS expc<>+64(SB), n, x; \
	VFNMADD231PS expc<>+96(SB), n, x; \
	VMULPS       x, x, z; \
	VMOVUPS      expc<>+128(SB), y; \
	VFMADD213PS  expc<>+160(SB), x, y; \
	VFMADD213PS  expc<>+192(SB), x, y; \
	VFMADD213PS  expc<>+224(SB), x, y; \
	VFMADD213PS  expc<>+256(SB), x, y; \
	VFMADD213PS  expc<>+288(SB), x, y; \
	VFMADD213PS  x, z, y; \
	VADDPS       expc<>+320(SB), y, y; \
	VCVTPS2DQ    n, n; \
	VPADDD       expc<>+416(SB), n, n; \
	VPSLLD       $23, n, n; \
	VMULPS       n, y, x; \
	VANDNPS      x, m, x

// In EXP, in Intel's operand order: m = x < lo (a mask; NaN compares false); x = max(lo, x) and
// min(hi, x) with x as the second source, so a NaN passes through; n = fma(x, log2e, ½) rounded
// down; x = x − n·ln2hi − n·ln2lo (two fused steps); y = Horner(p0…p5) in x; y = fma(y, x², x) + 1;
// x = y·2ⁿ, the power built from the integer n in the exponent field (n = 128, from x near hi,
// gives +Inf); lanes below lo are then cleared.

// func expSumAsm(e *float32, n8 int, m float32, lanes *[8]float32)
TEXT ·expSumAsm(SB), NOSPLIT, $0-32
	MOVQ         e+0(FP), DI
	MOVQ         n8+8(FP), CX
	VBROADCASTSS m+16(FP), Y15
	MOVQ         lanes+24(FP), SI
	VMOVUPS      (SI), Y14

esloop:
	VMOVUPS (DI), Y0
	VSUBPS  Y15, Y0, Y0
	EXP(Y0, Y1, Y2, Y3, Y4)
	VMOVUPS Y0, (DI)
	VADDPS  Y0, Y14, Y14
	ADDQ    $32, DI
	SUBQ    $8, CX
	JNZ     esloop

	VMOVUPS Y14, (SI)
	VZEROUPPER
	RET

// func siluMulAsm(dst *float32, gate *float32, up *float32, n8 int)
TEXT ·siluMulAsm(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ gate+8(FP), SI
	MOVQ up+16(FP), BX
	MOVQ n8+24(FP), CX

smloop:
	VMOVUPS (SI), Y5
	VXORPS  Y0, Y0, Y0
	VSUBPS  Y5, Y0, Y0
	EXP(Y0, Y1, Y2, Y3, Y4)
	VADDPS  expc<>+320(SB), Y0, Y0
	VDIVPS  Y0, Y5, Y0
	VMULPS  (BX), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, BX
	ADDQ    $32, DI
	SUBQ    $8, CX
	JNZ     smloop

	VZEROUPPER
	RET
