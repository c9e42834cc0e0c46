// wgmma_bits asks whether Hopper's warpgroup MMA (wgmma.mma_async m64n8k16, BF16 operands, F32
// accumulators) adds a k16 step into its accumulator exactly as mma.sync.m16n8k16 does, tfd's
// matmul instruction: if every bit agrees, a wgmma kernel that runs tfd's steps in tfd's order
// gives tfd's bits (docs/performance.md). On the GPU machine:
//
//   nvcc -O3 -gencode arch=compute_90a,code=sm_90a -o /tmp/wgmma_bits tools/bench/wgmma_bits.cu && /tmp/wgmma_bits
//
// Each block is one warpgroup with its own random tile: A 64×16 and B 16×8 in BF16 of random
// sign, mantissa and an exponent spread over ±SPREAD octaves, C 64×8 in F32 likewise, run through
// STEPS chained k16 steps (D = A_s·B_s + D, as tfd's four MMAs a chunk). The same steps run three
// ways: mma.sync (each warp its 16 rows), wgmma with A and B from shared memory, and wgmma with A
// from the registers mma.sync reads. Every output of every way is compared bit for bit with
// mma.sync's, and with a double-precision sum as a sanity check of the layouts.
#include <cstdint>
#include <cstdio>
#include <cuda_runtime.h>

#include "bits.cuh"

constexpr int STEPS = 4;

// Shared layouts without swizzle: 8×8 core matrices of 128 contiguous bytes. A (64 rows by 16
// k): core (row/8, k/8) at (row/8)·256 + (k/8)·128 bytes; B (8 n by 16 k): core k/8 at (k/8)·128.
__device__ int aAt(int row, int k) { return (row / 8) * 128 + (k / 8) * 64 + (row % 8) * 8 + (k % 8); }
__device__ int bAt(int n, int k) { return (k / 8) * 64 + n * 8 + (k % 8); }

__device__ uint64_t desc(const void* p, int lbo, int sbo) {
	uint64_t a = (uint64_t)__cvta_generic_to_shared(p);
	return ((a & 0x3ffff) >> 4) | ((uint64_t)(lbo >> 4) << 16) | ((uint64_t)(sbo >> 4) << 32);
}

__global__ void compare(int spread, int cspread, uint32_t seed, unsigned long long* bad, unsigned long long* far, float* first) {
	__shared__ __align__(128) uint16_t A[STEPS][64 * 16];
	__shared__ __align__(128) uint16_t B[STEPS][8 * 16];
	__shared__ float C[64 * 8];
	int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
	uint32_t base = mix(seed ^ mix(blockIdx.x));
	for (int s = 0; s < STEPS; s++) {
		for (int i = tid; i < 64 * 16; i += 128) A[s][aAt(i / 16, i % 16)] = rbf16(base + 1000003u * s + i, spread);
		for (int i = tid; i < 8 * 16; i += 128) B[s][bAt(i / 16, i % 16)] = rbf16(base ^ 0x9e3779b9u + 7919u * s + i, spread);
	}
	for (int i = tid; i < 64 * 8; i += 128) {
		uint32_t r = mix(base + 0x51ed27u + i);
		C[i] = ldexpf((float)(r & 0xffffff) / 16777216.0f + 0.5f, (int)((r >> 24) % (2 * cspread + 1)) - cspread) * ((r >> 31) ? -1.f : 1.f);
	}
	asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
	__syncthreads();

	// This thread's outputs: (row, n) for row = 16·warp + g (+8), n = 2t (+1).
	int rows[4] = {16 * warp + g, 16 * warp + g, 16 * warp + g + 8, 16 * warp + g + 8};
	int cols[4] = {2 * t, 2 * t + 1, 2 * t, 2 * t + 1};
	float m[4], w[4], r[4];
	for (int i = 0; i < 4; i++) m[i] = w[i] = r[i] = C[rows[i] * 8 + cols[i]];
	for (int s = 0; s < STEPS; s++) {
		int r0 = 16 * warp + g;
		uint32_t a0 = pack(A[s][aAt(r0, 2 * t)], A[s][aAt(r0, 2 * t + 1)]);
		uint32_t a1 = pack(A[s][aAt(r0 + 8, 2 * t)], A[s][aAt(r0 + 8, 2 * t + 1)]);
		uint32_t a2 = pack(A[s][aAt(r0, 2 * t + 8)], A[s][aAt(r0, 2 * t + 9)]);
		uint32_t a3 = pack(A[s][aAt(r0 + 8, 2 * t + 8)], A[s][aAt(r0 + 8, 2 * t + 9)]);
		uint32_t b0 = pack(B[s][bAt(g, 2 * t)], B[s][bAt(g, 2 * t + 1)]);
		uint32_t b1 = pack(B[s][bAt(g, 2 * t + 8)], B[s][bAt(g, 2 * t + 9)]);
		asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
		             : "+f"(m[0]), "+f"(m[1]), "+f"(m[2]), "+f"(m[3])
		             : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
		uint64_t da = desc(A[s], 128, 256), db = desc(B[s], 128, 256);
		asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
		asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
		             "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0,%1,%2,%3}, %4, %5, p, 1, 1, 0, 0;\n}"
		             : "+f"(w[0]), "+f"(w[1]), "+f"(w[2]), "+f"(w[3])
		             : "l"(da), "l"(db));
		asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
		asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
		asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
		asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
		             "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0,%1,%2,%3}, {%4,%5,%6,%7}, %8, p, 1, 1, 0;\n}"
		             : "+f"(r[0]), "+f"(r[1]), "+f"(r[2]), "+f"(r[3])
		             : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(db));
		asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
		asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
	}
	for (int i = 0; i < 4; i++) {
		double ref = C[rows[i] * 8 + cols[i]];
		for (int s = 0; s < STEPS; s++)
			for (int k = 0; k < 16; k++) ref += (double)bf(A[s][aAt(rows[i], k)]) * (double)bf(B[s][bAt(cols[i], k)]);
		uint32_t mb = __float_as_uint(m[i]);
		if (__float_as_uint(w[i]) != mb) atomicAdd(&bad[0], 1ull);
		if (__float_as_uint(r[i]) != mb) atomicAdd(&bad[1], 1ull);
		if (farFrom(m[i], ref, spread)) atomicAdd(&far[0], 1ull);
		if (farFrom(w[i], ref, spread)) atomicAdd(&far[1], 1ull);
		if (blockIdx.x == 0 && tid == 0 && i == 0) {
			first[0] = m[0];
			first[1] = w[0];
			first[2] = r[0];
			first[3] = (float)ref;
		}
	}
}

int main() {
	unsigned long long *bad, *far;
	float* first;
	cudaMalloc(&bad, 16);
	cudaMalloc(&far, 16);
	cudaMalloc(&first, 16);
	const int blocks = 20000; // 64·8 outputs each
	int fails = 0;
	for (auto c : kSpreads) {
		for (uint32_t seed = 1; seed <= 3; seed++) {
			cudaMemset(bad, 0, 16);
			cudaMemset(far, 0, 16);
			compare<<<blocks, 128>>>(c.spread, c.cspread, seed, bad, far, first);
			cudaError_t err = cudaDeviceSynchronize();
			if (err != cudaSuccess) {
				printf("CUDA error: %s\n", cudaGetErrorString(err));
				return 2;
			}
			unsigned long long hb[2], hf[2];
			float f[4];
			cudaMemcpy(hb, bad, 16, cudaMemcpyDeviceToHost);
			cudaMemcpy(hf, far, 16, cudaMemcpyDeviceToHost);
			cudaMemcpy(f, first, 16, cudaMemcpyDeviceToHost);
			printf("spread %2d, C spread %2d, seed %u: %d outputs; wgmma(smem A) differs from mma.sync at %llu, wgmma(register A) at %llu; "
			       "far from the exact sum: mma.sync %llu, wgmma %llu (first output %.9g %.9g %.9g, exact %.9g)\n",
			       c.spread, c.cspread, seed, blocks * 512, hb[0], hb[1], hf[0], hf[1], f[0], f[1], f[2], f[3]);
			fails += hb[0] != 0 || hb[1] != 0;
		}
	}
	printf(fails ? "DIFFERENT: wgmma does not add as mma.sync does\n" : "SAME: every output of every case agrees bit for bit\n");
	return 0;
}
