#include "textflag.h"
#include "hsum_amd64.h"
#include "qaffine_amd64.h"

// func aff8x1VNNI(res *[8]float32, w *byte, sb *byte, act *actBlock, nb int, bpg int, sdt int)
TEXT ·aff8x1VNNI(SB), NOSPLIT, $128-56
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

aff8x1vnniloop:
	TESTQ     R8, R8
	JNZ       aff8x1vnnib8have
	MOVQ      R11, R8 // a quantization group starts
	CMPQ      R12, $1
	JNE       aff8x1vnnib8bf16
	VCVTPH2PS (R10), X14
	VCVTPH2PS 8(R10), X15
	JMP       aff8x1vnnib8next

aff8x1vnnib8bf16:
	VPMOVZXWD (R10), X14
	VPSLLD    $16, X14, X14
	VPMOVZXWD 8(R10), X15
	VPSLLD    $16, X15, X15

aff8x1vnnib8next:
	ADDQ      $16, R10

aff8x1vnnib8have:
	DECQ      R8
	AROW(SI, 0)
	ATVNNI(SI, Y20, Y16)
	C8VNNI(0)
	SFVNNI(Y16, Y20, 0, Y0)
	C8VNNI(32)
	SFVNNI(Y16, Y20, 4, Y1)
	C8VNNI(64)
	SFVNNI(Y16, Y20, 8, Y2)
	C8VNNI(96)
	SFVNNI(Y16, Y20, 12, Y3)
	ADDQ $128, SI
	ADDQ $128, DI
	DECQ CX
	JNZ  aff8x1vnniloop
	HSUM4(Y0, Y1, Y2, Y3, X0, X2)
	VMOVUPS X0, (R9)
	VZEROUPPER
	RET

// func aff8x2VNNI(res *[8]float32, w *byte, sb *byte, act *actBlock, nb int, bpg int, sdt int)
TEXT ·aff8x2VNNI(SB), NOSPLIT, $128-56
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

aff8x2vnniloop:
	TESTQ     R8, R8
	JNZ       aff8x2vnnib9have
	MOVQ      R11, R8 // a quantization group starts
	CMPQ      R12, $1
	JNE       aff8x2vnnib9bf16
	VCVTPH2PS (R10), X14
	VCVTPH2PS 8(R10), X15
	JMP       aff8x2vnnib9next

aff8x2vnnib9bf16:
	VPMOVZXWD (R10), X14
	VPSLLD    $16, X14, X14
	VPMOVZXWD 8(R10), X15
	VPSLLD    $16, X15, X15

aff8x2vnnib9next:
	ADDQ      $16, R10

aff8x2vnnib9have:
	DECQ      R8
	AROW(SI, 0)
	ATVNNI(SI, Y20, Y16)
	AROW(BX, 32)
	ATVNNI(BX, Y21, Y17)
	C8VNNI(0)
	SFVNNI(Y16, Y20, 0, Y0)
	SFVNNI(Y17, Y21, 32, Y4)
	C8VNNI(32)
	SFVNNI(Y16, Y20, 4, Y1)
	SFVNNI(Y17, Y21, 36, Y5)
	C8VNNI(64)
	SFVNNI(Y16, Y20, 8, Y2)
	SFVNNI(Y17, Y21, 40, Y6)
	C8VNNI(96)
	SFVNNI(Y16, Y20, 12, Y3)
	SFVNNI(Y17, Y21, 44, Y7)
	ADDQ $128, SI
	ADDQ $128, BX
	ADDQ $128, DI
	DECQ CX
	JNZ  aff8x2vnniloop
	HSUM4(Y0, Y1, Y2, Y3, X0, X2)
	HSUM4(Y4, Y5, Y6, Y7, X4, X6)
	VMOVUPS X0, (R9)
	VMOVUPS X4, 16(R9)
	VZEROUPPER
	RET

// func aff4x1VNNI(res *[8]float32, w *byte, sb *byte, act *actBlock, nb int, bpg int, sdt int)
TEXT ·aff4x1VNNI(SB), NOSPLIT, $128-56
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
	JB   aff4x1vnnitail

aff4x1vnniloop:
	TESTQ     R8, R8
	JNZ       aff4x1vnnib10have
	MOVQ      R11, R8 // a quantization group starts
	CMPQ      R12, $1
	JNE       aff4x1vnnib10bf16
	VCVTPH2PS (R10), X14
	VCVTPH2PS 8(R10), X15
	JMP       aff4x1vnnib10next

aff4x1vnnib10bf16:
	VPMOVZXWD (R10), X14
	VPSLLD    $16, X14, X14
	VPMOVZXWD 8(R10), X15
	VPSLLD    $16, X15, X15

aff4x1vnnib10next:
	ADDQ      $16, R10

aff4x1vnnib10have:
	DECQ      R8
	AROW(SI, 0)
	ATVNNI(SI, Y20, Y16)
	C4LO(0)
	SFVNNI(Y16, Y20, 0, Y0)
	C4LO(32)
	SFVNNI(Y16, Y20, 4, Y1)
	C4LO(64)
	SFVNNI(Y16, Y20, 8, Y2)
	C4LO(96)
	SFVNNI(Y16, Y20, 12, Y3)
	ADDQ $128, SI
	TESTQ     R8, R8
	JNZ       aff4x1vnnib11have
	MOVQ      R11, R8 // a quantization group starts
	CMPQ      R12, $1
	JNE       aff4x1vnnib11bf16
	VCVTPH2PS (R10), X14
	VCVTPH2PS 8(R10), X15
	JMP       aff4x1vnnib11next

aff4x1vnnib11bf16:
	VPMOVZXWD (R10), X14
	VPSLLD    $16, X14, X14
	VPMOVZXWD 8(R10), X15
	VPSLLD    $16, X15, X15

aff4x1vnnib11next:
	ADDQ      $16, R10

aff4x1vnnib11have:
	DECQ      R8
	AROW(SI, 0)
	ATVNNI(SI, Y20, Y16)
	C4HI(0)
	SFVNNI(Y16, Y20, 0, Y0)
	C4HI(32)
	SFVNNI(Y16, Y20, 4, Y1)
	C4HI(64)
	SFVNNI(Y16, Y20, 8, Y2)
	C4HI(96)
	SFVNNI(Y16, Y20, 12, Y3)
	ADDQ $128, SI
	ADDQ $128, DI
	SUBQ $2, CX
	JAE  aff4x1vnniloop

aff4x1vnnitail:
	CMPQ CX, $-1 // one block left
	JNE  aff4x1vnnidone
	TESTQ     R8, R8
	JNZ       aff4x1vnnib12have
	MOVQ      R11, R8 // a quantization group starts
	CMPQ      R12, $1
	JNE       aff4x1vnnib12bf16
	VCVTPH2PS (R10), X14
	VCVTPH2PS 8(R10), X15
	JMP       aff4x1vnnib12next

aff4x1vnnib12bf16:
	VPMOVZXWD (R10), X14
	VPSLLD    $16, X14, X14
	VPMOVZXWD 8(R10), X15
	VPSLLD    $16, X15, X15

aff4x1vnnib12next:
	ADDQ      $16, R10

aff4x1vnnib12have:
	DECQ      R8
	AROW(SI, 0)
	ATVNNI(SI, Y20, Y16)
	C4LO(0)
	SFVNNI(Y16, Y20, 0, Y0)
	C4LO(32)
	SFVNNI(Y16, Y20, 4, Y1)
	C4LO(64)
	SFVNNI(Y16, Y20, 8, Y2)
	C4LO(96)
	SFVNNI(Y16, Y20, 12, Y3)
	ADDQ $128, SI

aff4x1vnnidone:
	HSUM4(Y0, Y1, Y2, Y3, X0, X2)
	VMOVUPS X0, (R9)
	VZEROUPPER
	RET

// func aff4x2VNNI(res *[8]float32, w *byte, sb *byte, act *actBlock, nb int, bpg int, sdt int)
TEXT ·aff4x2VNNI(SB), NOSPLIT, $128-56
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
	JB   aff4x2vnnitail

aff4x2vnniloop:
	TESTQ     R8, R8
	JNZ       aff4x2vnnib13have
	MOVQ      R11, R8 // a quantization group starts
	CMPQ      R12, $1
	JNE       aff4x2vnnib13bf16
	VCVTPH2PS (R10), X14
	VCVTPH2PS 8(R10), X15
	JMP       aff4x2vnnib13next

aff4x2vnnib13bf16:
	VPMOVZXWD (R10), X14
	VPSLLD    $16, X14, X14
	VPMOVZXWD 8(R10), X15
	VPSLLD    $16, X15, X15

aff4x2vnnib13next:
	ADDQ      $16, R10

aff4x2vnnib13have:
	DECQ      R8
	AROW(SI, 0)
	ATVNNI(SI, Y20, Y16)
	AROW(BX, 32)
	ATVNNI(BX, Y21, Y17)
	C4LO(0)
	SFVNNI(Y16, Y20, 0, Y0)
	SFVNNI(Y17, Y21, 32, Y4)
	C4LO(32)
	SFVNNI(Y16, Y20, 4, Y1)
	SFVNNI(Y17, Y21, 36, Y5)
	C4LO(64)
	SFVNNI(Y16, Y20, 8, Y2)
	SFVNNI(Y17, Y21, 40, Y6)
	C4LO(96)
	SFVNNI(Y16, Y20, 12, Y3)
	SFVNNI(Y17, Y21, 44, Y7)
	ADDQ $128, SI
	ADDQ $128, BX
	TESTQ     R8, R8
	JNZ       aff4x2vnnib14have
	MOVQ      R11, R8 // a quantization group starts
	CMPQ      R12, $1
	JNE       aff4x2vnnib14bf16
	VCVTPH2PS (R10), X14
	VCVTPH2PS 8(R10), X15
	JMP       aff4x2vnnib14next

aff4x2vnnib14bf16:
	VPMOVZXWD (R10), X14
	VPSLLD    $16, X14, X14
	VPMOVZXWD 8(R10), X15
	VPSLLD    $16, X15, X15

aff4x2vnnib14next:
	ADDQ      $16, R10

aff4x2vnnib14have:
	DECQ      R8
	AROW(SI, 0)
	ATVNNI(SI, Y20, Y16)
	AROW(BX, 32)
	ATVNNI(BX, Y21, Y17)
	C4HI(0)
	SFVNNI(Y16, Y20, 0, Y0)
	SFVNNI(Y17, Y21, 32, Y4)
	C4HI(32)
	SFVNNI(Y16, Y20, 4, Y1)
	SFVNNI(Y17, Y21, 36, Y5)
	C4HI(64)
	SFVNNI(Y16, Y20, 8, Y2)
	SFVNNI(Y17, Y21, 40, Y6)
	C4HI(96)
	SFVNNI(Y16, Y20, 12, Y3)
	SFVNNI(Y17, Y21, 44, Y7)
	ADDQ $128, SI
	ADDQ $128, BX
	ADDQ $128, DI
	SUBQ $2, CX
	JAE  aff4x2vnniloop

aff4x2vnnitail:
	CMPQ CX, $-1 // one block left
	JNE  aff4x2vnnidone
	TESTQ     R8, R8
	JNZ       aff4x2vnnib15have
	MOVQ      R11, R8 // a quantization group starts
	CMPQ      R12, $1
	JNE       aff4x2vnnib15bf16
	VCVTPH2PS (R10), X14
	VCVTPH2PS 8(R10), X15
	JMP       aff4x2vnnib15next

aff4x2vnnib15bf16:
	VPMOVZXWD (R10), X14
	VPSLLD    $16, X14, X14
	VPMOVZXWD 8(R10), X15
	VPSLLD    $16, X15, X15

aff4x2vnnib15next:
	ADDQ      $16, R10

aff4x2vnnib15have:
	DECQ      R8
	AROW(SI, 0)
	ATVNNI(SI, Y20, Y16)
	AROW(BX, 32)
	ATVNNI(BX, Y21, Y17)
	C4LO(0)
	SFVNNI(Y16, Y20, 0, Y0)
	SFVNNI(Y17, Y21, 32, Y4)
	C4LO(32)
	SFVNNI(Y16, Y20, 4, Y1)
	SFVNNI(Y17, Y21, 36, Y5)
	C4LO(64)
	SFVNNI(Y16, Y20, 8, Y2)
	SFVNNI(Y17, Y21, 40, Y6)
	C4LO(96)
	SFVNNI(Y16, Y20, 12, Y3)
	SFVNNI(Y17, Y21, 44, Y7)
	ADDQ $128, SI
	ADDQ $128, BX

aff4x2vnnidone:
	HSUM4(Y0, Y1, Y2, Y3, X0, X2)
	HSUM4(Y4, Y5, Y6, Y7, X4, X6)
	VMOVUPS X0, (R9)
	VMOVUPS X4, 16(R9)
	VZEROUPPER
	RET
