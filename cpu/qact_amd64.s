#include "textflag.h"

// Activation quantization, QuantizeBlock's arithmetic eight lanes at a time: the largest |x|
// (VMAXPS, after checking that every |x| is finite), d = amax/127 and 1/d by scalar divisions, the
// quants x·(1/d) converted with VCVTPS2DQ, which rounds to nearest even as MXCSR is left by Go;
// the lane sums t by two VPHADDD and a VPERMD into lane order, stored as −8·t and −128·t, and
// their sum T as −128·T and −8·T; the
// quants packed to bytes (VPACKSSDW, VPACKSSWB) and put back in order by the same VPERMD. A block
// with a NaN or an infinity gets zero quants and a NaN scale.

DATA absmask<>+0(SB)/8, $0x7fffffff7fffffff
DATA absmask<>+8(SB)/8, $0x7fffffff7fffffff
DATA absmask<>+16(SB)/8, $0x7fffffff7fffffff
DATA absmask<>+24(SB)/8, $0x7fffffff7fffffff
GLOBL absmask<>(SB), RODATA|NOPTR, $32

DATA maxfinite<>+0(SB)/8, $0x7f7fffff7f7fffff
DATA maxfinite<>+8(SB)/8, $0x7f7fffff7f7fffff
DATA maxfinite<>+16(SB)/8, $0x7f7fffff7f7fffff
DATA maxfinite<>+24(SB)/8, $0x7f7fffff7f7fffff
GLOBL maxfinite<>(SB), RODATA|NOPTR, $32

// The dword order that undoes VPHADDD's and VPACKSS's interleaving of 128-bit lanes.
DATA lanefix<>+0(SB)/8, $0x0000000400000000
DATA lanefix<>+8(SB)/8, $0x0000000500000001
DATA lanefix<>+16(SB)/8, $0x0000000600000002
DATA lanefix<>+24(SB)/8, $0x0000000700000003
GLOBL lanefix<>(SB), RODATA|NOPTR, $32

DATA qconst<>+0(SB)/4, $0x42fe0000 // 127
DATA qconst<>+4(SB)/4, $0x3f800000 // 1
DATA qconst<>+8(SB)/4, $0x7fc00000 // NaN
GLOBL qconst<>(SB), RODATA|NOPTR, $12

// func quantizeActsAVX2(dst *actBlock, x *float32, nb int)
TEXT ·quantizeActsAVX2(SB), NOSPLIT, $0-24
	MOVQ    dst+0(FP), DI
	MOVQ    x+8(FP), SI
	MOVQ    nb+16(FP), CX
	VMOVDQU lanefix<>(SB), Y15
	VMOVUPS absmask<>(SB), Y14

qablock:
	VMOVUPS (SI), Y0
	VMOVUPS 32(SI), Y1
	VMOVUPS 64(SI), Y2
	VMOVUPS 96(SI), Y3
	VANDPS  Y14, Y0, Y4
	VANDPS  Y14, Y1, Y5
	VANDPS  Y14, Y2, Y6
	VANDPS  Y14, Y3, Y7

	// Every |x| ≤ the largest finite float (false for NaN and infinity)?
	VMOVUPS   maxfinite<>(SB), Y13
	VCMPPS    $2, Y13, Y4, Y8 // LE
	VCMPPS    $2, Y13, Y5, Y9
	VANDPS    Y9, Y8, Y8
	VCMPPS    $2, Y13, Y6, Y9
	VANDPS    Y9, Y8, Y8
	VCMPPS    $2, Y13, Y7, Y9
	VANDPS    Y9, Y8, Y8
	VMOVMSKPS Y8, AX
	CMPQ      AX, $0xff
	JNE       qanan

	VMAXPS       Y5, Y4, Y4
	VMAXPS       Y7, Y6, Y6
	VMAXPS       Y6, Y4, Y4
	VEXTRACTF128 $1, Y4, X5
	VMAXPS       X5, X4, X4
	VPERMILPS    $0x4e, X4, X5
	VMAXPS       X5, X4, X4
	VPERMILPS    $0xb1, X4, X5
	VMAXPS       X5, X4, X4 // amax in every lane

	VDIVSS       qconst<>+0(SB), X4, X4 // d = amax/127
	VMOVSS       X4, 96(DI)
	VXORPS       X5, X5, X5
	VUCOMISS     X5, X4
	JEQ          qazero
	VMOVSS       qconst<>+4(SB), X5
	VDIVSS       X4, X5, X5             // 1/d

qazero:
	VBROADCASTSS X5, Y5
	VMULPS       Y5, Y0, Y0
	VMULPS       Y5, Y1, Y1
	VMULPS       Y5, Y2, Y2
	VMULPS       Y5, Y3, Y3
	VCVTPS2DQ    Y0, Y0
	VCVTPS2DQ    Y1, Y1
	VCVTPS2DQ    Y2, Y2
	VCVTPS2DQ    Y3, Y3

	// Lane sums t[k] = q[4k]+…+q[4k+3].
	VPHADDD Y1, Y0, Y4
	VPHADDD Y3, Y2, Y5
	VPHADDD Y5, Y4, Y4
	VPERMD  Y4, Y15, Y4
	VPSLLD  $3, Y4, Y5
	VPSLLD  $7, Y4, Y6
	VPXOR   Y7, Y7, Y7
	VPSUBD  Y5, Y7, Y5
	VPSUBD  Y6, Y7, Y6
	VMOVDQU Y5, 32(DI)
	VMOVDQU Y6, 64(DI)

	// The block's sum T of the lane sums, stored as −128·T and −8·T.
	VEXTRACTI128 $1, Y4, X8
	VPADDD       X8, X4, X8
	VPSHUFD      $0x4e, X8, X9
	VPADDD       X9, X8, X8
	VPSHUFD      $0xb1, X8, X9
	VPADDD       X9, X8, X8
	VPSLLD       $7, X8, X9
	VPSLLD       $3, X8, X10
	VPSUBD       X9, X7, X9
	VPSUBD       X10, X7, X10
	VMOVD        X9, 100(DI)
	VMOVD        X10, 104(DI)

	// The quants as bytes, in order.
	VPACKSSDW Y1, Y0, Y0
	VPACKSSDW Y3, Y2, Y2
	VPACKSSWB Y2, Y0, Y0
	VPERMD    Y0, Y15, Y0
	VMOVDQU   Y0, (DI)

qanext:
	ADDQ $128, DI
	ADDQ $128, SI
	DECQ CX
	JNZ  qablock
	VZEROUPPER
	RET

qanan:
	VXORPS  Y0, Y0, Y0
	VMOVDQU Y0, (DI)
	VMOVDQU Y0, 32(DI)
	VMOVDQU Y0, 64(DI)
	VMOVSS  qconst<>+8(SB), X0
	VMOVSS  X0, 96(DI)
	MOVQ    $0, 100(DI)
	JMP     qanext
