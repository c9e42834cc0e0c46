// Shared by qaffine_avx2_amd64.s and qaffine_vnni_amd64.s: constants and macros.

// Kernels for 4- and 8-bit MLX affine weights with F16 or BF16 scales; see qkernels.go and
// qkernels_amd64.go for their contracts, and qblock_amd64.h for the ways to integer sums they
// share with the Q8_0 and Q4_0 kernels. Per block and lane, package quant's lane order: lane = fma(scale·d_x, s, lane), then
// lane = fma(bias·d_x, t, lane), where s is the exact integer sum of code × activation quant over
// the lane's four elements and t the sum of the activation quants (−m8/8, converted exactly). The
// four rows' scales and biases are widened when a quantization group starts (sdt: 1 F16, 2 BF16).
// The codes are unsigned: VPDPBUSD takes them as they are; AVX2's VPMADDUBSW takes 4-bit codes as
// they are, and 8-bit ones less 128 with the sign trick, 128·t added back (−m128).
//
// Registers: DI the codes, R10 the scales and biases, SI (and BX) the activation block of row 0
// (and 1), CX the blocks left, R8 the blocks left in the quantization group, R11 the blocks a
// group, R12 sdt, R9 res. Y0–Y3 (Y4–Y7) the lanes of row 0 (1), X14 and X15 the group's scales and
// biases, Y10 a column's codes, Y11 the nibble mask (4 bits) or |codes − 128| (8 bits, AVX2). The
// stack holds each row's four combined scales (at 32r) and biases (at 32r+16), and in the AVX2
// kernels its t (at 64+32r); the VNNI kernels keep t in Y20 (Y21) and the quants in Y16 (Y17).

DATA minus8th<>+0(SB)/8, $0xbe000000be000000
DATA minus8th<>+8(SB)/8, $0xbe000000be000000
DATA minus8th<>+16(SB)/8, $0xbe000000be000000
DATA minus8th<>+24(SB)/8, $0xbe000000be000000
GLOBL minus8th<>(SB), RODATA|NOPTR, $32

DATA affones<>+0(SB)/8, $0x0001000100010001
DATA affones<>+8(SB)/8, $0x0001000100010001
DATA affones<>+16(SB)/8, $0x0001000100010001
DATA affones<>+24(SB)/8, $0x0001000100010001
GLOBL affones<>(SB), RODATA|NOPTR, $32

DATA affmask<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA affmask<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA affmask<>+16(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA affmask<>+24(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL affmask<>(SB), RODATA|NOPTR, $32

DATA aff80<>+0(SB)/8, $0x8080808080808080
DATA aff80<>+8(SB)/8, $0x8080808080808080
DATA aff80<>+16(SB)/8, $0x8080808080808080
DATA aff80<>+24(SB)/8, $0x8080808080808080
GLOBL aff80<>(SB), RODATA|NOPTR, $32

// AROW prepares activation row r (at ra): its four combined scales and biases on the stack, its
// quants and t where the kernel keeps them (see ATAVX2 and ATVNNI).
#define AROW(ra, soff) \
	VBROADCASTSS 96(ra), X13; \
	VMULPS       X13, X14, X12; \
	VMOVUPS      X12, soff(SP); \
	VMULPS       X13, X15, X12; \
	VMOVUPS      X12, soff+16(SP); \
	VCVTDQ2PS    32(ra), Y12
#define ATAVX2(ra, toff, x) \
	VMULPS  minus8th<>(SB), Y12, Y12; \
	VMOVUPS Y12, toff(SP); \
	VMOVDQU (ra), x
#define ATVNNI(ra, t, x) \
	VMULPS    minus8th<>(SB), Y12, t; \
	VMOVDQU32 (ra), x

// Codes of column c into Y10: 8 bits (AVX2: less 128, and their magnitudes in Y11), 4 bits from
// the low or the high nibbles.
#define C8AVX2(woff) \
	VMOVDQU woff(DI), Y10; \
	VPXOR   aff80<>(SB), Y10, Y10; \
	VPSIGNB Y10, Y10, Y11
#define C8VNNI(woff) \
	VMOVDQU woff(DI), Y10
#define C4LO(woff) \
	VPAND woff(DI), Y11, Y10
#define C4HI(woff) \
	VMOVDQU woff(DI), Y10; \
	VPSRLW  $4, Y10, Y10; \
	VPAND   Y11, Y10, Y10

// S8AVX2 and S4AVX2: the lane sums of row ra (quants in x) against Y10, into Y12.
#define S8AVX2(x, ra) \
	VPSIGNB    Y10, x, Y12; \
	VPMADDUBSW Y12, Y11, Y12; \
	VPMADDWD   affones<>(SB), Y12, Y12; \
	VPSUBD     64(ra), Y12, Y12
#define S4AVX2(x, ra) \
	VPMADDUBSW x, Y10, Y12; \
	VPMADDWD   affones<>(SB), Y12, Y12

// FAVX2 and FVNNI: the two multiply-adds of a lane vector in Y12 into acc, scale then bias.
#define FAVX2(soff, toff, acc) \
	VCVTDQ2PS    Y12, Y12; \
	VBROADCASTSS soff(SP), Y13; \
	VFMADD231PS  Y13, Y12, acc; \
	VBROADCASTSS soff+16(SP), Y13; \
	VFMADD231PS  toff(SP), Y13, acc
#define SFVNNI(x, t, soff, acc) \
	VPXOR            Y12, Y12, Y12; \
	VPDPBUSD         x, Y10, Y12; \
	VCVTDQ2PS        Y12, Y12; \
	VFMADD231PS.BCST soff(SP), Y12, acc; \
	VFMADD231PS.BCST soff+16(SP), t, acc
