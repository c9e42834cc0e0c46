// bits.cuh: the random numbers of the GPU programs here (wgmma_bits.cu, mma_swap_bits.cu,
// onerow.cu, persistent.cu): a hash of the draw's index, so every thread makes its own numbers
// with no state; and what the one-row programs share, random BF16 weights and a plain read.
#pragma once
#include <cstdint>

__device__ inline uint32_t mix(uint32_t x) {
	x ^= x >> 16;
	x *= 0x7feb352du;
	x ^= x >> 15;
	x *= 0x846ca68bu;
	x ^= x >> 16;
	return x;
}

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
