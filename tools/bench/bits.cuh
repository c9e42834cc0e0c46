// bits.cuh: the random numbers of the bit-for-bit GPU checks (wgmma_bits.cu, mma_swap_bits.cu):
// a hash of the draw's index, so every thread makes its own numbers with no state.
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
