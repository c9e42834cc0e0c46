#include "textflag.h"
#include "hsum_amd64.h"
#include "qaffine_amd64.h"

// func aff8x1AVX2(res *[8]float32, w *byte, sb *byte, act *actBlock, nb int, bpg int, sdt int)
TEXT ·aff8x1AVX2(SB), NOSPLIT, $128-56
	MOVQ res+0(FP), R9
	MOVQ w+8(FP), DI
	MOVQ sb+16(FP), R10
	MOVQ act+24(FP), SI
	MOVQ nb+32(FP), CX
	MOVQ bpg+40(FP), R11
	MOVQ sdt+48(FP), R12
	XORQ R8, R8
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

aff8x1avx2loop:
	TESTQ     R8, R8
	JNZ       aff8x1avx2b0have
	MOVQ      R11, R8 // a quantization group starts
	CMPQ      R12, $1
	JNE       aff8x1avx2b0bf16
	VCVTPH2PS (R10), X14
	VCVTPH2PS 8(R10), X15
	JMP       aff8x1avx2b0next

aff8x1avx2b0bf16:
	VPMOVZXWD (R10), X14
	VPSLLD    $16, X14, X14
	VPMOVZXWD 8(R10), X15
	VPSLLD    $16, X15, X15

aff8x1avx2b0next:
	ADDQ      $16, R10

aff8x1avx2b0have:
	DECQ      R8
	AROW(SI, 0)
	ATAVX2(SI, 64, Y8)
	C8AVX2(0)
	S8AVX2(Y8, SI)
	FAVX2(0, 64, Y0)
	C8AVX2(32)
	S8AVX2(Y8, SI)
	FAVX2(4, 64, Y1)
	C8AVX2(64)
	S8AVX2(Y8, SI)
	FAVX2(8, 64, Y2)
	C8AVX2(96)
	S8AVX2(Y8, SI)
	FAVX2(12, 64, Y3)
	ADDQ $128, SI
	ADDQ $128, DI
	DECQ CX
	JNZ  aff8x1avx2loop
	HSUM4(Y0, Y1, Y2, Y3, X0, X2)
	VMOVUPS X0, (R9)
	VZEROUPPER
	RET

// func aff8x2AVX2(res *[8]float32, w *byte, sb *byte, act *actBlock, nb int, bpg int, sdt int)
TEXT ·aff8x2AVX2(SB), NOSPLIT, $128-56
	MOVQ res+0(FP), R9
	MOVQ w+8(FP), DI
	MOVQ sb+16(FP), R10
	MOVQ act+24(FP), SI
	MOVQ nb+32(FP), CX
	MOVQ bpg+40(FP), R11
	MOVQ sdt+48(FP), R12
	XORQ R8, R8
	MOVQ CX, BX
	SHLQ $7, BX
	ADDQ SI, BX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7

aff8x2avx2loop:
	TESTQ     R8, R8
	JNZ       aff8x2avx2b1have
	MOVQ      R11, R8 // a quantization group starts
	CMPQ      R12, $1
	JNE       aff8x2avx2b1bf16
	VCVTPH2PS (R10), X14
	VCVTPH2PS 8(R10), X15
	JMP       aff8x2avx2b1next

aff8x2avx2b1bf16:
	VPMOVZXWD (R10), X14
	VPSLLD    $16, X14, X14
	VPMOVZXWD 8(R10), X15
	VPSLLD    $16, X15, X15

aff8x2avx2b1next:
	ADDQ      $16, R10

aff8x2avx2b1have:
	DECQ      R8
	AROW(SI, 0)
	ATAVX2(SI, 64, Y8)
	AROW(BX, 32)
	ATAVX2(BX, 96, Y9)
	C8AVX2(0)
	S8AVX2(Y8, SI)
	FAVX2(0, 64, Y0)
	S8AVX2(Y9, BX)
	FAVX2(32, 96, Y4)
	C8AVX2(32)
	S8AVX2(Y8, SI)
	FAVX2(4, 64, Y1)
	S8AVX2(Y9, BX)
	FAVX2(36, 96, Y5)
	C8AVX2(64)
	S8AVX2(Y8, SI)
	FAVX2(8, 64, Y2)
	S8AVX2(Y9, BX)
	FAVX2(40, 96, Y6)
	C8AVX2(96)
	S8AVX2(Y8, SI)
	FAVX2(12, 64, Y3)
	S8AVX2(Y9, BX)
	FAVX2(44, 96, Y7)
	ADDQ $128, SI
	ADDQ $128, BX
	ADDQ $128, DI
	DECQ CX
	JNZ  aff8x2avx2loop
	HSUM4(Y0, Y1, Y2, Y3, X0, X2)
	HSUM4(Y4, Y5, Y6, Y7, X4, X6)
	VMOVUPS X0, (R9)
	VMOVUPS X4, 16(R9)
	VZEROUPPER
	RET

// func aff4x1AVX2(res *[8]float32, w *byte, sb *byte, act *actBlock, nb int, bpg int, sdt int)
TEXT ·aff4x1AVX2(SB), NOSPLIT, $128-56
	MOVQ res+0(FP), R9
	MOVQ w+8(FP), DI
	MOVQ sb+16(FP), R10
	MOVQ act+24(FP), SI
	MOVQ nb+32(FP), CX
	MOVQ bpg+40(FP), R11
	MOVQ sdt+48(FP), R12
	XORQ R8, R8
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VMOVDQU affmask<>(SB), Y11
	SUBQ $2, CX
	JB   aff4x1avx2tail

aff4x1avx2loop:
	TESTQ     R8, R8
	JNZ       aff4x1avx2b2have
	MOVQ      R11, R8 // a quantization group starts
	CMPQ      R12, $1
	JNE       aff4x1avx2b2bf16
	VCVTPH2PS (R10), X14
	VCVTPH2PS 8(R10), X15
	JMP       aff4x1avx2b2next

aff4x1avx2b2bf16:
	VPMOVZXWD (R10), X14
	VPSLLD    $16, X14, X14
	VPMOVZXWD 8(R10), X15
	VPSLLD    $16, X15, X15

aff4x1avx2b2next:
	ADDQ      $16, R10

aff4x1avx2b2have:
	DECQ      R8
	AROW(SI, 0)
	ATAVX2(SI, 64, Y8)
	C4LO(0)
	S4AVX2(Y8, SI)
	FAVX2(0, 64, Y0)
	C4LO(32)
	S4AVX2(Y8, SI)
	FAVX2(4, 64, Y1)
	C4LO(64)
	S4AVX2(Y8, SI)
	FAVX2(8, 64, Y2)
	C4LO(96)
	S4AVX2(Y8, SI)
	FAVX2(12, 64, Y3)
	ADDQ $128, SI
	TESTQ     R8, R8
	JNZ       aff4x1avx2b3have
	MOVQ      R11, R8 // a quantization group starts
	CMPQ      R12, $1
	JNE       aff4x1avx2b3bf16
	VCVTPH2PS (R10), X14
	VCVTPH2PS 8(R10), X15
	JMP       aff4x1avx2b3next

aff4x1avx2b3bf16:
	VPMOVZXWD (R10), X14
	VPSLLD    $16, X14, X14
	VPMOVZXWD 8(R10), X15
	VPSLLD    $16, X15, X15

aff4x1avx2b3next:
	ADDQ      $16, R10

aff4x1avx2b3have:
	DECQ      R8
	AROW(SI, 0)
	ATAVX2(SI, 64, Y8)
	C4HI(0)
	S4AVX2(Y8, SI)
	FAVX2(0, 64, Y0)
	C4HI(32)
	S4AVX2(Y8, SI)
	FAVX2(4, 64, Y1)
	C4HI(64)
	S4AVX2(Y8, SI)
	FAVX2(8, 64, Y2)
	C4HI(96)
	S4AVX2(Y8, SI)
	FAVX2(12, 64, Y3)
	ADDQ $128, SI
	ADDQ $128, DI
	SUBQ $2, CX
	JAE  aff4x1avx2loop

aff4x1avx2tail:
	CMPQ CX, $-1 // one block left
	JNE  aff4x1avx2done
	TESTQ     R8, R8
	JNZ       aff4x1avx2b4have
	MOVQ      R11, R8 // a quantization group starts
	CMPQ      R12, $1
	JNE       aff4x1avx2b4bf16
	VCVTPH2PS (R10), X14
	VCVTPH2PS 8(R10), X15
	JMP       aff4x1avx2b4next

aff4x1avx2b4bf16:
	VPMOVZXWD (R10), X14
	VPSLLD    $16, X14, X14
	VPMOVZXWD 8(R10), X15
	VPSLLD    $16, X15, X15

aff4x1avx2b4next:
	ADDQ      $16, R10

aff4x1avx2b4have:
	DECQ      R8
	AROW(SI, 0)
	ATAVX2(SI, 64, Y8)
	C4LO(0)
	S4AVX2(Y8, SI)
	FAVX2(0, 64, Y0)
	C4LO(32)
	S4AVX2(Y8, SI)
	FAVX2(4, 64, Y1)
	C4LO(64)
	S4AVX2(Y8, SI)
	FAVX2(8, 64, Y2)
	C4LO(96)
	S4AVX2(Y8, SI)
	FAVX2(12, 64, Y3)
	ADDQ $128, SI

aff4x1avx2done:
	HSUM4(Y0, Y1, Y2, Y3, X0, X2)
	VMOVUPS X0, (R9)
	VZEROUPPER
	RET

// func aff4x2AVX2(res *[8]float32, w *byte, sb *byte, act *actBlock, nb int, bpg int, sdt int)
TEXT ·aff4x2AVX2(SB), NOSPLIT, $128-56
	MOVQ res+0(FP), R9
	MOVQ w+8(FP), DI
	MOVQ sb+16(FP), R10
	MOVQ act+24(FP), SI
	MOVQ nb+32(FP), CX
	MOVQ bpg+40(FP), R11
	MOVQ sdt+48(FP), R12
	XORQ R8, R8
	MOVQ CX, BX
	SHLQ $7, BX
	ADDQ SI, BX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VMOVDQU affmask<>(SB), Y11
	SUBQ $2, CX
	JB   aff4x2avx2tail

aff4x2avx2loop:
	TESTQ     R8, R8
	JNZ       aff4x2avx2b5have
	MOVQ      R11, R8 // a quantization group starts
	CMPQ      R12, $1
	JNE       aff4x2avx2b5bf16
	VCVTPH2PS (R10), X14
	VCVTPH2PS 8(R10), X15
	JMP       aff4x2avx2b5next

aff4x2avx2b5bf16:
	VPMOVZXWD (R10), X14
	VPSLLD    $16, X14, X14
	VPMOVZXWD 8(R10), X15
	VPSLLD    $16, X15, X15

aff4x2avx2b5next:
	ADDQ      $16, R10

aff4x2avx2b5have:
	DECQ      R8
	AROW(SI, 0)
	ATAVX2(SI, 64, Y8)
	AROW(BX, 32)
	ATAVX2(BX, 96, Y9)
	C4LO(0)
	S4AVX2(Y8, SI)
	FAVX2(0, 64, Y0)
	S4AVX2(Y9, BX)
	FAVX2(32, 96, Y4)
	C4LO(32)
	S4AVX2(Y8, SI)
	FAVX2(4, 64, Y1)
	S4AVX2(Y9, BX)
	FAVX2(36, 96, Y5)
	C4LO(64)
	S4AVX2(Y8, SI)
	FAVX2(8, 64, Y2)
	S4AVX2(Y9, BX)
	FAVX2(40, 96, Y6)
	C4LO(96)
	S4AVX2(Y8, SI)
	FAVX2(12, 64, Y3)
	S4AVX2(Y9, BX)
	FAVX2(44, 96, Y7)
	ADDQ $128, SI
	ADDQ $128, BX
	TESTQ     R8, R8
	JNZ       aff4x2avx2b6have
	MOVQ      R11, R8 // a quantization group starts
	CMPQ      R12, $1
	JNE       aff4x2avx2b6bf16
	VCVTPH2PS (R10), X14
	VCVTPH2PS 8(R10), X15
	JMP       aff4x2avx2b6next

aff4x2avx2b6bf16:
	VPMOVZXWD (R10), X14
	VPSLLD    $16, X14, X14
	VPMOVZXWD 8(R10), X15
	VPSLLD    $16, X15, X15

aff4x2avx2b6next:
	ADDQ      $16, R10

aff4x2avx2b6have:
	DECQ      R8
	AROW(SI, 0)
	ATAVX2(SI, 64, Y8)
	AROW(BX, 32)
	ATAVX2(BX, 96, Y9)
	C4HI(0)
	S4AVX2(Y8, SI)
	FAVX2(0, 64, Y0)
	S4AVX2(Y9, BX)
	FAVX2(32, 96, Y4)
	C4HI(32)
	S4AVX2(Y8, SI)
	FAVX2(4, 64, Y1)
	S4AVX2(Y9, BX)
	FAVX2(36, 96, Y5)
	C4HI(64)
	S4AVX2(Y8, SI)
	FAVX2(8, 64, Y2)
	S4AVX2(Y9, BX)
	FAVX2(40, 96, Y6)
	C4HI(96)
	S4AVX2(Y8, SI)
	FAVX2(12, 64, Y3)
	S4AVX2(Y9, BX)
	FAVX2(44, 96, Y7)
	ADDQ $128, SI
	ADDQ $128, BX
	ADDQ $128, DI
	SUBQ $2, CX
	JAE  aff4x2avx2loop

aff4x2avx2tail:
	CMPQ CX, $-1 // one block left
	JNE  aff4x2avx2done
	TESTQ     R8, R8
	JNZ       aff4x2avx2b7have
	MOVQ      R11, R8 // a quantization group starts
	CMPQ      R12, $1
	JNE       aff4x2avx2b7bf16
	VCVTPH2PS (R10), X14
	VCVTPH2PS 8(R10), X15
	JMP       aff4x2avx2b7next

aff4x2avx2b7bf16:
	VPMOVZXWD (R10), X14
	VPSLLD    $16, X14, X14
	VPMOVZXWD 8(R10), X15
	VPSLLD    $16, X15, X15

aff4x2avx2b7next:
	ADDQ      $16, R10

aff4x2avx2b7have:
	DECQ      R8
	AROW(SI, 0)
	ATAVX2(SI, 64, Y8)
	AROW(BX, 32)
	ATAVX2(BX, 96, Y9)
	C4LO(0)
	S4AVX2(Y8, SI)
	FAVX2(0, 64, Y0)
	S4AVX2(Y9, BX)
	FAVX2(32, 96, Y4)
	C4LO(32)
	S4AVX2(Y8, SI)
	FAVX2(4, 64, Y1)
	S4AVX2(Y9, BX)
	FAVX2(36, 96, Y5)
	C4LO(64)
	S4AVX2(Y8, SI)
	FAVX2(8, 64, Y2)
	S4AVX2(Y9, BX)
	FAVX2(40, 96, Y6)
	C4LO(96)
	S4AVX2(Y8, SI)
	FAVX2(12, 64, Y3)
	S4AVX2(Y9, BX)
	FAVX2(44, 96, Y7)
	ADDQ $128, SI
	ADDQ $128, BX

aff4x2avx2done:
	HSUM4(Y0, Y1, Y2, Y3, X0, X2)
	HSUM4(Y4, Y5, Y6, Y7, X4, X6)
	VMOVUPS X0, (R9)
	VMOVUPS X4, 16(R9)
	VZEROUPPER
	RET
