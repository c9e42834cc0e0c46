// wgmma_swap_bits asks whether Hopper's warpgroup MMA gives tfd's bits with its operands traded:
// x's rows as the MMA's M (A) and the weights' outputs as its N (B, from shared memory), where
// tfd's kernels put the weights in A (mma.sync's 16 rows, wgmma's 64) and x in B. A tile that
// reads each chunk of weights once a block from shared memory, as wgmma's B, shared by every row
// of x the block holds, needs that (docs/performance.md, the twenty-ninth and thirtieth sessions).
// wgmma_bits.cu found wgmma adding as mma.sync does with the roles as tfd has them, and
// mma_swap_bits.cu mma.sync giving the same bits with its own operands traded; this asks the
// remaining pairing. On the GPU machine:
//
//   nvcc -O3 -gencode arch=compute_90a,code=sm_90a -o /tmp/wgmma_swap_bits tools/bench/wgmma_swap_bits.cu && /tmp/wgmma_swap_bits
//
// Each block is one warpgroup with its own random tile: weights W of 64 outputs by 16 k and rows
// X of 64 rows by 16 k a step, BF16 of random sign, mantissa and an exponent spread over ±SPREAD
// octaves, and a starting accumulator C of 64 × 64 in F32 likewise, through STEPS chained k16
// steps (as tfd's four MMAs a chunk). Three ways: mma.sync with W as A (each warp 16 outputs, eight
// tiles of 8 rows: tfd's own), wgmma m64n64k16 with X as A and W as B both from shared memory,
// and the same with X as A from registers. Every output (o, r) of each traded way is compared bit
// for bit with mma.sync's, and each way with a double-precision sum as a check of the layouts.
#include <cstdint>
#include <cstdio>
#include <cuda_runtime.h>

#include "bits.cuh"
#include "wgmma.cuh"

constexpr int STEPS = 4;

// A 64 × 16 operand in shared memory, K-major without swizzle: 8×8 core matrices of 128
// contiguous bytes, core (i/8, k/8) at (i/8)·256 + (k/8)·128 bytes. W and X are both laid out so.
__device__ int at(int i, int k) { return (i / 8) * 128 + (k / 8) * 64 + (i % 8) * 8 + (k % 8); }

// wg64s adds the step of 64 × 16 operands a and b, both laid out by at, to d.
__device__ void wg64s(float* d, const uint16_t* a, const uint16_t* b) { wgs64(d, desc(saddr(a), 128, 256), desc(saddr(b), 128, 256), 1); }

__device__ void commitWait() {
	wgCommit();
	wgWait<0>();
}

// A thread's 32 accumulators of an m64n64 tile, in mma.sync's layout tile by tile: element 4j + e
// is (row 16·warp + g + 8·(e/2), column 8j + 2t + e%2). For mma.sync with W as A, rows are outputs
// and columns rows of X; for the traded wgmma, rows are rows of X and columns outputs.
__device__ int rowOf(int warp, int g, int e) { return 16 * warp + g + 8 * (e / 2); }
__device__ int colOf(int j, int t, int e) { return 8 * j + 2 * t + e % 2; }

// outs is the block's scratch of 3 × 64 × 64 floats: each way's outputs by (o, r).
__global__ void compare(int spread, int cspread, uint32_t seed, float* outs, unsigned long long* bad, unsigned long long* far, float* first) {
	__shared__ __align__(128) uint16_t W[STEPS][64 * 16];
	__shared__ __align__(128) uint16_t X[STEPS][64 * 16];
	__shared__ float C[64 * 64]; // C[o·64 + r]
	float* ref = outs + (size_t)blockIdx.x * 3 * 4096;
	float* swp = ref + 4096;
	float* swr = swp + 4096;
	int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
	uint32_t base = mix(seed ^ mix(blockIdx.x));
	for (int s = 0; s < STEPS; s++) {
		for (int i = tid; i < 64 * 16; i += 128) W[s][at(i / 16, i % 16)] = rbf16(base + 1000003u * s + i, spread);
		for (int i = tid; i < 64 * 16; i += 128) X[s][at(i / 16, i % 16)] = rbf16((base ^ 0x9e3779b9u) + 7919u * s + i, spread);
	}
	for (int i = tid; i < 64 * 64; i += 128) {
		uint32_t r = mix(base + 0x51ed27u + i);
		C[i] = ldexpf((float)(r & 0xffffff) / 16777216.0f + 0.5f, (int)((r >> 24) % (2 * cspread + 1)) - cspread) * ((r >> 31) ? -1.f : 1.f);
	}
	asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
	__syncthreads();

	// tfd's way: mma.sync, W as A (outputs 16·warp …), X's rows 8j … 8j+7 as B.
	float m[32], w[32], r[32];
	for (int j = 0; j < 8; j++)
		for (int e = 0; e < 4; e++) {
			int i = 4 * j + e;
			m[i] = C[rowOf(warp, g, e) * 64 + colOf(j, t, e)];    // (o, r)
			w[i] = r[i] = C[colOf(j, t, e) * 64 + rowOf(warp, g, e)]; // traded: (r, o) holds C[o][r]
		}
	for (int s = 0; s < STEPS; s++) {
		int o0 = 16 * warp + g;
		uint32_t a0 = pack(W[s][at(o0, 2 * t)], W[s][at(o0, 2 * t + 1)]);
		uint32_t a1 = pack(W[s][at(o0 + 8, 2 * t)], W[s][at(o0 + 8, 2 * t + 1)]);
		uint32_t a2 = pack(W[s][at(o0, 2 * t + 8)], W[s][at(o0, 2 * t + 9)]);
		uint32_t a3 = pack(W[s][at(o0 + 8, 2 * t + 8)], W[s][at(o0 + 8, 2 * t + 9)]);
		for (int j = 0; j < 8; j++) {
			uint32_t b0 = pack(X[s][at(8 * j + g, 2 * t)], X[s][at(8 * j + g, 2 * t + 1)]);
			uint32_t b1 = pack(X[s][at(8 * j + g, 2 * t + 8)], X[s][at(8 * j + g, 2 * t + 9)]);
			mma(m + 4 * j, a0, a1, a2, a3, b0, b1);
		}
		// Traded: X as A (rows 16·warp … of X), W as B.
		wgFence();
		wg64s(w, X[s], W[s]);
		commitWait();
		int r0 = 16 * warp + g;
		uint32_t x0 = pack(X[s][at(r0, 2 * t)], X[s][at(r0, 2 * t + 1)]);
		uint32_t x1 = pack(X[s][at(r0 + 8, 2 * t)], X[s][at(r0 + 8, 2 * t + 1)]);
		uint32_t x2 = pack(X[s][at(r0, 2 * t + 8)], X[s][at(r0, 2 * t + 9)]);
		uint32_t x3 = pack(X[s][at(r0 + 8, 2 * t + 8)], X[s][at(r0 + 8, 2 * t + 9)]);
		wgFence();
		wgr64(r, make_uint4(x0, x1, x2, x3), desc(saddr(W[s]), 128, 256));
		commitWait();
	}
	// Every way's outputs by (o, r).
	for (int j = 0; j < 8; j++)
		for (int e = 0; e < 4; e++) {
			int i = 4 * j + e;
			ref[rowOf(warp, g, e) * 64 + colOf(j, t, e)] = m[i];
			swp[colOf(j, t, e) * 64 + rowOf(warp, g, e)] = w[i];
			swr[colOf(j, t, e) * 64 + rowOf(warp, g, e)] = r[i];
		}
	__syncthreads();
	for (int i = tid; i < 64 * 64; i += 128) {
		int o = i / 64, row = i % 64;
		double exact = C[i];
		for (int s = 0; s < STEPS; s++)
			for (int k = 0; k < 16; k++) exact += (double)bf(W[s][at(o, k)]) * (double)bf(X[s][at(row, k)]);
		uint32_t mb = __float_as_uint(ref[i]);
		if (__float_as_uint(swp[i]) != mb) atomicAdd(&bad[0], 1ull);
		if (__float_as_uint(swr[i]) != mb) atomicAdd(&bad[1], 1ull);
		if (farFrom(ref[i], exact, spread)) atomicAdd(&far[0], 1ull);
		if (farFrom(swp[i], exact, spread)) atomicAdd(&far[1], 1ull);
		if (farFrom(swr[i], exact, spread)) atomicAdd(&far[2], 1ull);
		if (blockIdx.x == 0 && i == 0) {
			first[0] = ref[0];
			first[1] = swp[0];
			first[2] = swr[0];
			first[3] = (float)exact;
		}
	}
}

int main() {
	unsigned long long *bad, *far;
	float *first, *outs;
	const int blocks = 4000; // 64·64 outputs each
	CHECK(cudaMalloc(&outs, (size_t)blocks * 3 * 4096 * sizeof(float)));
	CHECK(cudaMalloc(&bad, 16));
	CHECK(cudaMalloc(&far, 24));
	CHECK(cudaMalloc(&first, 16));
	int fails = 0, wrong = 0;
	for (auto c : kSpreads) {
		for (uint32_t seed = 1; seed <= 3; seed++) {
			CHECK(cudaMemset(bad, 0, 16));
			CHECK(cudaMemset(far, 0, 24));
			compare<<<blocks, 128>>>(c.spread, c.cspread, seed, outs, bad, far, first);
			CHECK(cudaGetLastError());
			CHECK(cudaDeviceSynchronize());
			unsigned long long hb[2], hf[3];
			float f[4];
			CHECK(cudaMemcpy(hb, bad, 16, cudaMemcpyDeviceToHost));
			CHECK(cudaMemcpy(hf, far, 24, cudaMemcpyDeviceToHost));
			CHECK(cudaMemcpy(f, first, 16, cudaMemcpyDeviceToHost));
			printf("spread %2d, C spread %2d, seed %u: %d outputs; traded wgmma differs from mma.sync at %llu (A in shared memory), %llu (A in registers); "
			       "far from the exact sum: mma.sync %llu, traded %llu, %llu (first output %.9g %.9g %.9g, exact %.9g)\n",
			       c.spread, c.cspread, seed, blocks * 4096, hb[0], hb[1], hf[0], hf[1], hf[2], f[0], f[1], f[2], f[3]);
			fails += hb[0] != 0 || hb[1] != 0;
			wrong += hf[0] != 0 || hf[1] != 0 || hf[2] != 0;
		}
	}
	if (wrong) printf("LAYOUT: some way is far from the exact sums; the comparison says nothing\n");
	printf(fails ? "DIFFERENT: traded operands change wgmma's bits\n" : "SAME: every output of every case agrees bit for bit\n");
	return fails || wrong;
}
