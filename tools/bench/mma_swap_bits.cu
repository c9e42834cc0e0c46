// mma_swap_bits asks whether mma.sync.m16n8k16 (BF16 operands, F32 accumulators) gives the same
// bits when its operands trade places: tfd's tile takes 16 weight rows as A and 8 rows of x as B;
// a tile of 8 outputs would take x as A (16 rows) and 8 weight rows as B. If every output agrees
// bit for bit, a one-row matmul may cut its tiles to 8 outputs, twice the groups on the same
// matrix, and keep tfd's bits (docs/performance.md). On the GPU machine:
//
//   nvcc -O3 -arch=sm_90a -o /tmp/mma_swap_bits tools/bench/mma_swap_bits.cu && /tmp/mma_swap_bits
//
// Each warp draws its own tile: W 16 outputs by 32·STEPS of K in BF16 and x 16 rows by the same K
// in F32, of random sign, mantissa and an exponent spread over ±SPREAD octaves, and C in F32
// likewise. Way one is tfd's (prelude.cuh, tfd_mma_step): x split into hi and lo, four MMAs a
// chunk, A = W, for x's rows 0-7 and again for 8-15. Way two runs the same steps with A = x (16
// rows) and B = W's rows 0-7, then 8-15. Every output is compared bit for bit.
#include <cstdint>
#include <cstdio>
#include <cuda_runtime.h>

#include "bits.cuh"

constexpr int STEPS = 8;

__device__ float rf(uint32_t h, int spread) {
	uint32_t r = mix(h);
	int e = 127 + (int)(r % (2 * spread + 1)) - spread;
	return __uint_as_float(((r >> 31) << 31) | (e << 23) | (mix(r) & 0x7fffff));
}

__global__ void compare(int spread, int cspread, uint32_t seed, unsigned long long* bad, unsigned long long* total) {
	int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
	uint32_t base = mix(seed ^ mix(blockIdx.x * 8 + threadIdx.x / 32));
	// Lane l's share of chunk s: W rows g and g+8, x rows g and g+8, elements 8t … 8t+7 of the
	// chunk (tfd's packed order).
	float d1[2][4], d2[2][4]; // way one: [x rows 0-7, 8-15][(out g, row 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1)]
	// way two: [W rows 0-7, 8-15][(row g, out 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1)]
	// Same C for the same (output, row): C(o, r) drawn by index.
	auto cOf = [&](int o, int r) { return rf(base ^ 0x5bd1e995u ^ (o * 16 + r), cspread); };
	for (int i = 0; i < 2; i++) {
		d1[i][0] = cOf(g, 8 * i + 2 * t), d1[i][1] = cOf(g, 8 * i + 2 * t + 1);
		d1[i][2] = cOf(g + 8, 8 * i + 2 * t), d1[i][3] = cOf(g + 8, 8 * i + 2 * t + 1);
		d2[i][0] = cOf(8 * i + 2 * t, g), d2[i][1] = cOf(8 * i + 2 * t + 1, g);
		d2[i][2] = cOf(8 * i + 2 * t, g + 8), d2[i][3] = cOf(8 * i + 2 * t + 1, g + 8);
	}
	for (int s = 0; s < STEPS; s++) {
		uint32_t w[2][4], xhi[2][4], xlo[2][4]; // [row g, g+8][pair p: elements 8t+2p, 8t+2p+1]
		for (int h = 0; h < 2; h++) {
			for (int p = 0; p < 4; p++) {
				int k = 32 * s + 8 * t + 2 * p;
				uint32_t wr = base + 7919u * (g + 8 * h) + 131u * k;
				w[h][p] = bf16pair(rf(wr, spread), rf(wr + 1, spread));
				uint32_t xr = (base ^ 0x9e3779b9u) + 7919u * (g + 8 * h) + 131u * k;
				float x0 = rf(xr, spread), x1 = rf(xr + 1, spread);
				uint32_t hi = bf16pair(x0, x1);
				xhi[h][p] = hi;
				xlo[h][p] = bf16pair(__fsub_rn(x0, __uint_as_float(hi << 16)), __fsub_rn(x1, __uint_as_float(hi & 0xffff0000u)));
			}
		}
		// Way one, as tfd_mma_step: hi and lo of pairs 0-1, then of pairs 2-3.
		for (int i = 0; i < 2; i++) {
			for (int q = 0; q < 2; q++) {
				mma(d1[i], w[0][2 * q], w[1][2 * q], w[0][2 * q + 1], w[1][2 * q + 1], xhi[i][2 * q], xhi[i][2 * q + 1]);
				mma(d1[i], w[0][2 * q], w[1][2 * q], w[0][2 * q + 1], w[1][2 * q + 1], xlo[i][2 * q], xlo[i][2 * q + 1]);
			}
		}
		// Way two: A = x (rows g and g+8), B = W rows 8i + g.
		for (int i = 0; i < 2; i++) {
			for (int q = 0; q < 2; q++) {
				mma(d2[i], xhi[0][2 * q], xhi[1][2 * q], xhi[0][2 * q + 1], xhi[1][2 * q + 1], w[i][2 * q], w[i][2 * q + 1]);
				mma(d2[i], xlo[0][2 * q], xlo[1][2 * q], xlo[0][2 * q + 1], xlo[1][2 * q + 1], w[i][2 * q], w[i][2 * q + 1]);
			}
		}
	}
	// Lane (g, t) of way one holds (out g / g+8, rows 8i+2t, +1); way two's (out 8i+2t / +1, row
	// g / g+8) lives in another lane: gather through shared memory.
	__shared__ float s1[8][16][16], s2[8][16][16]; // [warp][out][row]
	int wp = threadIdx.x / 32;
	for (int i = 0; i < 2; i++) {
		s1[wp][g][8 * i + 2 * t] = d1[i][0], s1[wp][g][8 * i + 2 * t + 1] = d1[i][1];
		s1[wp][g + 8][8 * i + 2 * t] = d1[i][2], s1[wp][g + 8][8 * i + 2 * t + 1] = d1[i][3];
		s2[wp][8 * i + 2 * t][g] = d2[i][0], s2[wp][8 * i + 2 * t + 1][g] = d2[i][1];
		s2[wp][8 * i + 2 * t][g + 8] = d2[i][2], s2[wp][8 * i + 2 * t + 1][g + 8] = d2[i][3];
	}
	__syncwarp();
	unsigned long long b = 0;
	for (int e = lane; e < 256; e += 32) b += __float_as_uint(s1[wp][e / 16][e % 16]) != __float_as_uint(s2[wp][e / 16][e % 16]);
	atomicAdd(bad, b);
	atomicAdd(total, 8ull); // a lane's eight of the warp's 256
}

int main() {
	unsigned long long *bad, *total;
	cudaMallocManaged(&bad, 8);
	cudaMallocManaged(&total, 8);
	int spreads[][2] = {{0, 0}, {8, 8}, {30, 30}, {30, 0}, {2, 40}};
	unsigned long long all = 0;
	for (auto& sp : spreads) {
		*bad = *total = 0;
		for (uint32_t seed = 1; seed <= 16; seed++) compare<<<4096, 256>>>(sp[0], sp[1], seed * 2654435761u, bad, total);
		cudaError_t err = cudaDeviceSynchronize();
		if (err != cudaSuccess) {
			printf("cuda: %s\n", cudaGetErrorString(err));
			return 1;
		}
		printf("spread ±%d, C ±%d: %llu of %llu outputs differ (%llu tiles of 16×16, %d chunks each)\n", sp[0], sp[1], *bad, *total, *total / 256, STEPS);
		all += *bad;
	}
	printf(all ? "DIFFERENT BITS\n" : "same bits\n");
	return all != 0;
}
