// The dialect for CUDA C, compiled by NVRTC. Kernel signatures are emitted by the generator
// (kernels.go); bodies use only the names defined here and in common.h.
typedef unsigned int uint;
typedef unsigned short ushort;
typedef unsigned long long ulong;

// Threads: one block is one threadgroup. Indices are ints so that body arithmetic stays signed.
#define GROUP_X ((int)blockIdx.x)
#define GROUP_Y ((int)blockIdx.y)
#define LOCAL_X ((int)threadIdx.x)
#define GROUP_SIZE_X ((int)blockDim.x)
#define LANE (LOCAL_X & 31)
#define WARP (LOCAL_X >> 5)

// Memory and synchronisation.
#define GLOBAL
#define SHARED __shared__
#define BARRIER() __syncthreads()
#define SHFL_XOR(v, m) __shfl_xor_sync(0xffffffffu, (v), (m))
#define VLOAD(T, p) (*(const T*)(p))
#define FUNC static __device__ __forceinline__
#define UNROLL _Pragma("unroll")

// Arithmetic with the rounding spelled out: the _rn intrinsics are never contracted into fused
// multiply-adds, so each kernel's order of operations is exactly the one written.
#define FMA(a, b, c) __fmaf_rn((a), (b), (c))
#define MUL(a, b) __fmul_rn((a), (b))
#define ADD(a, b) __fadd_rn((a), (b))
#define SUB(a, b) __fsub_rn((a), (b))
#define DIV(a, b) __fdiv_rn((a), (b))
#define FMAX(a, b) fmaxf((a), (b))
#define EXP(x) expf(x)
// As the CPU backend: the F64 function of the F32 argument, rounded once to F32.
#define COS(a) ((float)cos((double)(a)))
#define SIN(a) ((float)sin((double)(a)))
#define RSQRT(v) ((float)(1.0 / sqrt((double)(v))))
#define NEG_INF __int_as_float(0xff800000)
#define AS_FLOAT(u) __uint_as_float(u)
// Round to an integer, ties to even (the default rounding mode).
// Ask for the 128-byte line holding p in L2, ahead of its loads (a hint: it changes no result).
#define PREFETCH_L2(p) asm volatile("prefetch.global.L2 [%0];" ::"l"(p))
#define RINT(x) rintf(x)
// The sum of the four products of the signed bytes of a and b, exactly (quantized weights).
#define DOT4_I8(a, b) __dp4a((int)(a), (int)(b), 0)

FUNC float f16_to_f32(ushort h) {
	float f;
	asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
	return f;
}

// The error word: [code, a, b, unused]. The first report wins.
#define ERRPTR int*
FUNC void report(ERRPTR err, int code, int a, int b) {
	if (atomicCAS(err, 0, code) == 0) {
		err[1] = a;
		err[2] = b;
	}
}
