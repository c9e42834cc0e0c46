// onerow asks which way of feeding the tensor cores streams a one-row matmul (a decode token's
// q/k/v, o, gate/up and down) fastest while keeping tfd's bits: every variant computes each output
// with the same MMAs in the same order (kernels/src/mma.kern: chunk c of 32 to partial c mod 4,
// each partial's chunks in order, ((p0 + p1) + p2) + p3), so all must agree bit for bit, and the
// program checks that they do. What differs is how the weights reach the MMAs:
//
//   cpasync16/D   today's matmul_mma_packed_bf16_1: a group of four warps on a tile of 16
//                 outputs, warp p the partial p, each warp a ring of D chunks by cp.async
//                 (weights and x), waited for by count;
//   cpasync8/D    the same with the operands traded (x as A, 8 weight rows as B,
//                 mma_swap_bits.cu): a tile of 8 outputs, twice the groups, each lane fetching
//                 the 16 bytes of its half;
//   bulk16/D      a tile of 16 outputs; one thread of the group asks the copy engine for stages
//                 of four chunks (4 KiB, one a warp) and their 128 floats of x, D stages on the
//                 way, an mbarrier a stage;
//   bulk8/D       the same for a tile of 8 outputs: four 512-byte copies a stage.
//
// The weights are in the packed order by halves: a chunk (16 rows by 32 of K, 1 KiB) holds rows
// 0-7 in its first 512 bytes and rows 8-15 in its second, lane l's 16 bytes of a half at 16·l,
// so a tile of 8 outputs reads only its own half. (A tile of 16 loads the same bytes as from
// today's order; only the registers' order differs.) On the GPU machine:
//
//   nvcc -O3 -arch=sm_90a -o /tmp/onerow tools/bench/onerow.cu && /tmp/onerow
//
// With tfd's own one-row kernel (matmul_mma_packed_bf16_1) timed beside them, its source written
// here by `go run ./tools/kernelsrc >bin/tfd_kernels.cuh` and bin/ carried:
//
//   nvcc -O3 -w -arch=sm_90a -DTFD_KERNELS='"../../bin/tfd_kernels.cuh"' -o /tmp/onerow tools/bench/onerow.cu
//
// Each shape is timed over 200 launches back to back, cycling through copies of its matrix that
// together pass 400 MB, so that L2 (50 MB) holds none of the next launch's weights.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>
#include <cuda_runtime.h>

#include "bits.cuh"

__device__ __forceinline__ void cp16(void* dst, const void* src, int n) {
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(saddr(dst)), "l"(src), "r"(n) : "memory");
}
__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wait_groups() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }

// x's hi and lo of a lane: elements 8t … 8t+7 of the chunk for the lanes of row 0 (g = 0), zeros
// for the rest (one row).
struct xsplit {
	uint32_t hi[4], lo[4];
};
__device__ __forceinline__ xsplit split(const float* v, bool live) {
	xsplit s;
#pragma unroll
	for (int i = 0; i < 4; i++) {
		float a = live ? v[2 * i] : 0.f, b = live ? v[2 * i + 1] : 0.f;
		uint32_t h = bf16pair(a, b);
		s.hi[i] = h;
		s.lo[i] = bf16pair(a - __uint_as_float(h << 16), b - __uint_as_float(h & 0xffff0000u));
	}
	return s;
}

// step16: one chunk on a tile of 16 outputs, W as A. p0 = rows 0-7's 16 bytes, p1 = rows 8-15's:
// .x, .y the first k16 step's (k 2t.., 2t+8..), .z, .w the second's.
__device__ __forceinline__ void step16(float* acc, uint4 p0, uint4 p1, const xsplit& x) {
	mma(acc, p0.x, p1.x, p0.y, p1.y, x.hi[0], x.hi[1]);
	mma(acc, p0.x, p1.x, p0.y, p1.y, x.lo[0], x.lo[1]);
	mma(acc, p0.z, p1.z, p0.w, p1.w, x.hi[2], x.hi[3]);
	mma(acc, p0.z, p1.z, p0.w, p1.w, x.lo[2], x.lo[3]);
}
// step8: the same chunk on a tile of 8 outputs (one half, p), x as A.
__device__ __forceinline__ void step8(float* acc, uint4 p, const xsplit& x) {
	mma(acc, x.hi[0], 0, x.hi[1], 0, p.x, p.y);
	mma(acc, x.lo[0], 0, x.lo[1], 0, p.x, p.y);
	mma(acc, x.hi[2], 0, x.hi[3], 0, p.z, p.w);
	mma(acc, x.lo[2], 0, x.lo[3], 0, p.z, p.w);
}

// finish16/finish8: the four partials through shared memory, added in order.
__device__ __forceinline__ void finish16(float* acc, float* part, float* dst, int o0, int n) {
	int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
	if ((lane & 3) == 0) {
		part[w * 16 + (lane >> 2)] = acc[0];
		part[w * 16 + 8 + (lane >> 2)] = acc[2];
	}
	__syncthreads();
	int e = threadIdx.x;
	if (e < 16 && o0 + e < n) dst[o0 + e] = ((part[e] + part[16 + e]) + part[32 + e]) + part[48 + e];
}
__device__ __forceinline__ void finish8(float* acc, float* part, float* dst, int o0, int n) {
	int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
	if (lane < 4) {
		part[w * 8 + 2 * lane] = acc[0];
		part[w * 8 + 2 * lane + 1] = acc[1];
	}
	__syncthreads();
	int e = threadIdx.x;
	if (e < 8 && o0 + e < n) dst[o0 + e] = ((part[e] + part[8 + e]) + part[16 + e]) + part[24 + e];
}

// cpasync: HALF 0 is the tile of 16 (both halves), 1 the tile of 8 (GROUP's half alone).
template <int D, bool HALF>
__global__ void __launch_bounds__(128) cpasync(const uint4* w, const float* x, float* dst, int n, int kdim) {
	constexpr int W = HALF ? 32 : 64; // uint4 of weights a warp's slot
	extern __shared__ uint4 ring[]; // 4 warps' D slots of W + 64 uint4
	__shared__ float part[64];
	int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
	int chunks = kdim / 32, mine = (chunks - warp + 3) / 4;
	int band = HALF ? blockIdx.x >> 1 : blockIdx.x, half = HALF ? blockIdx.x & 1 : 0;
	const uint4* b = w + (size_t)band * chunks * 64 + half * 32;
	uint4* slots = ring + warp * D * (W + 64);
	auto fetch = [&](int f) {
		int c = warp + 4 * f;
		uint4* s = slots + (f % D) * (W + 64);
		cp16(s + lane, b + (size_t)c * 64 + lane, 16);
		if (!HALF) cp16(s + 32 + lane, b + (size_t)c * 64 + 32 + lane, 16);
		int nx = g == 0 ? 16 : 0;
		const float* p = x + c * 32 + 8 * t;
		cp16(s + W + lane, nx ? p : x, nx);
		cp16(s + W + 32 + lane, nx ? p + 4 : x, nx);
	};
	float acc[4] = {0, 0, 0, 0};
	for (int f = 0; f < D - 1; f++) {
		if (f < mine) fetch(f);
		commit();
	}
	for (int j = 0; j < mine; j++) {
		if (j + D - 1 < mine) fetch(j + D - 1);
		commit();
		wait_groups<D - 1>();
		uint4* s = slots + (j % D) * (W + 64);
		uint4 xa = s[W + lane], xb = s[W + 32 + lane];
		float v[8] = {__uint_as_float(xa.x), __uint_as_float(xa.y), __uint_as_float(xa.z), __uint_as_float(xa.w),
		              __uint_as_float(xb.x), __uint_as_float(xb.y), __uint_as_float(xb.z), __uint_as_float(xb.w)};
		xsplit xs = split(v, g == 0);
		if (HALF)
			step8(acc, s[lane], xs);
		else
			step16(acc, s[lane], s[32 + lane], xs);
	}
	if (HALF)
		finish8(acc, part, dst, band * 16 + half * 8, n);
	else
		finish16(acc, part, dst, band * 16, n);
}

__device__ __forceinline__ void mbar_init(uint64_t* m, int count) {
	asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(saddr(m)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect(uint64_t* m, int bytes) {
	asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(saddr(m)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t* m, int parity) {
	uint32_t done = 0;
	while (!done)
		asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
		             : "=r"(done)
		             : "r"(saddr(m)), "r"(parity)
		             : "memory");
}
__device__ __forceinline__ void bulk(void* dst, const void* src, int bytes, uint64_t* m) {
	asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(saddr(dst)),
	             "l"(src), "r"(bytes), "r"(saddr(m))
	             : "memory");
}

// bulk: stages of four chunks (one a warp) and their 128 floats of x, D on the way; thread 0
// refills a stage once all four warps have read it (a barrier of the group).
template <int D, bool HALF>
__global__ void __launch_bounds__(128) bulkcopy(const uint4* w, const float* x, float* dst, int n, int kdim) {
	constexpr int W = HALF ? 32 : 64; // uint4 of weights a chunk
	extern __shared__ uint4 dyn[];
	uint4* ring = dyn;                                   // D stages of 4·W + 32 uint4
	uint64_t* full = (uint64_t*)(ring + D * (4 * W + 32)); // D mbarriers
	__shared__ float part[64];
	int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
	int chunks = kdim / 32, stages = chunks / 4; // kdim a multiple of 128 here
	int band = HALF ? blockIdx.x >> 1 : blockIdx.x, half = HALF ? blockIdx.x & 1 : 0;
	const uint4* b = w + (size_t)band * chunks * 64 + half * 32;
	if (threadIdx.x == 0) {
		for (int i = 0; i < D; i++) mbar_init(full + i, 1);
		asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
	}
	__syncthreads();
	auto issue = [&](int s) {
		uint4* st = ring + (s % D) * (4 * W + 32);
		uint64_t* m = full + s % D;
		mbar_expect(m, 4 * W * 16 + 512);
		if (HALF)
			for (int i = 0; i < 4; i++) bulk(st + i * W, b + (size_t)(4 * s + i) * 64, 512, m);
		else
			bulk(st, b + (size_t)4 * s * 64, 4096, m);
		bulk(st + 4 * W, x + 128 * s, 512, m);
	};
	if (threadIdx.x == 0)
		for (int s = 0; s < D && s < stages; s++) issue(s);
	float acc[4] = {0, 0, 0, 0};
	for (int s = 0; s < stages; s++) {
		mbar_wait(full + s % D, (s / D) & 1);
		uint4* st = ring + (s % D) * (4 * W + 32);
		const float* xv = (const float*)(st + 4 * W) + warp * 32 + 8 * t;
		float v[8];
#pragma unroll
		for (int i = 0; i < 8; i++) v[i] = g == 0 ? xv[i] : 0.f;
		xsplit xs = split(v, g == 0);
		if (HALF)
			step8(acc, st[warp * W + lane], xs);
		else
			step16(acc, st[warp * W + lane], st[warp * W + 32 + lane], xs);
		__syncthreads();
		if (threadIdx.x == 0 && s + D < stages) issue(s + D);
	}
	if (HALF)
		finish8(acc, part, dst, band * 16 + half * 8, n);
	else
		finish16(acc, part, dst, band * 16, n);
}


struct shape {
	const char* name;
	int n, kdim;
};

typedef void (*launcher)(const uint4*, const float*, float*, int, int, cudaStream_t);

template <int D, bool HALF>
void runCpasync(const uint4* w, const float* x, float* dst, int n, int kdim, cudaStream_t st) {
	constexpr int W = HALF ? 32 : 64;
	size_t smem = 4 * D * (W + 64) * 16;
	static bool set = false;
	if (!set) {
		CHECK(cudaFuncSetAttribute(cpasync<D, HALF>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
		set = true;
	}
	cpasync<D, HALF><<<n / (HALF ? 8 : 16), 128, smem, st>>>(w, x, dst, n, kdim);
}
template <int D, bool HALF>
void runBulk(const uint4* w, const float* x, float* dst, int n, int kdim, cudaStream_t st) {
	constexpr int W = HALF ? 32 : 64;
	size_t smem = D * (4 * W + 32) * 16 + D * 8;
	static bool set = false;
	if (!set) {
		CHECK(cudaFuncSetAttribute(bulkcopy<D, HALF>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
		set = true;
	}
	bulkcopy<D, HALF><<<n / (HALF ? 8 : 16), 128, smem, st>>>(w, x, dst, n, kdim);
}

#ifdef TFD_KERNELS
// tfd's own matmul_mma_packed_bf16_1, from kernels.CUDA() written to a file (kernels/README.md):
// it reads today's packed order, not the order by halves, so its outputs are not compared.
#define ulong tfd_ulong // glibc has its own ulong
#include TFD_KERNELS
void runTFD(const uint4* w, const float* x, float* dst, int n, int kdim, cudaStream_t st) {
	matmul_mma_packed_bf16_1<<<dim3(1, n / 16), 128, 0, st>>>(dst, dst, dst, x, (const wt_bf16*)w, (const wt_bf16*)w, (const wt_bf16*)w,
	                                                           x, x, x, 1, kdim, n, 0, 0, 0);
}
#endif

int main() {
	shape shapes[] = {{"o 4096x4096", 4096, 4096}, {"qkv 6144x4096", 6144, 4096}, {"down 4096x12288", 4096, 12288}, {"gate/up 24576x4096", 24576, 4096}};
	struct variant {
		const char* name;
		launcher run;
	} variants[] = {
	    {"cpasync16/4", runCpasync<4, false>}, {"cpasync16/8", runCpasync<8, false>},
	    {"cpasync8/4", runCpasync<4, true>},   {"cpasync8/8", runCpasync<8, true>},
	    {"bulk16/4", runBulk<4, false>},       {"bulk16/8", runBulk<8, false>},
	    {"bulk16/12", runBulk<12, false>},     {"bulk16/16", runBulk<16, false>},
	    {"bulk8/8", runBulk<8, true>},         {"bulk8/16", runBulk<16, true>},
#ifdef TFD_KERNELS
	    {"tfd", runTFD},
#endif
	};
	const int launches = 200;
	cudaStream_t st;
	CHECK(cudaStreamCreate(&st));
	cudaEvent_t e0, e1;
	CHECK(cudaEventCreate(&e0));
	CHECK(cudaEventCreate(&e1));
	for (const shape& sh : shapes) {
		size_t bytes = (size_t)sh.n * sh.kdim * 2, n16 = bytes / 16;
		int copies = (int)(400e6 / bytes) + 1;
		uint4* w;
		float *x, *dst;
		CHECK(cudaMalloc(&w, bytes * copies));
		CHECK(cudaMalloc(&x, sh.kdim * 4));
		CHECK(cudaMalloc(&dst, sh.n * 4));
		fillBF16<<<1024, 256>>>(w, n16 * copies, 7, 120, 15); // exponents 120 … 134
		std::vector<float> hx(sh.kdim);
		for (int i = 0; i < sh.kdim; i++) hx[i] = (float)((i * 2654435761u >> 7) % 20001) / 10000.f - 1.f + 1e-7f * i;
		CHECK(cudaMemcpy(x, hx.data(), sh.kdim * 4, cudaMemcpyHostToDevice));
		// The ceiling: every byte read once, many warps.
		for (int r = 0; r < 3; r++) stream<<<132 * 16, 256, 0, st>>>(w, n16, dst);
		CHECK(cudaEventRecord(e0, st));
		for (int l = 0; l < launches; l++) stream<<<132 * 16, 256, 0, st>>>(w + (l % copies) * n16, n16, dst);
		CHECK(cudaEventRecord(e1, st));
		CHECK(cudaEventSynchronize(e1));
		float ms;
		CHECK(cudaEventElapsedTime(&ms, e0, e1));
		printf("%-20s %-12s %8.2f µs %6.0f GB/s\n", sh.name, "stream", ms * 1e3 / launches, bytes * launches / (ms * 1e-3) / 1e9);
		std::vector<float> want(sh.n), got(sh.n);
		for (int v = 0; v < (int)(sizeof variants / sizeof variants[0]); v++) {
			variants[v].run(w, x, dst, sh.n, sh.kdim, st);
			CHECK(cudaStreamSynchronize(st));
			CHECK(cudaGetLastError());
			CHECK(cudaMemcpy(got.data(), dst, sh.n * 4, cudaMemcpyDeviceToHost));
			if (v == 0) want = got;
			int differ = 0;
			for (int i = 0; i < sh.n; i++) differ += memcmp(&want[i], &got[i], 4) != 0;
			CHECK(cudaMemset(dst, 0, sh.n * 4));
			CHECK(cudaEventRecord(e0, st));
			for (int l = 0; l < launches; l++) variants[v].run(w + (l % copies) * n16, x, dst, sh.n, sh.kdim, st);
			CHECK(cudaEventRecord(e1, st));
			CHECK(cudaEventSynchronize(e1));
			CHECK(cudaGetLastError());
			CHECK(cudaEventElapsedTime(&ms, e0, e1));
			printf("%-20s %-12s %8.2f µs %6.0f GB/s  %d of %d outputs differ from %s\n", sh.name, variants[v].name, ms * 1e3 / launches,
			       bytes * launches / (ms * 1e-3) / 1e9, differ, sh.n, variants[0].name);
		}
		CHECK(cudaFree(w));
		CHECK(cudaFree(x));
		CHECK(cudaFree(dst));
	}
	return 0;
}
