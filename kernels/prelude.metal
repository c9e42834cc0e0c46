// The dialect for Metal Shading Language, written to the MSL specification. Not yet compiled by
// Apple's compiler: on Linux it is compiled by clang against a shim and run on the CPU (see
// README.md, "What is verified"). Compile with fast math off (MTLMathModeSafe) so that the bodies'
// explicit operations keep their order.
#include <metal_stdlib>
using namespace metal;

// Even with fast math off, Metal may contract a*b+c into a fused multiply-add; the kernels' MUL
// and ADD must round separately, as on the CPU and CUDA (where the _rn intrinsics ensure it).
#pragma METAL fp contract(off)

// Threads: the generator appends to a kernel's parameters the thread-position arguments its body
// reads (tfd_group, tfd_local, tfd_size, tfd_lane, tfd_simd; kernels.go). LANE and WARP are
// Metal's own SIMD-group indices, not derived from the thread index; the kernels' butterflies and
// per-warp slots still assume SIMD groups of 32, as on every Apple GPU, so a backend must check
// that a pipeline's threadExecutionWidth is 32.
#define GROUP_X ((int)tfd_group.x)
#define GROUP_Y ((int)tfd_group.y)
#define LOCAL_X ((int)tfd_local.x)
#define GROUP_SIZE_X ((int)tfd_size.x)
#define LANE ((int)tfd_lane)
#define WARP ((int)tfd_simd)

// Memory and synchronisation.
#define GLOBAL device
#define SHARED threadgroup
#define BARRIER() threadgroup_barrier(mem_flags::mem_threadgroup)
#define SHFL_XOR(v, m) simd_shuffle_xor((v), (ushort)(m))
#define VLOAD(T, p) (*(const device T*)(p))
#define FUNC static inline
#define UNROLL _Pragma("unroll")

// Arithmetic. Metal has no F64: COS, SIN and RSQRT use the precise F32 functions, which may
// differ from the CUDA and CPU backends in the last bit.
#define FMA(a, b, c) fma((a), (b), (c))
#define MUL(a, b) ((a) * (b))
#define ADD(a, b) ((a) + (b))
#define SUB(a, b) ((a) - (b))
#define DIV(a, b) ((a) / (b))
#define FMAX(a, b) fmax((a), (b))
#define EXP(x) precise::exp(x)
#define COS(a) precise::cos(a)
#define SIN(a) precise::sin(a)
#define RSQRT(v) (1.0f / precise::sqrt(v))
#define NEG_INF (-INFINITY)
#define AS_FLOAT(u) as_type<float>((uint)(u))
// Round to an integer, ties to even.
// Metal has no prefetch instruction: a hint left out, which changes no result.
#define PREFETCH_L2(p) ((void)(p))
#define RINT(x) rint(x)
// The sum of the four products of the signed bytes of a and b, exactly (quantized weights).
#define DOT4_I8(a, b) tfd_dot4_i8((uint)(a), (uint)(b))

FUNC float f16_to_f32(ushort h) {
	return float(as_type<half>(h));
}

// Metal has no four-way byte dot product: each byte is sign-extended and the products summed.
FUNC int tfd_dot4_i8(uint a, uint b) {
	int s = 0;
	for (int i = 0; i < 4; i++) s += (as_type<int>(a << (24 - 8 * i)) >> 24) * (as_type<int>(b << (24 - 8 * i)) >> 24);
	return s;
}

// The error word: [code, a, b, unused]. The first report wins. MSL has only the weak
// compare-and-swap, which may fail spuriously: it is retried while the code is still 0.
#define ERRPTR device atomic_int*
FUNC void report(ERRPTR err, int code, int a, int b) {
	int expected = 0;
	while (!atomic_compare_exchange_weak_explicit(err, &expected, code, memory_order_relaxed, memory_order_relaxed)) {
		if (expected != 0) return; // another report won
	}
	atomic_store_explicit(err + 1, a, memory_order_relaxed);
	atomic_store_explicit(err + 2, b, memory_order_relaxed);
}
