// wgb: models of the prefill's many-row matmul on wgmma with both operands staged in shared memory
// by the copy engine (a ring of stages with mbarriers, a producer warp beside two warpgroups of
// consumers, 150-230 KiB of dynamic shared memory), in tfd's arithmetic, against a plain
// mma.sync kernel of that arithmetic bit for bit (docs/performance.md, "The prefill's matmul
// modelled with the copy engine", thirtieth session). The question asked before anything is built
// in kernels/: how much sooner than tfd's matmul_wg4_bf16_64 (128 outputs by 64 rows a group, the
// weights loaded into registers three chunks ahead, x through a ring of cp.async with a barrier
// a step) can a tile of 128 by 128 or 256 make the same bits on the H200, and with which layouts?
// On the GPU machine:
//
//   nvcc -O3 -gencode arch=compute_90a,code=sm_90a -o /tmp/wgb tools/bench/wgb.cu -lcuda && /tmp/wgb
//   (with -DROWS=64 or -DROWS=128 for forwards of that many rows; `/tmp/wgb all` also runs the
//   variants measured and dropped)
//
// tfd's arithmetic, as mma.kern and mmawg.kern make it: x split into BF16 hi and lo; a chunk of 32
// elements is two k16 steps, step s taking elements 8t+4s, 8t+4s+1 (k-slots 2t, 2t+1) and 8t+4s+2,
// 8t+4s+3 (k-slots 2t+8, 2t+9) for t < 4, each step hi then lo into one F32 accumulator; partial q
// sums chunks q, q+4, … from zero; the output is ((p0 + p1) + p2) + p3. wgmma adds as mma.sync
// does (wgmma_bits.cu) and with its operands traded too (wgmma_swap_bits.cu), so a kernel that
// keeps those steps, k-slots and additions gives tfd's bits.
//
// Two models, each a block of 288 threads: warpgroup w runs a partial's chunks into its
// accumulators from zero and at the partial's end adds them into a total kept in SHARED memory
// (each thread its own words, so a total takes no registers); warp 8 copies each chunk's stage
// (one bulk copy or one TMA copy a operand) and arms the stage's full barrier for its bytes; each
// consumer warp arrives on the stage's empty barrier once its warpgroup's MMAs on it are done.
// - wgb: x as A (64 rows a warpgroup, 128 a block) and the weights as B (BN outputs), both read
//   by wgmma from shared memory in layouts of the model's own (packX, packW).
// - wgbA: tfd's roles (the weights as A, each SIMD group's 16 outputs read into mma.sync's A
//   registers from the stage; x as B, NR rows), on tfd's own buffers (kernels.PackMMA's packed
//   order, mma_split_wg's slots) copied by TMA, or by 1 KiB bulk copies, or from tile-major
//   copies of them (tileMMA, tileWG).
#include <cstdint>
#include <cstdio>
#include <cuda.h>
#include <cuda_runtime.h>
#include <initializer_list>
#include <cstring>
#include <type_traits>

#include "bits.cuh"
#include "wgmma.cuh"

#ifndef ROWS
#define ROWS 256 // a forward of the prefill (-DROWS=64 or 128: the 64-stream decode's, the prompt's last)
#endif
constexpr int TR = 128;   // rows a block
constexpr int XS = 16384; // bytes of x a stage: 4 pieces × 128 rows × 16 k-slots × 2

// elem is the element of a chunk at k-slot j of step s.
__host__ __device__ inline int elem(int s, int j) { return 8 * ((j % 8) / 2) + 4 * s + 2 * (j / 8) + j % 2; }

// wgStep is one k16 step of a warpgroup's 64 rows by BN outputs.
template <int BN>
__device__ __forceinline__ void wgStep(float* d, uint64_t a, uint64_t b, int add) {
	if constexpr (BN == 256)
		wgs256(d, a, b, add);
	else
		wgs128(d, a, b, add);
}

// wgrStep is one k16 step of a warpgroup's 64 outputs by NR rows.
template <int NR>
__device__ __forceinline__ void wgrStep(float* d, uint4 a, uint64_t b) {
	if constexpr (NR == 256)
		wgr256(d, a, b);
	else if constexpr (NR == 128)
		wgr128(d, a, b);
	else
		wgr64(d, a, b);
}

__device__ __forceinline__ void mbarInit(uint32_t bar, int count) {
	asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbarArrive(uint32_t bar) {
	asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.shared::cta.b64 st, [%0];\n}" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbarExpect(uint32_t bar, int bytes) {
	asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1;\n}" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbarWait(uint32_t bar, int parity) {
	asm volatile("{\n.reg .pred done;\nWAIT_%=:\n"
	             "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
	             "@!done bra WAIT_%=;\n}" ::"r"(bar),
	             "r"(parity)
	             : "memory");
}
__device__ __forceinline__ void bulk(uint32_t dst, const void* src, int bytes, uint32_t bar) {
	asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst), "l"(src), "r"(bytes), "r"(bar)
	             : "memory");
}

// commitAndRelease closes chunk j's group of MMAs and waits for chunk j − 1's, whose stage each
// warp then gives back to the producer (the empty barrier counts a warp each).
__device__ __forceinline__ void commitAndRelease(int j, uint32_t empty, int st, int lane) {
	wgCommit();
	wgWait<1>();
	if (j > 0) {
		__syncwarp();
		if (lane == 0) mbarArrive(empty + 8 * ((j - 1) % st));
	}
}

// fold adds partial q's accumulators d into the total in shared memory (partial 0 starts it),
// thread tid's words R apart: tfd's ((p0 + p1) + p2) + p3, the last added where it is stored.
template <int R>
__device__ __forceinline__ void fold(float* tot, const float* d, int q, int tid) {
#pragma unroll
	for (int i = 0; i < R; i++) {
		float* p = tot + i * 256 + tid;
		*p = q == 0 ? d[i] : __fadd_rn(*p, d[i]);
	}
}

// wgb makes D[row][output] for rows TR·blockIdx.x … and outputs BN·blockIdx.y …; K = 32·chunks.
// P = 4: the block makes all four partials and D; P = 1: block z makes partial z alone and
// writes it to D as the scratch [4][ROWS][n], which sumParts adds. SETD (1): a partial's first
// MMA sets the accumulators (wgmma's scale-d 0) instead of adding to registers zeroed before it
// (0): ptxas serializes the MMAs wherever other instructions write their accumulators in the
// loop, but scale-d 0 can leave −0 where tfd's zeroed accumulator gives +0 (a partial whose
// every product is −0), so only 0 keeps every bit in every case.
// PIECES: each stage copied in bulk copies of 1 KiB, by lanes of warp 8, not two (a measure of
// what a copy's size costs).
template <int BN, int ST, int P, int SETD, int PIECES>
__global__ void __launch_bounds__(288, 1) wgb(const uint8_t* xg, const uint8_t* wg, float* D, int n, int chunks) {
	constexpr int WS = BN * 64; // bytes of weights a stage
	constexpr int SS = XS + WS;
	extern __shared__ __align__(1024) uint8_t sm[];
	float* tot = (float*)(sm + ST * SS); // [BN/2][256] (P = 4)
	uint32_t base = saddr(sm);
	uint32_t full = saddr(sm + ST * SS + (P == 4 ? BN / 2 * 256 * 4 : 0)), empty = full + 8 * ST;
	int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
	int rt = blockIdx.x, ot = blockIdx.y;
	if (tid == 0) {
		for (int s = 0; s < ST; s++) {
			mbarInit(full + 8 * s, 1);
			mbarInit(empty + 8 * s, 8);
		}
		asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
	}
	__syncthreads();
	int per = chunks / 4;        // chunks a partial
	int q0 = P == 4 ? 0 : blockIdx.z;
	int steps = P == 4 ? chunks : per;
	if (warp == 8) {
		for (int j = 0; j < steps; j++) {
			int c = q0 + j / per + 4 * (j % per), s = j % ST;
			if (j >= ST) mbarWait(empty + 8 * s, (j / ST - 1) & 1);
			if (lane == 0) mbarExpect(full + 8 * s, SS);
			__syncwarp();
			if (!PIECES) {
				if (lane == 0) {
					bulk(base + s * SS, xg + ((size_t)rt * chunks + c) * XS, XS, full + 8 * s);
					bulk(base + s * SS + XS, wg + ((size_t)ot * chunks + c) * WS, WS, full + 8 * s);
				}
				continue;
			}
			for (int u = lane; u < SS / 1024; u += 32) {
				const uint8_t* src = u < XS / 1024 ? xg + ((size_t)rt * chunks + c) * XS + u * 1024 : wg + ((size_t)ot * chunks + c) * WS + (u - XS / 1024) * 1024;
				bulk(base + s * SS + u * 1024, src, 1024, full + 8 * s);
			}
		}
		return;
	}
	int w = warp / 4;
	float d[BN / 2];
	for (int q = 0; q < P; q++) {
		if (!SETD) {
#pragma unroll
			for (int i = 0; i < BN / 2; i++) d[i] = 0.0f;
		}
		for (int i = 0; i < per; i++) {
			int j = q * per + i, s = j % ST;
			mbarWait(full + 8 * s, (j / ST) & 1);
			uint32_t xa = base + s * SS + w * 8 * 256, wa = base + s * SS + XS;
			wgFence();
			wgStep<BN>(d, desc(xa, 128, 256), desc(wa, 128, 256), !SETD || i > 0);     // hi, step 0
			wgStep<BN>(d, desc(xa + 4096, 128, 256), desc(wa, 128, 256), 1);            // lo, step 0
			wgStep<BN>(d, desc(xa + 8192, 128, 256), desc(wa + BN * 32, 128, 256), 1);  // hi, step 1
			wgStep<BN>(d, desc(xa + 12288, 128, 256), desc(wa + BN * 32, 128, 256), 1); // lo, step 1
			commitAndRelease(j, empty, ST, lane);
		}
		wgWait<0>();
		if (P == 4 && q < 3) fold<BN / 2>(tot, d, q, tid);
	}
	// Element 4i + e: row 16·(warp%4) + g + 8·(e/2) of the warpgroup's 64, output 8i + 2t + e%2.
	int g = lane / 4, t = lane % 4;
	float* dst = P == 4 ? D : D + (size_t)q0 * ROWS * n;
#pragma unroll
	for (int i = 0; i < BN / 8; i++)
		for (int h = 0; h < 2; h++) {
			int r = TR * rt + 64 * w + 16 * (warp % 4) + g + 8 * h, o = BN * ot + 8 * i + 2 * t;
			float a = d[4 * i + 2 * h], b = d[4 * i + 2 * h + 1];
			if (P == 4) {
				a = __fadd_rn(tot[(4 * i + 2 * h) * 256 + tid], a);
				b = __fadd_rn(tot[(4 * i + 2 * h + 1) * 256 + tid], b);
			}
			*(float2*)(dst + (size_t)r * n + o) = make_float2(a, b);
		}
}

// sumParts adds P = 1's partials into D as tfd's mma_sum_quarters does: ((p0 + p1) + p2) + p3.
__global__ void sumParts(const float* part, float* D, size_t count) {
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x)
		D[i] = __fadd_rn(__fadd_rn(__fadd_rn(part[i], part[count + i]), part[2 * count + i]), part[3 * count + i]);
}

// randX fills x[ROWS][k] with F32s of random sign, mantissa and an exponent within ±4 octaves.
__global__ void randX(float* x, size_t count, uint32_t seed) {
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x) {
		uint32_t r = mix(seed ^ mix((uint32_t)i));
		x[i] = ldexpf(1.0f + (float)(r & 0x7fffff) / 8388608.0f, (int)((r >> 23) % 9) - 4) * ((r >> 31) ? -1.f : 1.f);
	}
}

// split makes x's BF16 pieces as tfd's kernels do: hi rounded to nearest, lo the rest rounded.
__global__ void split(const float* x, uint16_t* hi, uint16_t* lo, size_t count) {
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x) {
		uint32_t h = bf16pair(x[i], 0.0f) & 0xffff;
		hi[i] = (uint16_t)h;
		lo[i] = (uint16_t)(bf16pair(__fsub_rn(x[i], __uint_as_float(h << 16)), 0.0f) & 0xffff);
	}
}

// packX lays the pieces out as the model's stages of x: [row tile][chunk][piece 2s+lo][row/8
// within the tile][k-slot/8][row%8][k-slot%8].
__global__ void packX(const uint16_t* hi, const uint16_t* lo, uint16_t* xg, int k) {
	int chunks = k / 32;
	size_t count = (size_t)ROWS * k * 2;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x) {
		size_t q = i;
		int j8 = q % 8, r8 = (q /= 8) % 8, kc = (q /= 8) % 2, rg = (q /= 2) % 16, p = (q /= 16) % 4, c = (q /= 4) % chunks;
		int rt = (int)(q / chunks);
		int row = TR * rt + 8 * rg + r8, e = 32 * c + elem(p / 2, 8 * kc + j8);
		xg[i] = (p % 2 ? lo : hi)[(size_t)row * k + e];
	}
}

// packW lays the weights W[n][k] out as the model's stages of weights: [output tile][chunk][step]
// [output/8 within the tile][k-slot/8][output%8][k-slot%8].
__global__ void packW(const uint16_t* w, uint16_t* wg, int n, int k, int bn) {
	int chunks = k / 32;
	size_t count = (size_t)n * k;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x) {
		size_t q = i;
		int j8 = q % 8, o8 = (q /= 8) % 8, kc = (q /= 8) % 2, og = (q /= 2) % (bn / 8), s = (q /= bn / 8) % 2, c = (q /= 2) % chunks;
		int ot = (int)(q / chunks);
		int o = bn * ot + 8 * og + o8, e = 32 * c + elem(s, 8 * kc + j8);
		wg[i] = w[(size_t)o * k + e];
	}
}

__device__ __forceinline__ uint32_t pair(const uint16_t* p) { return (uint32_t)p[0] | ((uint32_t)p[1] << 16); }

// wgbA is wgb with the operands as tfd's matmul_wg4_bf16_64 has them, and tfd's buffers as they
// are: the weights as A, each SIMD group's 16 outputs read into mma.sync's A registers from the
// stage, where the packed order (kernels.PackMMA: a band of 16 outputs, a chunk's 1 KiB, lane l's
// 16 bytes of step s at 512s + 16l) lands by bulk copies of a band's chunk; x as B, mma_split_wg's
// slots (8 rows, a chunk's 1 KiB, piece p of the four at 256p) copied the same way, NR/8 a stage.
// A block makes 128 outputs (warpgroup w: bands 4w … 4w+3) by NR rows. P as wgb's.
// TILED 1: the weights and x as tileMMA and tileWG lay them out, a stage's 8 bands, and its NR/8
// slots, one after another, so that a stage is two bulk copies. TILED 2: tfd's layouts as they
// are, a stage two copies of the tensor unit (TMA) through the maps tw (the packed weights as
// [bands][chunks·256 words]) and tx (the split as [slots][chunks·256 words]), a box of 8 bands,
// or NR/8 slots, by a chunk's 256 words. TILED 3: tfd's layouts copied by the producer warp's 32
// lanes with cp.async, 16 bytes each, each lane's copies counted on the full barrier as they land
// (cp.async.mbarrier.arrive.noinc; the barrier then waits for 32 arrivals, not one).
template <int NR, int ST, int P, int TILED>
__global__ void __launch_bounds__(288, 1) wgbA(const uint8_t* xs, const uint8_t* wp, float* D, int n, int chunks, const __grid_constant__ CUtensorMap tw, const __grid_constant__ CUtensorMap tx) {
	constexpr int WS = 8 * 1024, XB = NR / 8 * 1024, SS = WS + XB;
	extern __shared__ __align__(1024) uint8_t sm[];
	float* tot = (float*)(sm + ST * SS); // [NR/2][256] (P = 4)
	uint32_t base = saddr(sm);
	uint32_t full = saddr(sm + ST * SS + (P == 4 ? NR / 2 * 256 * 4 : 0)), empty = full + 8 * ST;
	int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
	int rt = blockIdx.x, ot = blockIdx.y;
	if (tid == 0) {
		for (int s = 0; s < ST; s++) {
			mbarInit(full + 8 * s, TILED == 3 ? 32 : 1);
			mbarInit(empty + 8 * s, 8);
		}
		asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
	}
	__syncthreads();
	int per = chunks / 4;
	int q0 = P == 4 ? 0 : blockIdx.z;
	int steps = P == 4 ? chunks : per;
	if (warp == 8) {
		// Lane 0 arms the stage's barrier for its bytes; then lane b copies band b's chunk and
		// lane g slot g's (one thread issuing 8 + NR/8 copies a stage held the whole kernel).
		for (int j = 0; j < steps; j++) {
			int c = q0 + j / per + 4 * (j % per), s = j % ST;
			if (j >= ST) mbarWait(empty + 8 * s, (j / ST - 1) & 1);
			if (TILED == 3) {
				for (int u = lane; u < SS / 16; u += 32) {
					int b = u / 64; // a 1 KiB piece: bands first, then slots
					const uint8_t* src = b < 8 ? wp + ((size_t)(8 * ot + b) * chunks + c) * 1024 : xs + ((size_t)(NR / 8 * rt + b - 8) * chunks + c) * 1024;
					asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(base + s * SS + 16 * u), "l"(src + 16 * (u % 64)) : "memory");
				}
				asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(full + 8 * s) : "memory");
				continue;
			}
			if (lane == 0) mbarExpect(full + 8 * s, SS);
			__syncwarp();
			if (TILED == 2) {
				if (lane == 0) {
					asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(base + s * SS), "l"(&tw), "r"(256 * c), "r"(8 * ot), "r"(full + 8 * s) : "memory");
					asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(base + s * SS + WS), "l"(&tx), "r"(256 * c), "r"(NR / 8 * rt), "r"(full + 8 * s) : "memory");
				}
				continue;
			}
			if (TILED) {
				if (lane == 0) {
					bulk(base + s * SS, wp + ((size_t)ot * chunks + c) * WS, WS, full + 8 * s);
					bulk(base + s * SS + WS, xs + ((size_t)rt * chunks + c) * XB, XB, full + 8 * s);
				}
				continue;
			}
			if (lane < 8) bulk(base + s * SS + lane * 1024, wp + ((size_t)(8 * ot + lane) * chunks + c) * 1024, 1024, full + 8 * s);
			for (int g = lane; g < NR / 8; g += 32)
				bulk(base + s * SS + WS + g * 1024, xs + ((size_t)(NR / 8 * rt + g) * chunks + c) * 1024, 1024, full + 8 * s);
		}
		return;
	}
	int w = warp / 4;
	float d[NR / 2];
	uint4 a[2][2]; // [chunk j % 2][step]: the A registers stay the MMAs' until they are done
	for (int q = 0; q < P; q++) {
#pragma unroll
		for (int i = 0; i < NR / 2; i++) {
			d[i] = 0.0f;
			// Pinned here: without it ptxas moved the zeroing of P = 1's one partial in among the
			// MMAs and serialized them (C7515).
			asm volatile("" : "+f"(d[i])::"memory");
		}
		for (int i = 0; i < per; i += 2) {
#pragma unroll
			for (int u = 0; u < 2; u++) {
				int j = q * per + i + u, s = j % ST;
				mbarWait(full + 8 * s, (j / ST) & 1);
				// cp.async writes through the generic proxy; wgmma reads through the async one.
				if (TILED == 3) asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
				const uint8_t* band = sm + s * SS + (4 * w + warp % 4) * 1024 + 16 * lane;
				a[u][0] = *(const uint4*)band;
				a[u][1] = *(const uint4*)(band + 512);
				uint32_t xa = base + s * SS + WS;
				wgFence();
				wgrStep<NR>(d, a[u][0], desc(xa, 128, 1024));       // hi, step 0
				wgrStep<NR>(d, a[u][0], desc(xa + 256, 128, 1024)); // lo, step 0
				wgrStep<NR>(d, a[u][1], desc(xa + 512, 128, 1024)); // hi, step 1
				wgrStep<NR>(d, a[u][1], desc(xa + 768, 128, 1024)); // lo, step 1
				commitAndRelease(j, empty, ST, lane);
			}
		}
		wgWait<0>();
		if (P == 4 && q < 3) fold<NR / 2>(tot, d, q, tid);
	}
	// Element 4i + e: output 16·(warp%4) + g + 8·(e/2) of the warpgroup's 64, row 8i + 2t + e%2.
	int g = lane / 4, t = lane % 4;
	float* dst = P == 4 ? D : D + (size_t)q0 * ROWS * n;
#pragma unroll
	for (int i = 0; i < NR / 8; i++)
#pragma unroll
		for (int e = 0; e < 4; e++) {
			int o = 128 * ot + 64 * w + 16 * (warp % 4) + g + 8 * (e / 2), r = NR * rt + 8 * i + 2 * t + e % 2;
			float v = d[4 * i + e];
			if (P == 4) v = __fadd_rn(tot[(4 * i + e) * 256 + tid], v);
			dst[(size_t)r * n + o] = v;
		}
}

// tileMMA lays the packed order out a tile of 128 outputs at a time: chunk c of the tile's 8
// bands one after another, [tile][chunk][band][1 KiB].
__global__ void tileMMA(const uint4* wp, uint4* wt, int n, int k) {
	int chunks = k / 32;
	size_t count = (size_t)n * k / 8; // uint4s
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x) {
		size_t q = i;
		int u = q % 64, b = (q /= 64) % 8, c = (q /= 8) % chunks;
		int ot = (int)(q / chunks);
		wt[i] = wp[((size_t)(8 * ot + b) * chunks + c) * 64 + u];
	}
}

// tileWG lays mma_split_wg's slots out a tile of nr rows at a time: [tile][chunk][slot][1 KiB].
__global__ void tileWG(const uint4* xs, uint4* xt, int k, int nr) {
	int chunks = k / 32, slots = nr / 8;
	size_t count = (size_t)ROWS * k / 4; // uint4s
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x) {
		size_t q = i;
		int u = q % 64, g = (q /= 64) % slots, c = (q /= slots) % chunks;
		int rt = (int)(q / chunks);
		xt[i] = xs[((size_t)(slots * rt + g) * chunks + c) * 64 + u];
	}
}

// packMMA lays W[n][k] out in tfd's packed order (kernels.PackMMA): band b of 16 outputs, chunk c
// at (b·chunks + c)·1 KiB; lane 4g+t's words of step s at 512s + 16(4g+t): pairs at elements
// 8t+4s of outputs g and g+8, then at 8t+4s+2 of each.
__global__ void packMMA(const uint16_t* w, uint32_t* wp, int n, int k) {
	int chunks = k / 32;
	size_t count = (size_t)n * k / 2; // words
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x) {
		size_t q = i;
		int m = q % 4, l = (q /= 4) % 32, s = (q /= 32) % 2, c = (q /= 2) % chunks;
		int b = (int)(q / chunks), g = l / 4, t = l % 4;
		int o = 16 * b + g + 8 * (m % 2), e = 32 * c + 8 * t + 4 * s + 2 * (m / 2);
		wp[i] = pair(w + (size_t)o * k + e);
	}
}

// splitWG lays x's pieces out as mma_split_wg does: slot (row group g, chunk c) at (g·chunks +
// c)·1 KiB, word 32·(2p + core) + 4r + t the pair of row 8g+r at elements 8t+4s+2·core of piece p
// (hi step 0, lo step 0, hi step 1, lo step 1; s = p/2).
__global__ void splitWG(const uint16_t* hi, const uint16_t* lo, uint32_t* xs, int k) {
	int chunks = k / 32;
	size_t count = (size_t)ROWS * k / 2 * 2; // words: hi and lo
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x) {
		size_t q = i;
		int l = q % 32, core = (q /= 32) % 2, p = (q /= 2) % 4, c = (q /= 4) % chunks;
		int g = (int)(q / chunks), r = 8 * g + l / 4, t = l % 4;
		int e = 32 * c + 8 * t + 4 * (p / 2) + 2 * core;
		xs[i] = pair((p % 2 ? lo : hi) + (size_t)r * k + e);
	}
}

// reference makes D[row][output] in tfd's order with mma.sync, the weights as A: a warp a tile of
// 16 outputs by 8 rows.
__global__ void reference(const uint16_t* w, const uint16_t* hi, const uint16_t* lo, float* D, int n, int k) {
	int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
	int tiles = n / 16;
	if (warp >= tiles * (ROWS / 8)) return;
	int o0 = 16 * (warp % tiles), r0 = 8 * (warp / tiles), chunks = k / 32;
	float tot[4] = {0, 0, 0, 0};
	for (int q = 0; q < 4; q++) {
		float acc[4] = {0, 0, 0, 0};
		for (int c = q; c < chunks; c += 4)
			for (int s = 0; s < 2; s++) {
				int e = 32 * c + 8 * t + 4 * s;
				const uint16_t* wa = w + (size_t)(o0 + g) * k + e;
				const uint16_t* wb = w + (size_t)(o0 + g + 8) * k + e;
				uint32_t a0 = pair(wa), a1 = pair(wb), a2 = pair(wa + 2), a3 = pair(wb + 2);
				size_t xe = (size_t)(r0 + g) * k + e;
				mma(acc, a0, a1, a2, a3, pair(hi + xe), pair(hi + xe + 2));
				mma(acc, a0, a1, a2, a3, pair(lo + xe), pair(lo + xe + 2));
			}
		for (int i = 0; i < 4; i++) tot[i] = q == 0 ? acc[i] : __fadd_rn(tot[i], acc[i]);
	}
	for (int i = 0; i < 4; i++) D[(size_t)(r0 + 2 * t + i % 2) * n + o0 + g + 8 * (i / 2)] = tot[i];
}

__global__ void differ(const float* a, const float* b, size_t count, unsigned long long* bad) {
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x)
		if (__float_as_uint(a[i]) != __float_as_uint(b[i])) atomicAdd(bad, 1ull);
}

// measure runs launch once into D (first filled with NaNs) and counts the outputs whose bits
// differ from ref's, then times 50 launches back to back: the differing outputs, and *us the
// microseconds a launch.
template <class F>
unsigned long long measure(F launch, float* D, const float* ref, size_t count, unsigned long long* bad, double* us) {
	CHECK(cudaMemset(D, 0xff, count * 4));
	launch();
	CHECK(cudaGetLastError());
	CHECK(cudaMemset(bad, 0, 8));
	differ<<<1024, 256>>>(D, ref, count, bad);
	unsigned long long hb;
	CHECK(cudaMemcpy(&hb, bad, 8, cudaMemcpyDeviceToHost));
	cudaEvent_t e0, e1;
	CHECK(cudaEventCreate(&e0));
	CHECK(cudaEventCreate(&e1));
	const int reps = 50;
	CHECK(cudaEventRecord(e0));
	for (int i = 0; i < reps; i++) launch();
	CHECK(cudaEventRecord(e1));
	CHECK(cudaEventSynchronize(e1));
	float ms;
	CHECK(cudaEventElapsedTime(&ms, e0, e1));
	CHECK(cudaEventDestroy(e0));
	CHECK(cudaEventDestroy(e1));
	*us = 1000.0 * ms / reps;
	return hb;
}

template <int BN, int ST, int P, int SETD, int PIECES = 0>
void run(const char* name, int n, int k, const uint16_t* w, const uint8_t* xg, const float* ref, float* D, float* part, unsigned long long* bad) {
	constexpr int SMEM = ST * (XS + BN * 64) + (P == 4 ? BN / 2 * 256 * 4 : 0) + 16 * ST;
	uint16_t* wg;
	CHECK(cudaMalloc(&wg, (size_t)n * k * 2));
	packW<<<2048, 256>>>(w, wg, n, k, BN);
	CHECK(cudaFuncSetAttribute(wgb<BN, ST, P, SETD, PIECES>, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM));
	dim3 grid(ROWS / TR, n / BN, P == 4 ? 1 : 4);
	size_t count = (size_t)ROWS * n;
	auto launch = [&] {
		if (P == 4) {
			wgb<BN, ST, P, SETD, PIECES><<<grid, 288, SMEM>>>(xg, (const uint8_t*)wg, D, n, k / 32);
		} else {
			wgb<BN, ST, P, SETD, PIECES><<<grid, 288, SMEM>>>(xg, (const uint8_t*)wg, part, n, k / 32);
			sumParts<<<1024, 256>>>(part, D, count);
		}
	};
	double us;
	unsigned long long hb = measure(launch, D, ref, count, bad, &us);
	double macs = 2.0 * ROWS * n * k;
	printf("%-8s %5d x %5d, rows %d, BN %3d, %d stages, P %d, %s%s, %6d B smem, %4d blocks: %8.1f us, %6.1f TFLOP/s of the matrix unit; %llu of %d outputs differ from tfd's order\n",
	       name, n, k, ROWS, BN, ST, P, SETD ? "scale-d 0" : "zeroed", PIECES ? ", 1 KiB copies" : "", SMEM, grid.x * grid.y * grid.z, us, 2 * macs / us * 1e-6, hb, (int)count);
	CHECK(cudaFree(wg));
}

// tmap is a 2D map of rows rows of chunks·256 words at p, boxes of box rows by 256 words.
CUtensorMap tmap(const void* p, int rows, int chunks, int box) {
	CUtensorMap m;
	cuuint64_t dims[2] = {(cuuint64_t)chunks * 256, (cuuint64_t)rows}, strides[1] = {(cuuint64_t)chunks * 1024};
	cuuint32_t boxes[2] = {256, (cuuint32_t)box}, elems[2] = {1, 1};
	CUresult r = cuTensorMapEncodeTiled(&m, CU_TENSOR_MAP_DATA_TYPE_UINT32, 2, (void*)p, dims, strides, boxes, elems, CU_TENSOR_MAP_INTERLEAVE_NONE,
	                                    CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
	if (r != CUDA_SUCCESS) {
		fprintf(stderr, "cuTensorMapEncodeTiled: %d\n", (int)r);
		exit(1);
	}
	return m;
}

template <int NR, int ST, int P, int TILED>
void runA(const char* name, int n, int k, const uint8_t* wp, const uint8_t* xs, const float* ref, float* D, float* part, unsigned long long* bad) {
	CUtensorMap tw = tmap(wp, n / 16, k / 32, 8), tx = tmap(xs, ROWS / 8, k / 32, NR / 8);
	constexpr int SMEM = ST * (8192 + NR * 128) + (P == 4 ? NR / 2 * 256 * 4 : 0) + 16 * ST;
	CHECK(cudaFuncSetAttribute(wgbA<NR, ST, P, TILED>, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM));
	dim3 grid(ROWS / NR, n / 128, P == 4 ? 1 : 4);
	size_t count = (size_t)ROWS * n;
	auto launch = [&] {
		if (P == 4) {
			wgbA<NR, ST, P, TILED><<<grid, 288, SMEM>>>(xs, wp, D, n, k / 32, tw, tx);
		} else {
			wgbA<NR, ST, P, TILED><<<grid, 288, SMEM>>>(xs, wp, part, n, k / 32, tw, tx);
			sumParts<<<1024, 256>>>(part, D, count);
		}
	};
	double us;
	unsigned long long hb = measure(launch, D, ref, count, bad, &us);
	double macs = 2.0 * ROWS * n * k;
	printf("%-8s %5d x %5d, rows %d, %s, weights as A, 128 outputs by %3d rows, %d stages, P %d, %6d B smem, %4d blocks: %8.1f us, %6.1f TFLOP/s of the matrix unit; %llu of %d outputs differ from tfd's order\n",
	       name, n, k, ROWS, TILED == 3 ? "tfd's layouts by cp.async" : TILED == 2 ? "tfd's layouts by TMA" : TILED ? "tiled layouts" : "tfd's layouts", NR, ST, P, SMEM, grid.x * grid.y * grid.z, us, 2 * macs / us * 1e-6, hb, (int)count);
}

int main(int argc, char** argv) {
	// "all": also the variants docs/performance.md measured and dropped (scale-d zeroing, 1 KiB
	// copies, the model's quarters, tfd's buffers by 1 KiB bulk copies and from tile-major copies).
	bool all = argc > 1 && strcmp(argv[1], "all") == 0;
	struct {
		const char* name;
		int n, k;
	} shapes[] = {{"gate/up", 24576, 4096}, {"q/k/v", 6144, 4096}, {"o", 4096, 4096}, {"down", 4096, 12288}};
	unsigned long long* bad;
	CHECK(cudaMalloc(&bad, 8));
	for (auto sh : shapes) {
		int n = sh.n, k = sh.k;
		uint16_t *w, *hi, *lo, *xg;
		float *x, *ref, *D, *part;
		CHECK(cudaMalloc(&w, (size_t)n * k * 2));
		CHECK(cudaMalloc(&x, (size_t)ROWS * k * 4));
		CHECK(cudaMalloc(&hi, (size_t)ROWS * k * 2));
		CHECK(cudaMalloc(&lo, (size_t)ROWS * k * 2));
		CHECK(cudaMalloc(&xg, (size_t)ROWS * k * 4));
		CHECK(cudaMalloc(&ref, (size_t)ROWS * n * 4));
		CHECK(cudaMalloc(&D, (size_t)ROWS * n * 4));
		CHECK(cudaMalloc(&part, (size_t)4 * ROWS * n * 4));
		fillBF16<<<2048, 256>>>((uint4*)w, (size_t)n * k / 8, 7 + n, 120, 8);
		randX<<<1024, 256>>>(x, (size_t)ROWS * k, 11 + k);
		split<<<1024, 256>>>(x, hi, lo, (size_t)ROWS * k);
		if (ROWS >= 128) packX<<<1024, 256>>>(hi, lo, xg, k);
		int warps = n / 16 * (ROWS / 8);
		reference<<<(warps + 3) / 4, 128>>>(w, hi, lo, ref, n, k);
		CHECK(cudaDeviceSynchronize());
		if (ROWS >= 128) run<128, 4, 4, 0>(sh.name, n, k, w, (const uint8_t*)xg, ref, D, part, bad);
		if (ROWS >= 128 && all) {
			run<128, 4, 4, 1>(sh.name, n, k, w, (const uint8_t*)xg, ref, D, part, bad);
			run<128, 4, 4, 0, 1>(sh.name, n, k, w, (const uint8_t*)xg, ref, D, part, bad);
			run<128, 6, 1, 0>(sh.name, n, k, w, (const uint8_t*)xg, ref, D, part, bad);
			if (ROWS >= 256) run<256, 4, 1, 0>(sh.name, n, k, w, (const uint8_t*)xg, ref, D, part, bad);
		}
		uint32_t *wp, *xs;
		CHECK(cudaMalloc(&wp, (size_t)n * k * 2));
		CHECK(cudaMalloc(&xs, (size_t)ROWS * k * 4));
		packMMA<<<2048, 256>>>(w, wp, n, k);
		splitWG<<<1024, 256>>>(hi, lo, xs, k);
		for (int how = 2; how <= 3; how++) {
			auto ra = [&](auto nr, auto st, auto p) {
				if (how == 2) runA<decltype(nr)::value, decltype(st)::value, decltype(p)::value, 2>(sh.name, n, k, (const uint8_t*)wp, (const uint8_t*)xs, ref, D, part, bad);
				else runA<decltype(nr)::value, decltype(st)::value, decltype(p)::value, 3>(sh.name, n, k, (const uint8_t*)wp, (const uint8_t*)xs, ref, D, part, bad);
			};
			using std::integral_constant;
			ra(integral_constant<int, 64>(), integral_constant<int, 6>(), integral_constant<int, 4>());
			ra(integral_constant<int, 64>(), integral_constant<int, 8>(), integral_constant<int, 1>());
			if (ROWS >= 128) {
				ra(integral_constant<int, 128>(), integral_constant<int, 4>(), integral_constant<int, 4>());
				ra(integral_constant<int, 128>(), integral_constant<int, 6>(), integral_constant<int, 1>());
			}
			if (ROWS >= 256) ra(integral_constant<int, 256>(), integral_constant<int, 4>(), integral_constant<int, 1>());
		}
		if (ROWS >= 128 && all) {
			runA<128, 4, 4, 0>(sh.name, n, k, (const uint8_t*)wp, (const uint8_t*)xs, ref, D, part, bad);
			uint4 *wt, *xt;
			CHECK(cudaMalloc(&wt, (size_t)n * k * 2));
			CHECK(cudaMalloc(&xt, (size_t)ROWS * k * 4));
			tileMMA<<<2048, 256>>>((const uint4*)wp, wt, n, k);
			tileWG<<<1024, 256>>>((const uint4*)xs, xt, k, 128);
			runA<128, 4, 4, 1>(sh.name, n, k, (const uint8_t*)wt, (const uint8_t*)xt, ref, D, part, bad);
			CHECK(cudaFree(wt));
			CHECK(cudaFree(xt));
		}
		CHECK(cudaFree(wp));
		CHECK(cudaFree(xs));
		CHECK(cudaDeviceSynchronize());
		for (void* p : {(void*)w, (void*)x, (void*)hi, (void*)lo, (void*)xg, (void*)ref, (void*)D, (void*)part}) CHECK(cudaFree(p));
	}
	return 0;
}
