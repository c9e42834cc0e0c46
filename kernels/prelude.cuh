// The dialect for CUDA C, compiled by NVRTC. Kernel signatures are emitted by the generator
// (kernels.go); bodies use only the names defined here and in common.h.
typedef unsigned int uint;
typedef unsigned short ushort;
typedef unsigned long long ulong;

// Threads: one block is one threadgroup. Indices are ints so that body arithmetic stays signed.
#define GROUP_X ((int)blockIdx.x)
#define GROUP_Y ((int)blockIdx.y)
#define LOCAL_X ((int)threadIdx.x)
#define GROUP_SIZE_X ((int)blockDim.x)
#define LANE (LOCAL_X & 31)
#define WARP (LOCAL_X >> 5)

// Memory and synchronisation.
#define GLOBAL
#define SHARED __shared__
#define BARRIER() __syncthreads()
#define SHFL_XOR(v, m) __shfl_xor_sync(0xffffffffu, (v), (m))
#define VLOAD(T, p) (*(const T*)(p))
// TG_VIEW(T, a): the threadgroup array a read and written as Ts (a float4 array as floats).
#define TG_VIEW(T, a) ((T*)(a))
#define FUNC static __device__ __forceinline__
#define UNROLL _Pragma("unroll")

// Programmatic dependent launch (sm_90 and later; cuda/pdl_linux.go). A kernel launched with the
// programmatic-serialization attribute may be started while the kernel before it on the stream is
// still running. GRID_WAIT waits until that kernel has finished and its writes are visible: a
// kernel reads nothing another kernel wrote, and writes nothing, before it. GRID_RELEASE lets the
// next kernel start once every group of this one has begun. Every kernel does both first
// (kernels.go emits them) unless its body calls GRID_WAIT itself, later: the packed matmuls fetch
// their first chunks of weights, which no kernel writes, before it. Launched without the
// attribute (older GPUs, TFD_CUDA_PDL=0) both do nothing.
#if __CUDA_ARCH__ >= 900
#define GRID_WAIT() asm volatile("griddepcontrol.wait;" ::: "memory")
#define GRID_RELEASE() asm volatile("griddepcontrol.launch_dependents;" ::: "memory")
#else
#define GRID_WAIT()
#define GRID_RELEASE()
#endif

// Arithmetic with the rounding spelled out: the _rn intrinsics are never contracted into fused
// multiply-adds, so each kernel's order of operations is exactly the one written.
#define FMA(a, b, c) __fmaf_rn((a), (b), (c))
#define MUL(a, b) __fmul_rn((a), (b))
#define ADD(a, b) __fadd_rn((a), (b))
#define SUB(a, b) __fsub_rn((a), (b))
#define DIV(a, b) __fdiv_rn((a), (b))
#define FMAX(a, b) fmaxf((a), (b))
#define EXP(x) expf(x)
// As the CPU backend: the F64 function of the F32 argument, rounded once to F32.
#define COS(a) ((float)cos((double)(a)))
#define SIN(a) ((float)sin((double)(a)))
#define RSQRT(v) ((float)(1.0 / sqrt((double)(v))))
#define LOG(x) ((float)log((double)(x)))
#define NEG_INF __int_as_float(0xff800000)
#define AS_FLOAT(u) __uint_as_float(u)
#define AS_UINT(f) __float_as_uint(f)
// Round to an integer, ties to even (the default rounding mode).
#define RINT(x) rintf(x)
// Ask for the 128-byte line holding p in L2, ahead of its loads (a hint: it changes no result). It
// reads nothing into the kernel, so it may come before GRID_WAIT: every kernel's writes land in
// L2, so a line asked for while the kernel before writes it is never stale there.
#define PREFETCH_L2(p) asm volatile("prefetch.global.L2 [%0];" ::"l"(p))
// The sum of the four products of the signed bytes of a and b, exactly (quantized weights).
#define DOT4_I8(a, b) __dp4a((int)(a), (int)(b), 0)

FUNC float f16_to_f32(ushort h) {
	float f;
	asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
	return f;
}

// The error word: [code, a, b, unused]. The first report wins.
#define ERRPTR int*
FUNC void report(ERRPTR err, int code, int a, int b) {
	if (atomicCAS(err, 0, code) == 0) {
		err[1] = a;
		err[2] = b;
	}
}

// The matrix unit (tensor cores): a SIMD group's share of a tile of 16 weight rows (outputs) by 8
// rows of x, summed over chunks of 32 elements of K (kernels/src/mma.kern).
//
// A chunk is two mma.sync.m16n8k16 with BF16 operands and F32 accumulation, each run twice: x is
// split exactly-to-16-bits into hi = bf16(x) and lo = bf16(x − hi), so x·w = hi·w + lo·w to 2⁻¹⁸
// of |x·w| (a BF16 weight is exact as an operand), and the four MMAs run hi, lo, hi, lo into one
// accumulator. Lane l (g = l/4, t = l%4) loads 8 consecutive elements of K, 8t … 8t+7, of weight
// rows g and g+8 and of x row g: one 16-byte load a weight row, two a row of x. Any order of K
// within a chunk gives the same sum, as long as a weight and its x meet in the same MMA: the first
// MMA takes elements 8t … 8t+3 of every lane, the second 8t+4 … 8t+7. An element of the tile is
// then one output's dot product with one row's, never touched by other rows or outputs, so the
// bits of a row do not depend on the rows beside it.
struct tfd_mma_acc {
	float c[4]; // (g, 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1): output, row
};
struct tfd_mma_a {
	// The A registers of the chunk's two steps, as mma.sync and wgmma take them: w[s] holds the
	// BF16 pairs at elements 8t+4s and 8t+4s+2 of rows g and g+8, in the order (g, 8t+4s),
	// (g+8, 8t+4s), (g, 8t+4s+2), (g+8, 8t+4s+2): the packed order's 16 bytes (kernels.PackMMA),
	// so that a load of them lands in the registers an MMA reads, with no copy to wait on.
	uint4 w[2];
};
struct tfd_mma_b {
	uint hi[4], lo[4]; // BF16 pairs of x[g][8t … 8t+7]
};
#define MMA_ACC tfd_mma_acc
#define MMA_A tfd_mma_a
#define MMA_B tfd_mma_b
// MMA_STAGE is the floats of SHARED memory a SIMD group lends its loads; CUDA loads registers
// straight from memory and needs none.
#define MMA_STAGE 1

FUNC void tfd_mma_zero(tfd_mma_acc& a) {
	a.c[0] = a.c[1] = a.c[2] = a.c[3] = 0.0f;
}

// tfd_mma_load_a loads 16 weight rows of 32 BF16 from w (row stride ldw elements); rows from nw
// on are zeros and are not read.
FUNC void tfd_mma_load_a(tfd_mma_a& a, const ushort* w, int ldw, int nw) {
	int g = LANE >> 2, t = LANE & 3;
	uint4 r0 = g < nw ? VLOAD(uint4, w + (ulong)g * ldw + 8 * t) : make_uint4(0, 0, 0, 0);
	uint4 r1 = g + 8 < nw ? VLOAD(uint4, w + (ulong)(g + 8) * ldw + 8 * t) : make_uint4(0, 0, 0, 0);
	a.w[0] = make_uint4(r0.x, r1.x, r0.y, r1.y);
	a.w[1] = make_uint4(r0.z, r1.z, r0.w, r1.w);
}

// tfd_bf16_pair packs bf16(a) in the low half and bf16(b) in the high half, each rounded to
// nearest even.
FUNC uint tfd_bf16_pair(float a, float b) {
	uint d;
	asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(b), "f"(a));
	return d;
}

// tfd_mma_x is a lane's share of 8 rows of 32 floats of x as loaded, before the split: elements
// 8t … 8t+7 of row g. A kernel that keeps chunks on the way holds them so, and splits each just
// before its MMAs (tfd_mma_b_of), so that the split never waits for a load.
struct tfd_mma_x {
	float v[8];
};

// tfd_mma_load_x loads 8 rows of 32 floats of x (row stride ldx); rows from nx on are zeros and
// are not read.
FUNC void tfd_mma_load_x(tfd_mma_x& xv, const float* x, int ldx, int nx) {
	int g = LANE >> 2, t = LANE & 3;
	if (g < nx) {
		float4 p = VLOAD(float4, x + (ulong)g * ldx + 8 * t), q = VLOAD(float4, x + (ulong)g * ldx + 8 * t + 4);
		xv.v[0] = p.x, xv.v[1] = p.y, xv.v[2] = p.z, xv.v[3] = p.w, xv.v[4] = q.x, xv.v[5] = q.y, xv.v[6] = q.z, xv.v[7] = q.w;
	} else {
		UNROLL
		for (int i = 0; i < 8; i++) xv.v[i] = 0.0f;
	}
}

// tfd_mma_store_x writes what tfd_mma_load_x loads back to x: rows from nx on are not written.
FUNC void tfd_mma_store_x(const tfd_mma_x& xv, float* x, int ldx, int nx) {
	int g = LANE >> 2, t = LANE & 3;
	if (g < nx) {
		float4 p = {xv.v[0], xv.v[1], xv.v[2], xv.v[3]}, q = {xv.v[4], xv.v[5], xv.v[6], xv.v[7]};
		*(float4*)(x + (ulong)g * ldx + 8 * t) = p;
		*(float4*)(x + (ulong)g * ldx + 8 * t + 4) = q;
	}
}

// tfd_mma_b_of splits a lane's x into the hi and lo BF16 pairs of the B operand.
FUNC void tfd_mma_b_of(tfd_mma_b& b, const tfd_mma_x& xv) {
	UNROLL
	for (int i = 0; i < 4; i++) {
		uint hi = tfd_bf16_pair(xv.v[2 * i], xv.v[2 * i + 1]);
		b.hi[i] = hi;
		b.lo[i] = tfd_bf16_pair(__fsub_rn(xv.v[2 * i], __uint_as_float(hi << 16)), __fsub_rn(xv.v[2 * i + 1], __uint_as_float(hi & 0xffff0000u)));
	}
}

// tfd_mma_load_b loads 8 rows of 32 floats of x (row stride ldx) and splits each into hi and lo;
// rows from nx on are zeros and are not read.
FUNC void tfd_mma_load_b(tfd_mma_b& b, const float* x, int ldx, int nx) {
	tfd_mma_x xv;
	tfd_mma_load_x(xv, x, ldx, nx);
	tfd_mma_b_of(b, xv);
}

// tfd_ld_stream loads 16 bytes of weights through the read-only path without a place in L1: each
// weight is read once, and L1 is better kept for x.
FUNC uint4 tfd_ld_stream(const ushort* p) {
	uint4 v;
	asm("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
	return v;
}

// tfd_mma_load_a_packed loads the chunk of 16 weight rows at w, stored in the packed order
// (kernels.PackMMA: lane l's 16 bytes of each step at elements 8l and 256 + 8l), into the
// registers tfd_mma_load_a fills from the row-major matrix, with two fully coalesced 512-byte
// loads. If nw <= 0 the band is past the matrix: zeros, and w is not read.
FUNC void tfd_mma_load_a_packed(tfd_mma_a& a, const ushort* w, int nw) {
	if (nw > 0) {
		a.w[0] = tfd_ld_stream(w + 8 * LANE);
		a.w[1] = tfd_ld_stream(w + 256 + 8 * LANE);
	} else {
		a.w[0] = a.w[1] = make_uint4(0, 0, 0, 0);
	}
}

// The ring: a kernel that streams weights keeps each SIMD group's next chunks on the way in SHARED
// memory, fetched by cp.async, and waits for the oldest by count (cp.async.wait_group), which the
// hardware tracks in order; loads into registers are waited for by scoreboards, of which a warp has
// six and ptxas merges a ring's loads onto one or two, so that each wait drains them all. Each
// lane fetches exactly the bytes it later reads, so a lane's own wait is the only synchronisation.
// A slot is 64 uint4 (1,024 bytes): a chunk of 16 packed weight rows (lane l's at l and 32 + l),
// or 8 rows of 32 floats of x (lane l = 4g + t: elements 8t … 8t+3 of row g at l, 8t+4 … 8t+7 at
// 32 + l). Bytes not fetched (past the matrix, or past rows) are zeros (the copy's src-size 0).
#define MMA_RING_DEPTH(d, s) (d)

// tfd_shared_addr is p's address in the shared window, as cp.async takes it.
FUNC uint tfd_shared_addr(const void* p) {
	uint a;
	asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
	return a;
}

// tfd_cp16 copies 16 bytes from global src to shared dst by cp.async, bypassing L1 (.cg: weights
// are read once) or keeping them there (.ca: x is read by every group); n = 0 writes zeros and
// reads nothing.
FUNC void tfd_cp16_cg(uint4* dst, const void* src, int n) {
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(tfd_shared_addr(dst)), "l"(src), "r"(n) : "memory");
}
FUNC void tfd_cp16_ca(uint4* dst, const void* src, int n) {
	asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;" ::"r"(tfd_shared_addr(dst)), "l"(src), "r"(n) : "memory");
}

// tfd_mma_fetch_a_packed starts the copy of the packed chunk at w into slot; zeros if nw <= 0.
FUNC void tfd_mma_fetch_a_packed(uint4* slot, const ushort* w, int nw) {
	int n = nw > 0 ? 16 : 0;
	tfd_cp16_cg(slot + LANE, n ? w + 8 * LANE : w, n);
	tfd_cp16_cg(slot + 32 + LANE, n ? w + 256 + 8 * LANE : w, n);
}

// tfd_mma_fetch_x starts the copy of 8 rows of 32 floats of x (row stride ldx) into slot; rows from
// nx on are zeros and are not read.
FUNC void tfd_mma_fetch_x(uint4* slot, const float* x, int ldx, int nx) {
	int g = LANE >> 2, t = LANE & 3;
	int n = g < nx ? 16 : 0;
	const float* p = n ? x + (ulong)g * ldx + 8 * t : x;
	tfd_cp16_ca(slot + LANE, p, n);
	tfd_cp16_ca(slot + 32 + LANE, n ? p + 4 : x, n);
}

// tfd_mma_a_of and tfd_mma_x_of read a lane's share of a fetched slot.
FUNC void tfd_mma_a_of(tfd_mma_a& a, const uint4* slot) {
	a.w[0] = slot[LANE];
	a.w[1] = slot[32 + LANE];
}
FUNC void tfd_mma_x_of(tfd_mma_x& xv, const uint4* slot) {
	uint4 p = slot[LANE], q = slot[32 + LANE];
	xv.v[0] = __uint_as_float(p.x), xv.v[1] = __uint_as_float(p.y), xv.v[2] = __uint_as_float(p.z), xv.v[3] = __uint_as_float(p.w);
	xv.v[4] = __uint_as_float(q.x), xv.v[5] = __uint_as_float(q.y), xv.v[6] = __uint_as_float(q.z), xv.v[7] = __uint_as_float(q.w);
}

FUNC void tfd_mma16816(tfd_mma_acc& d, uint a0, uint a1, uint a2, uint a3, uint b0, uint b1) {
	asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
	    : "+f"(d.c[0]), "+f"(d.c[1]), "+f"(d.c[2]), "+f"(d.c[3])
	    : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// tfd_mma_step adds one chunk: hi and lo of elements 8t … 8t+3, then of 8t+4 … 8t+7 (see above).
FUNC void tfd_mma_step(tfd_mma_acc& d, const tfd_mma_a& a, const tfd_mma_b& b) {
	tfd_mma16816(d, a.w[0].x, a.w[0].y, a.w[0].z, a.w[0].w, b.hi[0], b.hi[1]);
	tfd_mma16816(d, a.w[0].x, a.w[0].y, a.w[0].z, a.w[0].w, b.lo[0], b.lo[1]);
	tfd_mma16816(d, a.w[1].x, a.w[1].y, a.w[1].z, a.w[1].w, b.hi[2], b.hi[3]);
	tfd_mma16816(d, a.w[1].x, a.w[1].y, a.w[1].z, a.w[1].w, b.lo[2], b.lo[3]);
}

// tfd_mma_store writes the tile to s as s[output][row], 16 × 8 floats.
FUNC void tfd_mma_store(const tfd_mma_acc& a, float* s) {
	int g = LANE >> 2, t = LANE & 3;
	s[g * 8 + 2 * t] = a.c[0];
	s[g * 8 + 2 * t + 1] = a.c[1];
	s[(g + 8) * 8 + 2 * t] = a.c[2];
	s[(g + 8) * 8 + 2 * t + 1] = a.c[3];
}

// The dialect's names for the matrix unit. stage is the SIMD group's MMA_STAGE floats of SHARED
// memory, which CUDA does not use.
#define MMA_ZERO(acc) tfd_mma_zero(acc)
#define MMA_LOAD_A(a, w, ldw, nw, stage) tfd_mma_load_a(a, w, ldw, nw)
#define MMA_LOAD_B(b, x, ldx, nx, stage) tfd_mma_load_b(b, x, ldx, nx)
#define MMA_STEP(acc, a, b) tfd_mma_step(acc, a, b)
#define MMA_STORE(acc, s) tfd_mma_store(acc, s)
#define MMA_X tfd_mma_x
#define MMA_LOAD_X(xv, x, ldx, nx) tfd_mma_load_x(xv, x, ldx, nx)
#define MMA_STORE_X(xv, x, ldx, nx) tfd_mma_store_x(xv, x, ldx, nx)
#define MMA_B_OF(b, xv, stage) tfd_mma_b_of(b, xv)
#define MMA_LOAD_A_PACKED(a, w, nw, stage) tfd_mma_load_a_packed(a, w, nw)
// The ring (see above): MMA_SLOT is the SHARED element type of a ring (a slot is 64 of them);
// MMA_COMMIT closes the group of fetches this lane started since the last; MMA_WAIT(n) waits until
// at most n groups are still on the way (n a constant).
#define MMA_SLOT uint4
#define MMA_FETCH_A_PACKED(slot, w, nw) tfd_mma_fetch_a_packed(slot, w, nw)
#define MMA_FETCH_X(slot, x, ldx, nx) tfd_mma_fetch_x(slot, x, ldx, nx)
#define MMA_COMMIT() asm volatile("cp.async.commit_group;" ::: "memory")
#define MMA_WAIT(n) asm volatile("cp.async.wait_group %0;" ::"n"(n) : "memory")
#define MMA_A_OF(a, slot, stage) tfd_mma_a_of(a, slot)
#define MMA_X_OF(xv, slot) tfd_mma_x_of(xv, slot)

// x split once (mma_split_x, src/mmasplit.kern): a slot of 256 words holds 8 rows of 32 elements
// as the B operand, lane l's BF16 hi pairs (tfd_mma_b's hi) at words 4l … 4l+3 and its lo pairs at
// 128 + 4l …, so that a matmul reading it loads its operand with two 16-byte loads and does no
// split of its own.
struct tfd_mma_xs {
	uint4 hi, lo;
};
FUNC void tfd_mma_split_to(uint* slot, const tfd_mma_x& xv) {
	tfd_mma_b b;
	tfd_mma_b_of(b, xv);
	*(uint4*)(slot + 4 * LANE) = make_uint4(b.hi[0], b.hi[1], b.hi[2], b.hi[3]);
	*(uint4*)(slot + 128 + 4 * LANE) = make_uint4(b.lo[0], b.lo[1], b.lo[2], b.lo[3]);
}
FUNC void tfd_mma_b_of_xs(tfd_mma_b& b, const tfd_mma_xs& xb) {
	b.hi[0] = xb.hi.x, b.hi[1] = xb.hi.y, b.hi[2] = xb.hi.z, b.hi[3] = xb.hi.w;
	b.lo[0] = xb.lo.x, b.lo[1] = xb.lo.y, b.lo[2] = xb.lo.z, b.lo[3] = xb.lo.w;
}
// tfd_mma_fetch_xs starts the copy of a split slot into a ring slot (lane l's hi pairs at l, its
// lo pairs at 32 + l), and tfd_mma_b_of_slot reads them back as the B operand.
FUNC void tfd_mma_fetch_xs(uint4* slot, const uint* xs) {
	tfd_cp16_ca(slot + LANE, xs + 4 * LANE, 16);
	tfd_cp16_ca(slot + 32 + LANE, xs + 128 + 4 * LANE, 16);
}
FUNC void tfd_mma_b_of_slot(tfd_mma_b& b, const uint4* slot) {
	tfd_mma_xs xb;
	xb.hi = slot[LANE];
	xb.lo = slot[32 + LANE];
	tfd_mma_b_of_xs(b, xb);
}
#define MMA_FETCH_XS(slot, xs) tfd_mma_fetch_xs(slot, xs)
#define MMA_B_OF_SLOT(b, slot, stage) tfd_mma_b_of_slot(b, slot)
#define MMA_SPLIT_TO_x(slot, xv) tfd_mma_split_to(slot, xv)

// Hopper's warpgroup MMA (kernels/src/mmawg.kern): four SIMD groups (a warpgroup) add a k16 step
// of 64 weight rows by N rows of x at once, x read from SHARED memory. It adds exactly as
// mma.sync does (tools/bench/wgmma_bits.cu), so the steps of tfd_mma_step, hi, lo, hi, lo, give
// tfd_mma_step's bits. SIMD group w of a warpgroup holds weight rows 16w … 16w+15 in mma.sync's A
// registers (tfd_mma_a) and its accumulators as N/8 tfd_mma_acc, as mma.sync would lay them out.
// wgmma exists only in sm_90a's code, which the backend compiles for a GPU of compute capability
// 9.0 (and launches matmul_wg_bf16_N only there); elsewhere a launch would trap.

// matmul_wg_bf16_N's ring holds WG_DEPTH chunks of x; a SIMD group's MMAs on a chunk go on
// while it starts the next step (WG_LAG steps may still be running), so the ring is fetched
// WG_AHEAD chunks ahead.
#define WG_DEPTH 4
#define WG_LAG 1
#define WG_AHEAD (WG_DEPTH - 1 - WG_LAG)

// A slot of x for wgmma (mma_split_wg) holds 8 rows by the chunk's 32 elements as wgmma's B
// operand reads them without swizzling: four k16 steps (hi and lo of elements 8t … 8t+3, then of
// 8t+4 … 8t+7) of two 8×8 core matrices (k-slots 0–7, 8–15) of 8 rows of 16 bytes. Lane l = 4g+t
// holds, for each step and core, the BF16 pair of row g at k-slots 2t and 2t+1 (tfd_mma_b's hi[0]
// for step 0, core 0; hi[1] for core 1; lo[0] and lo[1] for step 1; hi[2], hi[3], lo[2], lo[3]):
// word 32·(2·step + core) + l.
FUNC void tfd_wg_split_to(uint* slot, const tfd_mma_x& xv) {
	tfd_mma_b b;
	tfd_mma_b_of(b, xv);
	int l = LANE;
	slot[l] = b.hi[0], slot[32 + l] = b.hi[1], slot[64 + l] = b.lo[0], slot[96 + l] = b.lo[1];
	slot[128 + l] = b.hi[2], slot[160 + l] = b.hi[3], slot[192 + l] = b.lo[2], slot[224 + l] = b.lo[3];
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// tfd_wg_desc is the shared-memory descriptor of a step's B operand at p: core matrices 128 bytes
// apart along K, groups of 8 rows (slots) 1 KiB apart, no swizzle.
FUNC ulong tfd_wg_desc(const void* p) {
	ulong a = tfd_shared_addr(p);
	return ((a & 0x3ffff) >> 4) | ((ulong)(128 >> 4) << 16) | ((ulong)(1024 >> 4) << 32);
}

// tfd_wg64 is one step, D += A·B, for 64 weight rows by 64 rows of x.
FUNC void tfd_wg64(tfd_mma_acc* d, uint a0, uint a1, uint a2, uint a3, ulong desc) {
	asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
	             "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1, 0;\n}"
	             : "+f"(d[0].c[0]), "+f"(d[0].c[1]), "+f"(d[0].c[2]), "+f"(d[0].c[3]), "+f"(d[1].c[0]), "+f"(d[1].c[1]), "+f"(d[1].c[2]), "+f"(d[1].c[3]), "+f"(d[2].c[0]), "+f"(d[2].c[1]), "+f"(d[2].c[2]), "+f"(d[2].c[3]), "+f"(d[3].c[0]), "+f"(d[3].c[1]), "+f"(d[3].c[2]), "+f"(d[3].c[3]), "+f"(d[4].c[0]), "+f"(d[4].c[1]), "+f"(d[4].c[2]), "+f"(d[4].c[3]), "+f"(d[5].c[0]), "+f"(d[5].c[1]), "+f"(d[5].c[2]), "+f"(d[5].c[3]), "+f"(d[6].c[0]), "+f"(d[6].c[1]), "+f"(d[6].c[2]), "+f"(d[6].c[3]), "+f"(d[7].c[0]), "+f"(d[7].c[1]), "+f"(d[7].c[2]), "+f"(d[7].c[3])
	             : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(desc));
}

// tfd_wg_chunk starts adding a chunk of x (the slots at slot) to d with tfd_mma_step's four
// steps, each an MMA of 64 weight rows by all of the slots' rows (tfd_wg64, or prelude_tma.cuh's
// tfd_wg128), one group of wgmma; d, the weights in a and the slots are the MMAs' until WG_WAIT
// says the group is done.
template <void (*MMA)(tfd_mma_acc*, uint, uint, uint, uint, ulong)>
FUNC void tfd_wg_chunk(tfd_mma_acc* d, const tfd_mma_a& a, const uint4* slot) {
	ulong desc = tfd_wg_desc(slot);
	asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
	MMA(d, a.w[0].x, a.w[0].y, a.w[0].z, a.w[0].w, desc);
	MMA(d, a.w[0].x, a.w[0].y, a.w[0].z, a.w[0].w, desc + (256 >> 4));
	MMA(d, a.w[1].x, a.w[1].y, a.w[1].z, a.w[1].w, desc + (512 >> 4));
	MMA(d, a.w[1].x, a.w[1].y, a.w[1].z, a.w[1].w, desc + (768 >> 4));
	asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}

// tfd_wg_step64 is a chunk of 64 rows (8 slots).
FUNC void tfd_wg_step64(tfd_mma_acc* d, const tfd_mma_a& a, const uint4* slot) { tfd_wg_chunk<tfd_wg64>(d, a, slot); }
// WG_WAIT(n) waits until at most n of this warpgroup's groups of wgmma are still running.
#define WG_WAIT(n) asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(n) : "memory")
#else
FUNC void tfd_wg_step64(tfd_mma_acc*, const tfd_mma_a&, const uint4*) { __trap(); }
#define WG_WAIT(n) ((void)(n))
#endif

// tfd_mma_fold adds cur to tot (or makes tot cur, first) and zeroes cur.
FUNC void tfd_mma_fold(tfd_mma_acc& tot, tfd_mma_acc& cur, bool first) {
	UNROLL
	for (int i = 0; i < 4; i++) {
		tot.c[i] = first ? cur.c[i] : ADD(tot.c[i], cur.c[i]);
		cur.c[i] = 0.0f;
	}
}

// tfd_mma_store_out writes the tile of outputs o … o+15 by rows r … r+7 to dst[row][output] (plus
// bias[output] if withBias), outputs from ndim and rows from rows left alone.
FUNC void tfd_mma_store_out(const tfd_mma_acc& a, float* dst, int ndim, int o, int r, int rows, const float* bias, int withBias) {
	int g = LANE >> 2, t = LANE & 3;
	UNROLL
	for (int i = 0; i < 4; i++) {
		int oo = o + g + 8 * (i >> 1), rr = r + 2 * t + (i & 1);
		if (oo < ndim && rr < rows) dst[(ulong)rr * ndim + oo] = withBias ? ADD(a.c[i], bias[oo]) : a.c[i];
	}
}

#define MMA_SPLIT_TO_wg(slot, xv) tfd_wg_split_to(slot, xv)
#define WG_FETCH16(dst, src, ok) tfd_cp16_cg(dst, src, (ok) ? 16 : 0)
// F4_FETCH starts the copy of the 16 bytes at src into the SHARED float4 at dst (zeros where ok is
// false, reading nothing), waited for by MMA_WAIT: attention_tile_H's stages of keys and values.
#define F4_FETCH(dst, src, ok) tfd_cp16_cg((uint4*)(dst), src, (ok) ? 16 : 0)
// WG_SHARED_READY orders this thread's finished copies into SHARED memory before wgmma's reads
// of them (the async proxy), ahead of the barrier that orders them for the other threads.
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define WG_SHARED_READY() asm volatile("fence.proxy.async.shared::cta;" ::: "memory")
#else
#define WG_SHARED_READY()
#endif
#define WG_STEP_64(acc, a, slot, stage) tfd_wg_step64(acc, a, slot)
#define MMA_FOLD(tot, cur, first, stage) tfd_mma_fold(tot, cur, first)
#define MMA_STORE_OUT(acc, dst, ndim, o, r, rows, bias, withBias, stage) tfd_mma_store_out(acc, dst, ndim, o, r, rows, bias, withBias)

// Attention on the matrix unit (src/attention_mma.kern): a stage of ATT_KEYS = 16 keys against a
// SIMD group's 8 query vectors, then the stage's values, by m16n8k16 MMAs with the keys (or the
// dims) as the MMA's 16 rows and the query vectors as its 8 columns. Every product is of two F32
// numbers, each split exactly into three BF16 pieces (tfd_att_split3: hi, mid and lo, 24 bits of
// it, all an F32 holds), as six MMAs in the order hi·hi, hi·mid, mid·hi, hi·lo, lo·hi, mid·mid
// (the three left out are within 2⁻²⁴ of the product). An accumulator holds its 16 × 8 tile as
// mma.sync lays it out (tfd_mma_acc): the scores' c[i] is key g + 8(i/2) of the stage by query
// vector 2t + i%2 of the SIMD group, for lane 4g + t; an output tile's c[i] is dim 16n + g + 8(i/2)
// by vector 2t + i%2; the kernel's masks, maxima and sums read them so, on every backend. The
// stage (ATT_STAGE4 uint4s of SHARED memory) is two buffers, each the stage's keys as F32 rows of
// 136 floats, then its values as rows of 132, copied by cp.async (ATT_FETCH_*, a buffer filled
// while the other is read); the padding puts a lane's loads of a fragment in different banks.
// The keys' and values' pieces are cut as each SIMD group loads its fragments; q's once.
// (Two BF16 pieces, three MMAs, fell short of the oracle tests' tolerances on the H200; query
// vectors as the MMA's 16 rows held twice the registers: docs/performance.md.)
#define ATT_KEYS 16
#define ATT_STAGE4 2144
#define ATT_STAGED 1
struct tfd_att_q {
	uint b[8][2][3]; // vector g's dims 16k+2t, +1 and 16k+8+2t, +1 as the B operand of step k: pieces
};
#define ATT_Q tfd_att_q
#define ATT_ACC tfd_mma_acc

FUNC void tfd_att_split3(uint* x, float a, float b) {
	x[0] = tfd_bf16_pair(a, b);
	float ra = __fsub_rn(a, __uint_as_float(x[0] << 16)), rb = __fsub_rn(b, __uint_as_float(x[0] & 0xffff0000u));
	x[1] = tfd_bf16_pair(ra, rb);
	x[2] = tfd_bf16_pair(__fsub_rn(ra, __uint_as_float(x[1] << 16)), __fsub_rn(rb, __uint_as_float(x[1] & 0xffff0000u)));
}

// tfd_att_cut cuts the pair (x, y) into its three pieces, as column i of the A operands a[0], a[1]
// and a[2].
FUNC void tfd_att_cut(uint (*a)[4], int i, float x, float y) {
	uint z[3];
	tfd_att_split3(z, x, y);
	a[0][i] = z[0]; a[1][i] = z[1]; a[2][i] = z[2];
}

// tfd_att_mma adds MMA m of a product's six to d: the pieces of A (a) and of B (b0, b1) in the
// order hi·hi, hi·mid, mid·hi, hi·lo, lo·hi, mid·mid.
FUNC void tfd_att_mma(tfd_mma_acc& d, const uint (*a)[4], const uint* b0, const uint* b1, int m) {
	const int pa[6] = {0, 0, 1, 0, 2, 1};
	const int pb[6] = {0, 1, 0, 2, 0, 1};
	const uint* x = a[pa[m]];
	tfd_mma16816(d, x[0], x[1], x[2], x[3], b0[pb[m]], b1[pb[m]]);
}

// tfd_att_load_q loads and cuts query vector g of the SIMD group (at q + og; zeros if not lg), dims
// below hd. (Metal's reads vectors 2t and 2t+1, at o0 and o1.)
FUNC void tfd_att_load_q(tfd_att_q& f, const float* q, ulong og, bool lg, int hd) {
	int t = LANE & 3;
	UNROLL
	for (int k = 0; k < 8; k++) {
		UNROLL
		for (int h = 0; h < 2; h++) {
			int d = 16 * k + 8 * h + 2 * t;
			float2 v = make_float2(0.0f, 0.0f);
			if (lg && d < hd) v = *(const float2*)(q + og + d);
			tfd_att_split3(f.b[k][h], v.x, v.y);
		}
	}
}

// tfd_att_fetch starts the copy of the 16 bytes at src (zeros if !ok) into dims d … d+3 of key (or
// value) j of buffer buf; tfd_att_put stores v there.
FUNC int tfd_att_at(int buf, bool value, int j, int d) { return 1072 * buf + (value ? 544 + 33 * j : 34 * j) + d / 4; }
FUNC void tfd_att_fetch(uint4* stage, int buf, bool value, int j, int d, const void* src, bool ok) {
	tfd_cp16_cg(stage + tfd_att_at(buf, value, j, d), src, ok ? 16 : 0);
}
FUNC void tfd_att_put(uint4* stage, int buf, bool value, int j, int d, float4 v) {
	*(float4*)(stage + tfd_att_at(buf, value, j, d)) = v;
}

// tfd_att_scores makes s, the tile of buffer buf's 16 keys by the SIMD group's 8 query vectors:
// dims in steps of 16 from 0; step k's hi·hi product into big[k%2] and its five others into
// small[k%2] (all from zero, each step's in order, two steps' MMAs interleaved); then
// s = (big[0] + big[1]) + (small[0] + small[1]).
FUNC void tfd_att_scores(tfd_mma_acc& s, const tfd_att_q& f, const uint4* stage, int buf, int hd) {
	const float* k = (const float*)(stage + 1072 * buf);
	int g = LANE >> 2, t = LANE & 3;
	tfd_mma_acc big[2], small[2];
	UNROLL
	for (int p = 0; p < 2; p++) {
		tfd_mma_zero(big[p]);
		tfd_mma_zero(small[p]);
	}
	UNROLL
	for (int k2 = 0; k2 < 4; k2++) {
		if (32 * k2 < hd) {
			uint a[2][3][4];
			UNROLL
			for (int p = 0; p < 2; p++) {
				int kk = 2 * k2 + p;
				UNROLL
				for (int i = 0; i < 4; i++) {
					// A: key g (i even) or g+8 (odd), dims 16kk + 2t (+8 for i ≥ 2).
					float2 x = *(const float2*)(k + 136 * (g + 8 * (i & 1)) + 16 * kk + 8 * (i >> 1) + 2 * t);
					tfd_att_cut(a[p], i, x.x, x.y);
				}
			}
			UNROLL
			for (int m = 0; m < 6; m++) {
				UNROLL
				for (int p = 0; p < 2; p++) {
					int kk = 2 * k2 + p;
					if (16 * kk < hd) tfd_att_mma(m == 0 ? big[p] : small[p], a[p], f.b[kk][0], f.b[kk][1], m);
				}
			}
		}
	}
	UNROLL
	for (int i = 0; i < 4; i++) s.c[i] = __fadd_rn(__fadd_rn(big[0].c[i], big[1].c[i]), __fadd_rn(small[0].c[i], small[1].c[i]));
}

// tfd_att_pv adds to o[n] (dims 16n … 16n+15 by the 8 query vectors) the products of buffer buf's
// values with p (the vectors' weights of its 16 keys, laid out as tfd_att_scores's s): six MMAs a
// tile in order, four tiles' MMAs interleaved.
FUNC void tfd_att_pv(tfd_mma_acc* o, const tfd_mma_acc& p, const uint4* stage, int buf, int hd) {
	const float* v = (const float*)(stage + 1072 * buf) + 2176;
	int g = LANE >> 2, t = LANE & 3;
	// B: vector g's weights of keys 2t, 2t+1 (b0) and 2t+8, 2t+9 (b1), from the lanes holding them:
	// key j of vector u is lane 4(j%8) + u/2's c[2(j/8) + u%2].
	int s0 = 4 * (2 * t) + (g >> 1), s1 = s0 + 4;
	float w[8];
	UNROLL
	for (int i = 0; i < 4; i++) {
		w[i] = __shfl_sync(0xffffffffu, p.c[i], s0);
		w[4 + i] = __shfl_sync(0xffffffffu, p.c[i], s1);
	}
	int e = g & 1;
	uint b0[3], b1[3];
	tfd_att_split3(b0, e ? w[1] : w[0], e ? w[5] : w[4]);
	tfd_att_split3(b1, e ? w[3] : w[2], e ? w[7] : w[6]);
	UNROLL
	for (int h = 0; h < 2; h++) {
		if (64 * h < hd) {
			uint a[4][3][4];
			UNROLL
			for (int n = 0; n < 4; n++) {
				UNROLL
				for (int i = 0; i < 4; i++) {
					// A: dim 16(4h+n) + g (+8 for odd i), keys 2t, 2t+1 (+8 for i ≥ 2).
					const float* vr = v + 132 * (2 * t + 8 * (i >> 1)) + 16 * (4 * h + n) + g + 8 * (i & 1);
					tfd_att_cut(a[n], i, vr[0], vr[132]);
				}
			}
			UNROLL
			for (int m = 0; m < 6; m++) {
				UNROLL
				for (int n = 0; n < 4; n++) tfd_att_mma(o[4 * h + n], a[n], b0, b1, m);
			}
		}
	}
}

#define ATT_LOAD_Q(f, q, o0, l0, o1, l1, og, lg, hd) tfd_att_load_q(f, q, og, lg, hd)
#define ATT_FETCH_K(stage, buf, j, d, src, ok) tfd_att_fetch(stage, buf, false, j, d, src, ok)
#define ATT_FETCH_V(stage, buf, j, d, src, ok) tfd_att_fetch(stage, buf, true, j, d, src, ok)
#define ATT_PUT_K(stage, buf, j, d, v) tfd_att_put(stage, buf, false, j, d, v)
#define ATT_PUT_V(stage, buf, j, d, v) tfd_att_put(stage, buf, true, j, d, v)
#define ATT_SCORES(s, f, stage, buf, kb, st, key0, kc, hd) tfd_att_scores(s, f, stage, buf, hd)
#define ATT_PV(o, p, stage, buf, vb, st, key0, kc, hd) tfd_att_pv(o, p, stage, buf, hd)
