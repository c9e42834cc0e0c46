// persistent asks what a decode step gains if its kernels stop being kernels: the 8B's one-row
// chain (36 layers of q/k/v, attention, o, gate/up and down, then the head; 15.1 GB of BF16
// weights) run several ways that make the same bits, checked here:
//
//   graph/D       a kernel a matrix, each after a one-group kernel (prep) that makes its x, and
//                 an attention kernel before each o, captured in a CUDA graph and launched one
//                 after the other, as tfd's step is: each matmul's groups fetch the first D − 1
//                 chunks of their rings, copy x to shared memory and stream the rest;
//   graph+pdl/D   the same graph with dependent launch: each kernel's groups start while the
//                 kernel before runs, fetch their first chunks of weights, and wait (GRID_WAIT)
//                 before they read x;
//   own/4, own+pdl/4  the graph without the prep kernels: each matmul's groups make x themselves;
//   persistent/DxQ  one kernel for the whole step, a group an SM of Q quads (four warps on a tile
//                 of 16 outputs, as tfd's group), a grid barrier before each phase (a matmul, or
//                 a layer's attention); the tiles are dealt to the quads in turn across matrices,
//                 and each warp's ring of D chunks streams on across tiles, phases and barriers
//                 (no kernel writes a weight), so weights keep coming while the grid waits.
//
// Every matmul is tfd's one-row packed MMA (kernels/src/mma.kern: a tile of 16 outputs, chunk c
// of 32 to warp c mod 4, x split into BF16 hi and lo, the partials added ((p0 + p1) + p2) + p3),
// and the step between matrices is a stand-in for the real one that keeps its dependencies: x is
// the RMS-normed output before (q/k/v, gate/up, head), the attention of 32 query heads over CTX
// cached positions of 8 key/value heads (o), or SiLU(gate)·up (down). Left out: q/k norms, RoPE
// and the KV write, the residual adds, the embedding and the pick. Each way runs twice: "bare"
// first (no attention, x the output before clamped to ±1: the matmuls' chain alone), then whole.
// More rows time the persistent kernel with its bits wrong on purpose: without its grid
// barriers, without x's staging, and without both (the weights' stream through the same MMAs
// alone); and without the weights (no matmul reads any: its barriers alone, and its phases, the
// barriers with x's staging and, in the whole step, attention). On the GPU machine:
//
//   nvcc -O3 -arch=sm_90a -o /tmp/persistent tools/bench/persistent.cu && /tmp/persistent [steps]
//
// It prints the time a step for each way (the mean of steps, 20 unless given, after one to warm
// up), beside a plain read of the same 15.1 GB, and how many of the head's 151,936 outputs differ
// from the first way's of the same mode (0 but for the timing-only rows, in parentheses).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <cuda_runtime.h>

#include "bits.cuh"

constexpr int LAYERS = 36, DIM = 4096, QKV = 6144, FF = 12288, VOCAB = 151936;
constexpr int HEADS = 32, KVHEADS = 8, HD = 128, CTX = 130;
constexpr int XMAX = FF; // the widest x a matmul stages

enum Kind { kQKV, kO, kGateUp, kDown, kHead };

struct Mat {
	const uint4* w; // packed: tile t's chunk c (16 rows by 32 of K, 1 KiB) at (t·chunks + c)·64
	int n, kdim, kind, layer;
	int before; // the tiles of the matrices before this one: where its tiles' turn among the groups starts
};

// Bufs are the activations the chain passes along; each is written in one phase and read in a
// later one, with a grid barrier (or a kernel boundary) between.
struct Bufs {
	float *qkv, *attn, *o, *gu, *down, *logits;
	float* x; // the graphs' x, made by prep
	int bare; // no attention, and x the output before clamped to ±1: the matmuls' chain alone
	const float *kcache, *vcache; // LAYERS × KVHEADS × CTX × HD each
};

__device__ __forceinline__ void cp16(void* dst, const void* src) {
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(saddr(dst)), "l"(src) : "memory");
}
__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wait_groups() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }
__device__ __forceinline__ void grid_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void grid_release() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }

// quadSync: a barrier of 128 threads, named id (0 is __syncthreads'); a persistent group of several
// quads keeps each quad's work apart with its own.
__device__ __forceinline__ void quadSync(int id) { asm volatile("bar.sync %0, 128;" ::"r"(id) : "memory"); }

// step: one chunk on the tile's accumulators. s is the warp's slot (rows 0-7's 16 bytes a lane,
// then rows 8-15's), xv the chunk's 32 elements of x; lanes 0-3 hold the row, the rest zeros.
__device__ __forceinline__ void step(float* acc, const uint4* s, const float* xv) {
	int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
	uint4 p0 = s[lane], p1 = s[32 + lane];
	uint32_t hi[4], lo[4];
#pragma unroll
	for (int i = 0; i < 4; i++) {
		float a = g == 0 ? xv[8 * t + 2 * i] : 0.f, b = g == 0 ? xv[8 * t + 2 * i + 1] : 0.f;
		uint32_t h = bf16pair(a, b);
		hi[i] = h;
		lo[i] = bf16pair(a - __uint_as_float(h << 16), b - __uint_as_float(h & 0xffff0000u));
	}
	mma(acc, p0.x, p1.x, p0.y, p1.y, hi[0], hi[1]);
	mma(acc, p0.x, p1.x, p0.y, p1.y, lo[0], lo[1]);
	mma(acc, p0.z, p1.z, p0.w, p1.w, hi[2], hi[3]);
	mma(acc, p0.z, p1.z, p0.w, p1.w, lo[2], lo[3]);
}

// finish: the four warps' partials of tile t through part, added in order, to dst.
// (part: the quad's 64 floats; bar: the quad's barrier.)
__device__ __forceinline__ void finish(const float* acc, float* part, float* dst, int t, int bar) {
	int w = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;
	if ((lane & 3) == 0) {
		part[w * 16 + (lane >> 2)] = acc[0];
		part[w * 16 + 8 + (lane >> 2)] = acc[2];
	}
	quadSync(bar);
	int e = threadIdx.x & 127;
	if (e < 16) dst[16 * t + e] = ((part[e] + part[16 + e]) + part[32 + e]) + part[48 + e];
	quadSync(bar);
}

// blockSum adds one float a thread of the first 128 of the group in a fixed order (barrier 1:
// those 128 threads alone; attend runs on them too).
__device__ __forceinline__ float blockSum(float v, float* red) {
#pragma unroll
	for (int m = 16; m; m >>= 1) v += __shfl_xor_sync(0xffffffffu, v, m);
	if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
	quadSync(1);
	float s = ((red[0] + red[1]) + red[2]) + red[3];
	quadSync(1);
	return s;
}

// stageX writes matrix m's x into xs from what the phase before it wrote (read past L1: another
// group wrote it), with every thread of the group, whatever their number: a norm's sum of squares
// is added by the first 128 in a fixed order, so the bits do not depend on it.
__device__ void stageX(const Mat& m, const Bufs& b, float* xs, float* red) {
	int n = blockDim.x;
	if (b.bare) {
		const float* src = m.kind == kO ? b.qkv : m.kind == kGateUp ? b.o : m.kind == kDown ? b.gu : b.down;
		for (int i = threadIdx.x; i < m.kdim; i += n) xs[i] = fminf(fmaxf(__ldcg(src + i), -1.f), 1.f);
		__syncthreads();
		return;
	}
	switch (m.kind) {
	case kO:
		for (int i = threadIdx.x; i < DIM; i += n) xs[i] = __ldcg(b.attn + i);
		break;
	case kDown:
#pragma unroll 4
		for (int i = threadIdx.x; i < FF; i += n) {
			float g = __ldcg(b.gu + i), u = __ldcg(b.gu + FF + i);
			xs[i] = g / (1.f + __expf(-g)) * u;
		}
		break;
	default: { // RMS norm of the row before: down's (q/k/v, head) or o's (gate/up)
		const float* src = m.kind == kGateUp ? b.o : b.down;
#pragma unroll 4
		for (int i = threadIdx.x; i < DIM; i += n) xs[i] = __ldcg(src + i);
		__syncthreads();
		__shared__ float scale;
		if (threadIdx.x < 128) {
			float ss = 0;
			for (int i = threadIdx.x; i < DIM; i += 128) ss = fmaf(xs[i], xs[i], ss);
			ss = blockSum(ss, red);
			if (threadIdx.x == 0) scale = rsqrtf(ss / DIM + 1e-6f);
		}
		__syncthreads();
		for (int i = threadIdx.x; i < DIM; i += n) xs[i] *= scale;
	}
	}
	__syncthreads();
}

// attend: query head h of layer l over its key/value head's CTX positions; q is the first 4,096
// of q/k/v's output. A warp a key for the scores (a lane four dimensions), then each warp a
// quarter of the positions for the values, the quarters added in order.
__device__ void attend(const Bufs& b, int l, int h, float* sc, float* red) {
	int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
	const float4* q = (const float4*)(b.qkv + h * HD);
	size_t base = ((size_t)l * KVHEADS + h / (HEADS / KVHEADS)) * CTX * HD;
	const float4* kc = (const float4*)(b.kcache + base);
	const float4* vc = (const float4*)(b.vcache + base);
	constexpr int PER = (CTX + 3) / 4, B = 12; // positions a warp, loaded B at a time
	float4 qv = __ldcg(q + lane);
	float4 k[B];
	for (int i0 = 0; i0 < PER; i0 += B) {
#pragma unroll
		for (int i = 0; i < B; i++) {
			int p = w * PER + i0 + i;
			k[i] = i0 + i < PER && p < CTX ? __ldg(kc + (size_t)p * (HD / 4) + lane) : make_float4(0, 0, 0, 0);
		}
#pragma unroll
		for (int i = 0; i < B; i++) {
			float s = qv.x * k[i].x + qv.y * k[i].y + qv.z * k[i].z + qv.w * k[i].w;
#pragma unroll
			for (int m = 16; m; m >>= 1) s += __shfl_xor_sync(0xffffffffu, s, m);
			int p = w * PER + i0 + i;
			if (lane == 0 && i0 + i < PER && p < CTX) sc[p] = s * 0.08838834764831845f;
		}
	}
	quadSync(1);
	float mx = -INFINITY;
	for (int p = threadIdx.x; p < CTX; p += 128) mx = fmaxf(mx, sc[p]);
#pragma unroll
	for (int m = 16; m; m >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, m));
	if (lane == 0) red[4 + w] = mx;
	quadSync(1);
	mx = fmaxf(fmaxf(red[4], red[5]), fmaxf(red[6], red[7]));
	float sum = 0;
	for (int p = threadIdx.x; p < CTX; p += 128) {
		float e = __expf(sc[p] - mx);
		sc[p] = e;
		sum += e;
	}
	sum = blockSum(sum, red);
	float4 acc = make_float4(0, 0, 0, 0);
	for (int i0 = 0; i0 < PER; i0 += B) {
#pragma unroll
		for (int i = 0; i < B; i++) {
			int p = w * PER + i0 + i;
			if (i0 + i < PER && p < CTX) k[i] = __ldg(vc + (size_t)p * (HD / 4) + lane);
		}
#pragma unroll
		for (int i = 0; i < B; i++) {
			int p = w * PER + i0 + i;
			if (i0 + i < PER && p < CTX) {
				float e = sc[p];
				acc.x = fmaf(e, k[i].x, acc.x);
				acc.y = fmaf(e, k[i].y, acc.y);
				acc.z = fmaf(e, k[i].z, acc.z);
				acc.w = fmaf(e, k[i].w, acc.w);
			}
		}
	}
	float4* quarter = (float4*)(sc + 160 + w * HD); // the warp's 128 sums, past the scores
	quarter[lane] = acc;
	quadSync(1);
	int d = threadIdx.x;
	const float* qs = sc + 160;
	b.attn[h * HD + d] = (((qs[d] + qs[HD + d]) + qs[2 * HD + d]) + qs[3 * HD + d]) / sum;
	quadSync(1);
}

// A cursor walks one warp's chunks of the step in the order it uses them: matrix by matrix, the
// group's tiles of each (firstTile, then every groups-th), the warp's chunks of each tile.
struct Cursor {
	int m, t, j;
};
// Tiles are dealt to the groups in turn across matrices (the step's t-th tile overall to group t
// mod groups), so that every group gets about as many bytes, however few tiles a matrix has.
// (For a group of several quads, group and groups count quads.)
__device__ __forceinline__ int firstTile(const Mat& m, int group, int groups) {
	return ((group - m.before) % groups + groups) % groups;
}
__device__ __forceinline__ bool advance(Cursor& c, const Mat* mats, int nmats, int group, int groups) {
	int mine = mats[c.m].kdim / 128;
	if (++c.j < mine) return true;
	c.j = 0;
	c.t += groups;
	while (c.t >= mats[c.m].n / 16) {
		if (++c.m == nmats) return false;
		c.t = firstTile(mats[c.m], group, groups);
	}
	return true;
}
// first is the cursor's first chunk (false: the group has no tile in any matrix).
__device__ __forceinline__ bool first(Cursor& c, const Mat* mats, int nmats, int group, int groups) {
	c = {0, firstTile(mats[0], group, groups), 0};
	while (c.t >= mats[c.m].n / 16) {
		if (++c.m == nmats) return false;
		c.t = firstTile(mats[c.m], group, groups);
	}
	return true;
}
__device__ __forceinline__ void fetch(uint4* slot, const Mat& m, int t, int j) {
	int lane = threadIdx.x & 31, chunks = m.kdim / 32, c = ((threadIdx.x >> 5) & 3) + 4 * j;
	const uint4* src = m.w + ((size_t)t * chunks + c) * 64;
	cp16(slot + lane, src + lane);
	cp16(slot + 32 + lane, src + 32 + lane);
}

// gridBarrier: every group past it has seen every group's writes before it. count is zeroed
// before each launch; the n-th barrier waits for n·groups arrivals.
__device__ __forceinline__ void gridBarrier(unsigned* count, unsigned target) {
	__syncthreads();
	if (threadIdx.x == 0) {
		__threadfence();
		atomicAdd(count, 1u);
		unsigned v;
		do asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(count) : "memory");
		while (v < target);
		__threadfence();
	}
	__syncthreads();
}

// What the persistent kernel's timing-only runs leave out (skip, bits or'd; their outputs are wrong
// on purpose): the grid barriers (and so attention's phase), x's staging, the weights (no matmul
// reads any, its tiles' outputs written all the same).
enum Skip { kNoBarriers = 1, kNoStaging = 2, kNoWeights = 4 };

template <int D, int QUADS>
__global__ void __launch_bounds__(128 * QUADS, 1) persistent(const Mat* mats, int nmats, Bufs b, unsigned* count, int skip) {
	extern __shared__ uint4 dyn[];
	uint4* ring = dyn + (threadIdx.x >> 5) * D * 64; // the warp's D slots of 1 KiB
	float* xs = (float*)(dyn + 4 * QUADS * D * 64);
	__shared__ float part[QUADS * 64], red[8];
	__shared__ __align__(16) float sc[160 + 4 * HD];
	int quad = threadIdx.x >> 7, warp = (threadIdx.x >> 5) & 3;
	// Quads in turn across the groups, so that a matrix of few tiles still spreads over every SM.
	int group = quad * gridDim.x + blockIdx.x, groups = gridDim.x * QUADS;
	Cursor prod;
	bool more = !(skip & kNoWeights) && first(prod, mats, nmats, group, groups);
	for (int f = 0; f < D - 1; f++) {
		if (more) {
			fetch(ring + f * 64, mats[prod.m], prod.t, prod.j);
			more = advance(prod, mats, nmats, group, groups);
		}
		commit();
	}
	unsigned barriers = 0;
	int used = 0;
	for (int mi = 0; mi < nmats; mi++) {
		const Mat& m = mats[mi];
		if (m.kind == kO && !(skip & kNoBarriers)) { // attention between q/k/v and o, its own phase
			gridBarrier(count, ++barriers * gridDim.x);
			if (!b.bare && quad == 0)
				for (int h = blockIdx.x; h < HEADS; h += gridDim.x) attend(b, m.layer, h, sc, red);
		}
		if (mi > 0 && !(skip & kNoBarriers)) gridBarrier(count, ++barriers * gridDim.x);
		if (!(skip & kNoStaging)) stageX(m, b, xs, red);
		float* dst = m.kind == kQKV ? b.qkv : m.kind == kO ? b.o : m.kind == kGateUp ? b.gu : m.kind == kDown ? b.down : b.logits;
		int mine = m.kdim / 128;
		for (int t = firstTile(m, group, groups); t < m.n / 16; t += groups) {
			float acc[4] = {0, 0, 0, 0};
			for (int j = 0; j < (skip & kNoWeights ? 0 : mine); j++, used++) {
				// The slot read last time, refilled (each lane rewrites only its own bytes); then
				// this chunk, waited for with D − 1 behind it on the way.
				if (more) {
					fetch(ring + ((used + D - 1) % D) * 64, mats[prod.m], prod.t, prod.j);
					more = advance(prod, mats, nmats, group, groups);
				}
				commit();
				wait_groups<D - 1>();
				step(acc, ring + (used % D) * 64, xs + 32 * (warp + 4 * j));
			}
			finish(acc, part + quad * 64, dst, t, 2 + quad);
		}
	}
}

// single: one matmul's tile a group, as tfd launches them (GRID_WAIT after the first D chunks); x
// from prep, or made by each group when own is set.
template <int D>
__global__ void __launch_bounds__(128) single(const Mat* mats, int mi, Bufs b, int own) {
	extern __shared__ uint4 dyn[];
	uint4* ring = dyn + (threadIdx.x >> 5) * D * 64;
	float* xs = (float*)(dyn + 4 * D * 64);
	__shared__ float part[64], red[8];
	const Mat& m = mats[mi];
	int t = blockIdx.x, mine = m.kdim / 128;
	for (int f = 0; f < D - 1; f++) {
		if (f < mine) fetch(ring + f * 64, m, t, f);
		commit();
	}
	grid_wait();
	grid_release();
	if (own) // each group makes x itself, as the persistent kernel's do
		stageX(m, b, xs, red);
	else {
		for (int i = threadIdx.x; i < m.kdim; i += 128) xs[i] = __ldcg(b.x + i);
		__syncthreads();
	}
	float* dst = m.kind == kQKV ? b.qkv : m.kind == kO ? b.o : m.kind == kGateUp ? b.gu : m.kind == kDown ? b.down : b.logits;
	float acc[4] = {0, 0, 0, 0};
	for (int j = 0; j < mine; j++) {
		if (j + D - 1 < mine) fetch(ring + ((j + D - 1) % D) * 64, m, t, j + D - 1);
		commit();
		wait_groups<D - 1>();
		step(acc, ring + (j % D) * 64, xs + 32 * ((threadIdx.x >> 5) + 4 * j));
	}
	finish(acc, part, dst, t, 2);
}

// prep: matrix mi's x, made once for the graphs' matmuls (the persistent kernel's groups each make
// their own, the same bits).
__global__ void __launch_bounds__(128) prep(const Mat* mats, int mi, Bufs b) {
	__shared__ float red[8];
	grid_wait();
	grid_release();
	stageX(mats[mi], b, b.x, red);
}

__global__ void __launch_bounds__(128) attention(Bufs b, int layer) {
	__shared__ float red[8];
	__shared__ __align__(16) float sc[160 + 4 * HD];
	grid_wait();
	grid_release();
	attend(b, layer, blockIdx.x, sc, red);
}

// fillf writes n random floats of [-1, 1].
__global__ void fillf(float* v, size_t n, uint32_t seed) {
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
		v[i] = (float)(mix(seed ^ (uint32_t)i * 0x9e3779b9u) % 20001) / 10000.f - 1.f;
}

template <int D, int QUADS = 1>
size_t ringSmem(int kdim) { return QUADS * 4 * D * 1024 + kdim * 4; }

int main(int argc, char** argv) {
	int tokens = argc > 1 ? atoi(argv[1]) : 20;
	// The weights, one arena in the order the step reads them.
	std::vector<Mat> mats;
	size_t total = 0;
	int tiles = 0;
	auto add = [&](int n, int kdim, int kind, int layer) {
		mats.push_back({(const uint4*)total, n, kdim, kind, layer, tiles});
		total += (size_t)n * kdim * 2;
		tiles += n / 16;
	};
	for (int l = 0; l < LAYERS; l++) {
		add(QKV, DIM, kQKV, l);
		add(DIM, DIM, kO, l);
		add(2 * FF, DIM, kGateUp, l);
		add(DIM, FF, kDown, l);
	}
	add(VOCAB, DIM, kHead, LAYERS);
	uint8_t* arena;
	CHECK(cudaMalloc(&arena, total));
	fillBF16<<<2048, 256>>>((uint4*)arena, total / 16, 7, 118, 8); // exponents 118 … 125
	for (Mat& m : mats) m.w = (const uint4*)(arena + (size_t)m.w);
	Mat* dmats;
	CHECK(cudaMalloc(&dmats, mats.size() * sizeof(Mat)));
	CHECK(cudaMemcpy(dmats, mats.data(), mats.size() * sizeof(Mat), cudaMemcpyHostToDevice));
	int nmats = (int)mats.size();

	Bufs b;
	float* cache;
	size_t kv = (size_t)LAYERS * KVHEADS * CTX * HD;
	CHECK(cudaMalloc(&b.qkv, QKV * 4));
	CHECK(cudaMalloc(&b.attn, DIM * 4));
	CHECK(cudaMalloc(&b.o, DIM * 4));
	CHECK(cudaMalloc(&b.gu, 2 * FF * 4));
	CHECK(cudaMalloc(&b.down, DIM * 4));
	CHECK(cudaMalloc(&b.logits, VOCAB * 4));
	CHECK(cudaMalloc(&b.x, XMAX * 4));
	CHECK(cudaMalloc(&cache, 2 * kv * 4));
	fillf<<<1024, 256>>>(cache, 2 * kv, 11);
	b.kcache = cache;
	b.vcache = cache + kv;
	float* x0;
	CHECK(cudaMalloc(&x0, DIM * 4));
	fillf<<<16, 256>>>(x0, DIM, 13);
	unsigned* count;
	CHECK(cudaMalloc(&count, 4));
	CHECK(cudaDeviceSynchronize());
	printf("weights %.2f GB in %d matrices, %d layers, attention over %d positions\n", total / 1e9, nmats, LAYERS, CTX);

	cudaStream_t st;
	CHECK(cudaStreamCreate(&st));
	cudaEvent_t e0, e1;
	CHECK(cudaEventCreate(&e0));
	CHECK(cudaEventCreate(&e1));
	std::vector<float> want(VOCAB), got(VOCAB);
	bool reference = true; // the next run's outputs are its mode's reference
	auto timeIt = [&](const char* name, auto step) {
		CHECK(cudaMemcpyAsync(b.down, x0, DIM * 4, cudaMemcpyDeviceToDevice, st));
		step();
		CHECK(cudaStreamSynchronize(st));
		CHECK(cudaGetLastError());
		CHECK(cudaMemcpy(got.data(), b.logits, VOCAB * 4, cudaMemcpyDeviceToHost));
		if (reference) want = got;
		reference = false;
		int differ = 0;
		for (int i = 0; i < VOCAB; i++) differ += memcmp(&want[i], &got[i], 4) != 0;
		step(); // warm
		CHECK(cudaEventRecord(e0, st));
		for (int i = 0; i < tokens; i++) step();
		CHECK(cudaEventRecord(e1, st));
		CHECK(cudaEventSynchronize(e1));
		CHECK(cudaGetLastError());
		float ms;
		CHECK(cudaEventElapsedTime(&ms, e0, e1));
		ms /= tokens;
		printf("%-16s %7.3f ms a step %7.1f steps/s %6.0f GB/s  %d of %d logits differ from graph's\n", name, ms, 1e3 / ms,
		       total / (ms * 1e-3) / 1e9, differ, VOCAB);
	};

	// The graphs: a kernel a matrix, an attention kernel before each o; with and without PDL.
	auto graphOf = [&](bool pdl, bool own, auto run) {
		cudaGraph_t g;
		cudaGraphExec_t exec;
		CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
		for (int mi = 0; mi < nmats; mi++) {
			cudaLaunchAttribute attr[1];
			attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
			attr[0].val.programmaticStreamSerializationAllowed = 1;
			cudaLaunchConfig_t cfg = {};
			cfg.stream = st;
			cfg.attrs = attr;
			cfg.numAttrs = pdl && mi > 0 ? 1 : 0;
			if (mats[mi].kind == kO && !b.bare) {
				cfg.gridDim = dim3(HEADS);
				cfg.blockDim = dim3(128);
				CHECK(cudaLaunchKernelEx(&cfg, attention, b, mats[mi].layer));
			}
			cfg.numAttrs = pdl && (mi > 0 || !own) ? 1 : 0;
			if (!own) {
				cfg.gridDim = dim3(1);
				cfg.blockDim = dim3(128);
				CHECK(cudaLaunchKernelEx(&cfg, prep, (const Mat*)dmats, mi, b));
			}
			run(cfg, mi, own);
		}
		CHECK(cudaStreamEndCapture(st, &g));
		CHECK(cudaGraphInstantiate(&exec, g, 0));
		return exec;
	};
	auto runSingle = [&](auto kernel, size_t (*smem)(int)) {
		CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem(XMAX)));
		return [=](cudaLaunchConfig_t cfg, int mi, int own) {
			cfg.gridDim = dim3(mats[mi].n / 16);
			cfg.blockDim = dim3(128);
			cfg.dynamicSmemBytes = smem(mats[mi].kdim);
			CHECK(cudaLaunchKernelEx(&cfg, kernel, (const Mat*)dmats, mi, b, own));
		};
	};
	int sms;
	CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
	char name[64];
	for (int bare : {1, 0}) {
		b.bare = bare;
		reference = true;
		const char* mode = bare ? "bare " : "";
		cudaGraphExec_t g4 = graphOf(false, false, runSingle(single<4>, ringSmem<4>));
		cudaGraphExec_t g4p = graphOf(true, false, runSingle(single<4>, ringSmem<4>));
		cudaGraphExec_t g8p = graphOf(true, false, runSingle(single<8>, ringSmem<8>));
		cudaGraphExec_t o4 = graphOf(false, true, runSingle(single<4>, ringSmem<4>));
		cudaGraphExec_t o4p = graphOf(true, true, runSingle(single<4>, ringSmem<4>));
		snprintf(name, sizeof name, "%sgraph/4", mode);
		timeIt(name, [&] { CHECK(cudaGraphLaunch(g4, st)); });
		snprintf(name, sizeof name, "%sgraph+pdl/4", mode);
		timeIt(name, [&] { CHECK(cudaGraphLaunch(g4p, st)); });
		snprintf(name, sizeof name, "%sgraph+pdl/8", mode);
		timeIt(name, [&] { CHECK(cudaGraphLaunch(g8p, st)); });
		snprintf(name, sizeof name, "%sown/4", mode);
		timeIt(name, [&] { CHECK(cudaGraphLaunch(o4, st)); });
		snprintf(name, sizeof name, "%sown+pdl/4", mode);
		timeIt(name, [&] { CHECK(cudaGraphLaunch(o4p, st)); });
		auto persist = [&](auto kernel, int threads, size_t smem, int groups, const char* name, int skip = 0) {
			CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
			int fit;
			CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fit, kernel, threads, smem));
			if (fit * sms < groups) {
				printf("%-16s skipped: %d groups do not fit at once (%d an SM)\n", name, groups, fit);
				return;
			}
			timeIt(name, [&] {
				CHECK(cudaMemsetAsync(count, 0, 4, st));
				kernel<<<groups, threads, smem, st>>>(dmats, nmats, b, count, skip);
			});
		};
		for (int groups : {sms}) {
			snprintf(name, sizeof name, "%spersistent/8x4 %d", mode, groups);
			persist(persistent<8, 4>, 512, ringSmem<8, 4>(XMAX), groups, name);
			snprintf(name, sizeof name, "%spersistent/4x4 %d", mode, groups);
			persist(persistent<4, 4>, 512, ringSmem<4, 4>(XMAX), groups, name);
			snprintf(name, sizeof name, "%spersistent/8x3 %d", mode, groups);
			persist(persistent<8, 3>, 384, ringSmem<8, 3>(XMAX), groups, name);
			snprintf(name, sizeof name, "%spersistent/10x4 %d", mode, groups);
			persist(persistent<10, 4>, 512, ringSmem<10, 4>(XMAX), groups, name);
			// Timing only, the bits wrong on purpose: without the barriers, without x's staging,
			// without both (the weights' stream through the same MMAs alone).
			if (bare) {
				persist(persistent<8, 4>, 512, ringSmem<8, 4>(XMAX), groups, "(no barriers) 8x4", kNoBarriers);
				persist(persistent<8, 4>, 512, ringSmem<8, 4>(XMAX), groups, "(no staging) 8x4", kNoStaging);
				persist(persistent<8, 4>, 512, ringSmem<8, 4>(XMAX), groups, "(neither) 8x4", kNoBarriers | kNoStaging);
				persist(persistent<16, 2>, 256, ringSmem<16, 2>(XMAX), groups, "(neither) 16x2", kNoBarriers | kNoStaging);
				persist(persistent<4, 8>, 1024, ringSmem<4, 8>(XMAX), groups, "(neither) 4x8", kNoBarriers | kNoStaging);
				persist(persistent<8, 4>, 512, ringSmem<8, 4>(XMAX), groups, "(barriers alone) 8x4", kNoStaging | kNoWeights);
				persist(persistent<8, 4>, 512, ringSmem<8, 4>(XMAX), groups, "(phases alone) 8x4", kNoWeights);
			} else {
				persist(persistent<8, 4>, 512, ringSmem<8, 4>(XMAX), groups, "(phases alone) 8x4", kNoWeights);
			}
		}
	}

	// The ceiling: every byte of the step read once, many warps.
	float* sink = b.qkv;
	stream<<<sms * 16, 256, 0, st>>>((const uint4*)arena, total / 16, sink);
	CHECK(cudaEventRecord(e0, st));
	for (int i = 0; i < tokens; i++) stream<<<sms * 16, 256, 0, st>>>((const uint4*)arena, total / 16, sink);
	CHECK(cudaEventRecord(e1, st));
	CHECK(cudaEventSynchronize(e1));
	float ms;
	CHECK(cudaEventElapsedTime(&ms, e0, e1));
	ms /= tokens;
	printf("%-16s %7.3f ms a step %7.1f steps/s %6.0f GB/s\n", "plain read", ms, 1e3 / ms, total / (ms * 1e-3) / 1e9);
	return 0;
}
