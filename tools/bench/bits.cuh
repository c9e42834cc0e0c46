// bits.cuh: the random numbers of the GPU programs here (wgmma_bits.cu, wgmma_swap_bits.cu,
// mma_swap_bits.cu, onerow.cu, persistent.cu, wgb.cu): a hash of the draw's index, so every thread
// makes its own numbers with no state; and the helpers several of them use: CHECK, random BF16s,
// BF16 pairs, the m16n8k16 BF16 MMA, shared-memory addresses, random BF16 weights and a plain read.
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstdlib>

// CHECK ends the program, naming the call and CUDA's error, where a runtime call fails.
#define CHECK(x)                                                                                \
	do {                                                                                        \
		cudaError_t e_ = (x);                                                                   \
		if (e_ != cudaSuccess) {                                                                \
			fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
			exit(1);                                                                            \
		}                                                                                       \
	} while (0)

__device__ inline uint32_t mix(uint32_t x) {
	x ^= x >> 16;
	x *= 0x7feb352du;
	x ^= x >> 15;
	x *= 0x846ca68bu;
	x ^= x >> 16;
	return x;
}

// rbf16 is a BF16 of random sign and mantissa, its exponent 127 ± spread; bf its value; pack
// two BF16s into a pair, lo in the low half.
__device__ inline uint16_t rbf16(uint32_t h, int spread) {
	uint32_t r = mix(h);
	int e = 127 + (int)(r % (2 * spread + 1)) - spread;
	return (uint16_t)(((r >> 31) << 15) | (e << 7) | ((r >> 8) & 0x7f));
}
__device__ inline float bf(uint16_t v) { return __uint_as_float((uint32_t)v << 16); }
__device__ inline uint32_t pack(uint16_t lo, uint16_t hi) { return (uint32_t)lo | ((uint32_t)hi << 16); }

// The bit checks' cases (wgmma_bits.cu, wgmma_swap_bits.cu): the octaves the operands' exponents
// spread over, and the accumulators'; and farFrom, whether got is farther from a double-precision
// exact sum than the MMA's own rounding allows with operands spread over `spread` octaves (beyond
// 2^(2·spread − 10) plus 1e-3 of the sum means a layout, not a rounding, is wrong).
struct spreads {
	int spread, cspread;
};
constexpr spreads kSpreads[] = {{0, 0}, {3, 3}, {8, 8}, {20, 20}, {8, 30}, {30, 2}};
__device__ inline bool farFrom(float got, double exact, int spread) {
	return fabs((double)got - exact) > 1e-3 * (fabs(exact) + 1e-30) + ldexp(1.0, 2 * spread - 10);
}

// bf16pair is a and b rounded to BF16 (to nearest, ties to even), a in the low half.
__device__ __forceinline__ uint32_t bf16pair(float a, float b) {
	uint32_t d;
	asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(b), "f"(a));
	return d;
}

// mma adds A·B to the 16 × 8 F32 tile c: mma.sync.m16n8k16, BF16 operands in registers.
__device__ __forceinline__ void mma(float* c, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1) {
	asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
	             : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
	             : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// saddr is p's address in the shared window, as cp.async takes it.
__device__ __forceinline__ uint32_t saddr(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }

// fillBF16 writes n16 × 8 random BF16s to w: exponents lo … lo + span − 1 (no infinities, no
// NaNs for lo + span ≤ 255), random sign and mantissa.
__global__ void fillBF16(uint4* w, size_t n16, uint32_t seed, uint32_t lo, uint32_t span) {
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n16; i += (size_t)gridDim.x * blockDim.x) {
		uint32_t h = mix(seed ^ (uint32_t)i ^ (uint32_t)(i >> 32) * 0x9e3779b9u);
		auto bf = [=](uint32_t r) { return (uint32_t)(((r >> 15) & 1) << 15 | (lo + r % span) << 7 | ((r >> 4) & 0x7f)); };
		uint32_t r0 = mix(h), r1 = mix(r0), r2 = mix(r1), r3 = mix(r2);
		w[i] = make_uint4(bf(r0) | bf(r0 >> 8) << 16, bf(r1) | bf(r1 >> 8) << 16, bf(r2) | bf(r2 >> 8) << 16, bf(r3) | bf(r3 >> 8) << 16);
	}
}

// stream reads every uint4 of w once with the whole grid, keeping nothing: the plain read rate
// of a matrix's bytes, the ceiling a one-row matmul is measured against.
__global__ void stream(const uint4* w, size_t n16, float* dst) {
	uint32_t s = 0;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n16; i += (size_t)gridDim.x * blockDim.x) {
		uint4 v = __ldg(w + i);
		s ^= v.x ^ v.y ^ v.z ^ v.w;
	}
	if (s == 0x12345678u) dst[0] = 1;
}
