// The dialect for Metal Shading Language, written to the MSL specification. Not yet compiled by
// Apple's compiler: on Linux it is compiled by clang against a shim and run on the CPU (see
// README.md, "What is verified"). Compile with fast math off (MTLMathModeSafe) so that the bodies'
// explicit operations keep their order.
#include <metal_stdlib>
using namespace metal;

// Even with fast math off, Metal may contract a*b+c into a fused multiply-add; the kernels' MUL
// and ADD must round separately, as on the CPU and CUDA (where the _rn intrinsics ensure it).
#pragma METAL fp contract(off)

// Threads: the generator appends to a kernel's parameters the thread-position arguments its body
// reads (tfd_group, tfd_local, tfd_size, tfd_lane, tfd_simd; kernels.go). LANE and WARP are
// Metal's own SIMD-group indices, not derived from the thread index; the kernels' butterflies and
// per-warp slots still assume SIMD groups of 32, as on every Apple GPU, so a backend must check
// that a pipeline's threadExecutionWidth is 32.
#define GROUP_X ((int)tfd_group.x)
#define GROUP_Y ((int)tfd_group.y)
#define LOCAL_X ((int)tfd_local.x)
#define GROUP_SIZE_X ((int)tfd_size.x)
#define LANE ((int)tfd_lane)
#define WARP ((int)tfd_simd)

// Memory and synchronisation.
#define GLOBAL device
#define SHARED threadgroup
#define BARRIER() threadgroup_barrier(mem_flags::mem_threadgroup)
#define SHFL_XOR(v, m) simd_shuffle_xor((v), (ushort)(m))
#define VLOAD(T, p) (*(const device T*)(p))
// TG_VIEW(T, a): the threadgroup array a read and written as Ts (a float4 array as floats). The
// cast names the address space alone: TFD_THREADGROUP where a checking shim's threadgroup says
// more than that (mslcheck/shim_compile's makes its arrays static too).
#ifdef TFD_THREADGROUP
#define TG_VIEW(T, a) ((TFD_THREADGROUP T*)(a))
#else
#define TG_VIEW(T, a) ((threadgroup T*)(a))
#endif
#define FUNC static inline
#define UNROLL _Pragma("unroll")
// A command buffer's kernels run one after another on Metal: the CUDA prelude's programmatic
// dependent launch has nothing to wait for here.
#define GRID_WAIT()
#define GRID_RELEASE()

// Arithmetic. Metal has no F64: COS, SIN, RSQRT and LOG use the precise F32 functions, which may
// differ from the CUDA and CPU backends in the last bit.
#define FMA(a, b, c) fma((a), (b), (c))
#define MUL(a, b) ((a) * (b))
#define ADD(a, b) ((a) + (b))
#define SUB(a, b) ((a) - (b))
#define DIV(a, b) ((a) / (b))
#define FMAX(a, b) fmax((a), (b))
#define EXP(x) precise::exp(x)
#define COS(a) precise::cos(a)
#define SIN(a) precise::sin(a)
#define RSQRT(v) (1.0f / precise::sqrt(v))
#define LOG(x) precise::log(x)
#define NEG_INF (-INFINITY)
#define AS_FLOAT(u) as_type<float>((uint)(u))
#define AS_UINT(f) as_type<uint>((float)(f))
// Round to an integer, ties to even.
// Metal has no prefetch instruction: a hint left out, which changes no result.
#define PREFETCH_L2(p) ((void)(p))
#define RINT(x) rint(x)
// The sum of the four products of the signed bytes of a and b, exactly (quantized weights).
#define DOT4_I8(a, b) tfd_dot4_i8((uint)(a), (uint)(b))

FUNC float f16_to_f32(ushort h) {
	return float(as_type<half>(h));
}

// Metal has no four-way byte dot product: each byte is sign-extended and the products summed.
FUNC int tfd_dot4_i8(uint a, uint b) {
	int s = 0;
	for (int i = 0; i < 4; i++) s += (as_type<int>(a << (24 - 8 * i)) >> 24) * (as_type<int>(b << (24 - 8 * i)) >> 24);
	return s;
}

// The error word: [code, a, b, unused]. The first report wins. MSL has only the weak
// compare-and-swap, which may fail spuriously: it is retried while the code is still 0.
#define ERRPTR device atomic_int*
FUNC void report(ERRPTR err, int code, int a, int b) {
	int expected = 0;
	while (!atomic_compare_exchange_weak_explicit(err, &expected, code, memory_order_relaxed, memory_order_relaxed)) {
		if (expected != 0) return; // another report won
	}
	atomic_store_explicit(err + 1, a, memory_order_relaxed);
	atomic_store_explicit(err + 2, b, memory_order_relaxed);
}

// The matrix unit (SIMD-group matrices): a SIMD group's share of a tile of 16 weight rows
// (outputs) by 8 rows of x, summed over chunks of 32 elements of K (kernels/src/mma.kern). The
// operands are F32 8×8 matrices: weights are widened exactly, x is used as it is. A chunk is
// staged through the SIMD group's MMA_STAGE floats of threadgroup memory (lane l, g = l/4,
// t = l%4, writes elements 8t … 8t+7 of weight rows g and g+8 and of x row g), loaded into
// matrices, and summed as 16×8 += (16×32)·(32×8): for each 8-row half of the outputs, the four
// 8×8 products in K order. An element of the tile is one output's dot product with one row's, so
// the bits of a row do not depend on the rows beside it.
struct tfd_mma_acc {
	simdgroup_float8x8 m[2]; // outputs 0–7 and 8–15, by rows 0–7
};
struct tfd_mma_a {
	simdgroup_float8x8 m[2][4]; // [output half][8 elements of K]
};
struct tfd_mma_b {
	simdgroup_float8x8 m[4]; // [8 elements of K] by rows 0–7
};
#define MMA_ACC tfd_mma_acc
#define MMA_A tfd_mma_a
#define MMA_B tfd_mma_b
// MMA_STAGE is the floats of threadgroup memory a SIMD group lends its loads: 16 rows of 32.
#define MMA_STAGE 512

FUNC void tfd_mma_zero(thread tfd_mma_acc& a) {
	a.m[0] = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
	a.m[1] = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
}

// tfd_mma_stage_words widens a lane's 8 BF16 of rows g and g+8 (u0 and u1; t = lane%4 says which
// 8 of the chunk) into the stage as s[row][k], then loads the matrices.
template <typename Stage>
FUNC void tfd_mma_stage_words(thread tfd_mma_a& a, uint4 u0, uint4 u1, Stage s, int lane) {
	int g = lane >> 2, t = lane & 3;
	for (int h = 0; h < 2; h++) {
		int r = g + 8 * h;
		uint4 u = h == 0 ? u0 : u1;
		float v[8];
		v[0] = AS_FLOAT(u.x << 16), v[1] = AS_FLOAT(u.x & 0xffff0000u), v[2] = AS_FLOAT(u.y << 16), v[3] = AS_FLOAT(u.y & 0xffff0000u);
		v[4] = AS_FLOAT(u.z << 16), v[5] = AS_FLOAT(u.z & 0xffff0000u), v[6] = AS_FLOAT(u.w << 16), v[7] = AS_FLOAT(u.w & 0xffff0000u);
		for (int i = 0; i < 8; i++) s[r * 32 + 8 * t + i] = v[i];
	}
	simdgroup_barrier(mem_flags::mem_threadgroup);
	for (int h = 0; h < 2; h++) {
		for (int k = 0; k < 4; k++) simdgroup_load(a.m[h][k], s + h * 256 + k * 8, 32);
	}
	simdgroup_barrier(mem_flags::mem_threadgroup); // the stage is free again
}

// tfd_zero4 is four zero words.
FUNC uint4 tfd_zero4() {
	uint4 z = 0u;
	return z;
}

// tfd_mma_stage_a widens a lane's 8 BF16 of rows g and g+8 (at p0 and p1) as tfd_mma_stage_words
// does. A row without has is zeros and is not read.
template <typename Stage>
FUNC void tfd_mma_stage_a(thread tfd_mma_a& a, const device ushort* p0, const device ushort* p1, bool has0, bool has1, Stage s, int lane) {
	tfd_mma_stage_words(a, has0 ? VLOAD(uint4, p0) : tfd_zero4(), has1 ? VLOAD(uint4, p1) : tfd_zero4(), s, lane);
}

// tfd_mma_load_a loads 16 weight rows of 32 BF16 from w (row stride ldw elements), widened, as
// s[row][k]; rows from nw on are zeros and are not read.
// The stage's type (threadgroup float*) is a template parameter in these functions only so that
// the MSL checks' clang, which cannot spell a threadgroup parameter, compiles them.
template <typename Stage>
FUNC void tfd_mma_load_a(thread tfd_mma_a& a, const device ushort* w, int ldw, int nw, Stage s, int lane) {
	int g = lane >> 2, t = lane & 3;
	tfd_mma_stage_a(a, w + (ulong)g * ldw + 8 * t, w + (ulong)(g + 8) * ldw + 8 * t, g < nw, g + 8 < nw, s, lane);
}

// tfd_mma_stage_steps stages a lane's share of a packed chunk as tfd_mma_stage_words does: q0 and
// q1 are its 16 bytes of steps 0 and 1 (kernels.PackMMA), each the pairs (g, 8t+4s), (g+8, 8t+4s),
// (g, 8t+4s+2), (g+8, 8t+4s+2), which give rows g and g+8 back.
template <typename Stage>
FUNC void tfd_mma_stage_steps(thread tfd_mma_a& a, uint4 q0, uint4 q1, Stage s, int lane) {
	uint4 r0, r1;
	r0.x = q0.x, r0.y = q0.z, r0.z = q1.x, r0.w = q1.z;
	r1.x = q0.y, r1.y = q0.w, r1.z = q1.y, r1.w = q1.w;
	tfd_mma_stage_words(a, r0, r1, s, lane);
}

// tfd_mma_load_a_packed loads the chunk of 16 weight rows at w, stored in the packed order
// (kernels.PackMMA: lane l's 16 bytes of each step at elements 8l and 256 + 8l), as
// tfd_mma_load_a does from the row-major matrix. If nw <= 0 the band is past the matrix: zeros,
// and w is not read. (The Metal backend keeps its matrices row-major; the packed kernels are
// here so that both backends compile every kernel and the MSL checks run them.)
template <typename Stage>
FUNC void tfd_mma_load_a_packed(thread tfd_mma_a& a, const device ushort* w, int nw, Stage s, int lane) {
	tfd_mma_stage_steps(a, nw > 0 ? VLOAD(uint4, w + 8 * lane) : tfd_zero4(), nw > 0 ? VLOAD(uint4, w + 256 + 8 * lane) : tfd_zero4(), s, lane);
}

// tfd_mma_x is a lane's share of 8 rows of 32 floats of x as loaded: elements 8t … 8t+7 of row g.
struct tfd_mma_x {
	float v[8];
};

// tfd_mma_load_x loads 8 rows of 32 floats of x (row stride ldx); rows from nx on are zeros and
// are not read.
FUNC void tfd_mma_load_x(thread tfd_mma_x& xv, const device float* x, int ldx, int nx, int lane) {
	int g = lane >> 2, t = lane & 3;
	for (int i = 0; i < 8; i++) xv.v[i] = g < nx ? x[(ulong)g * ldx + 8 * t + i] : 0.0f;
}

// tfd_mma_store_x writes what tfd_mma_load_x loads back to x: rows from nx on are not written.
FUNC void tfd_mma_store_x(thread tfd_mma_x& xv, device float* x, int ldx, int nx, int lane) {
	int g = lane >> 2, t = lane & 3;
	if (g < nx) {
		for (int i = 0; i < 8; i++) x[(ulong)g * ldx + 8 * t + i] = xv.v[i];
	}
}

// tfd_mma_b_of stages a lane's x as s[k][row], so that each 8×8 block of K loads as the matrix
// [k][row].
template <typename Stage>
FUNC void tfd_mma_b_of(thread tfd_mma_b& b, thread tfd_mma_x& xv, Stage s, int lane) {
	int g = lane >> 2, t = lane & 3;
	for (int i = 0; i < 8; i++) s[(8 * t + i) * 8 + g] = xv.v[i];
	simdgroup_barrier(mem_flags::mem_threadgroup);
	for (int k = 0; k < 4; k++) simdgroup_load(b.m[k], s + k * 64, 8);
	simdgroup_barrier(mem_flags::mem_threadgroup);
}

// tfd_mma_load_b loads 8 rows of 32 floats of x (row stride ldx) as s[k][row]; rows from nx on are
// zeros and are not read.
template <typename Stage>
FUNC void tfd_mma_load_b(thread tfd_mma_b& b, const device float* x, int ldx, int nx, Stage s, int lane) {
	tfd_mma_x xv;
	tfd_mma_load_x(xv, x, ldx, nx, lane);
	tfd_mma_b_of(b, xv, s, lane);
}

FUNC void tfd_mma_step(thread tfd_mma_acc& d, thread tfd_mma_a& a, thread tfd_mma_b& b) {
	for (int h = 0; h < 2; h++) {
		for (int k = 0; k < 4; k++) simdgroup_multiply_accumulate(d.m[h], a.m[h][k], b.m[k], d.m[h]);
	}
}

// tfd_mma_store writes the tile to s as s[output][row], 16 × 8 floats.
template <typename Stage>
FUNC void tfd_mma_store(thread tfd_mma_acc& a, Stage s) {
	simdgroup_store(a.m[0], s, 8);
	simdgroup_store(a.m[1], s + 64, 8);
}

// The dialect's names for the matrix unit. stage is the SIMD group's MMA_STAGE floats of threadgroup
// memory.
#define MMA_ZERO(acc) tfd_mma_zero(acc)
#define MMA_LOAD_A(a, w, ldw, nw, stage) tfd_mma_load_a(a, w, ldw, nw, stage, LANE)
#define MMA_LOAD_B(b, x, ldx, nx, stage) tfd_mma_load_b(b, x, ldx, nx, stage, LANE)
#define MMA_STEP(acc, a, b) tfd_mma_step(acc, a, b)
#define MMA_STORE(acc, s) tfd_mma_store(acc, s)
#define MMA_X tfd_mma_x
#define MMA_LOAD_X(xv, x, ldx, nx) tfd_mma_load_x(xv, x, ldx, nx, LANE)
#define MMA_STORE_X(xv, x, ldx, nx) tfd_mma_store_x(xv, x, ldx, nx, LANE)
#define MMA_B_OF(b, xv, stage) tfd_mma_b_of(b, xv, stage, LANE)
#define MMA_LOAD_A_PACKED(a, w, nw, stage) tfd_mma_load_a_packed(a, w, nw, stage, LANE)

// The ring (prelude.cuh says what it is for): here a fetch is a plain copy, done when called, so
// MMA_COMMIT and MMA_WAIT have nothing to do; a lane reads back only what it copied. Two slots a
// SIMD group for S = 1 (so that the checks still turn the ring), one for more, within the
// threadgroup memory of an Apple GPU.
#define MMA_RING_DEPTH(d, s) ((s) == 1 ? 2 : 1)
#define MMA_SLOT uint4
template <typename Slot>
FUNC void tfd_mma_fetch_a_packed(Slot slot, const device ushort* w, int nw, int lane) {
	slot[lane] = nw > 0 ? VLOAD(uint4, w + 8 * lane) : tfd_zero4();
	slot[32 + lane] = nw > 0 ? VLOAD(uint4, w + 256 + 8 * lane) : tfd_zero4();
}
template <typename Slot>
FUNC void tfd_mma_fetch_x(Slot slot, const device float* x, int ldx, int nx, int lane) {
	int g = lane >> 2, t = lane & 3;
	const device float* p = x + (ulong)(g < nx ? g : 0) * ldx + 8 * t;
	slot[lane] = g < nx ? as_type<uint4>(VLOAD(float4, p)) : tfd_zero4();
	slot[32 + lane] = g < nx ? as_type<uint4>(VLOAD(float4, p + 4)) : tfd_zero4();
}
template <typename Slot, typename Stage>
FUNC void tfd_mma_a_of(thread tfd_mma_a& a, Slot slot, Stage s, int lane) {
	tfd_mma_stage_steps(a, slot[lane], slot[32 + lane], s, lane);
}
template <typename Slot>
FUNC void tfd_mma_x_of(thread tfd_mma_x& xv, Slot slot, int lane) {
	uint4 p = slot[lane], q = slot[32 + lane];
	xv.v[0] = AS_FLOAT(p.x), xv.v[1] = AS_FLOAT(p.y), xv.v[2] = AS_FLOAT(p.z), xv.v[3] = AS_FLOAT(p.w);
	xv.v[4] = AS_FLOAT(q.x), xv.v[5] = AS_FLOAT(q.y), xv.v[6] = AS_FLOAT(q.z), xv.v[7] = AS_FLOAT(q.w);
}
#define MMA_FETCH_A_PACKED(slot, w, nw) tfd_mma_fetch_a_packed(slot, w, nw, LANE)
#define MMA_FETCH_X(slot, x, ldx, nx) tfd_mma_fetch_x(slot, x, ldx, nx, LANE)
#define MMA_COMMIT() ((void)0)
#define MMA_WAIT(n) ((void)(n))
#define MMA_A_OF(a, slot, stage) tfd_mma_a_of(a, slot, stage, LANE)
#define MMA_X_OF(xv, slot) tfd_mma_x_of(xv, slot, LANE)

// x split once (prelude.cuh says what for): here the matrix unit takes x as it is, so a slot holds
// the lane's 8 floats as they are (words 4l … 4l+3 and 128 + 4l …), and the matmul stages them as
// MMA_B_OF does.
template <typename Slot>
FUNC void tfd_mma_split_to(Slot slot, thread tfd_mma_x& xv, int lane) {
	for (int i = 0; i < 4; i++) {
		slot[4 * lane + i] = as_type<uint>(xv.v[i]);
		slot[128 + 4 * lane + i] = as_type<uint>(xv.v[4 + i]);
	}
}
template <typename Slot, typename Split>
FUNC void tfd_mma_fetch_xs(Slot slot, Split xs, int lane) {
	for (int i = 0; i < 4; i++) {
		slot[lane][i] = xs[4 * lane + i];
		slot[32 + lane][i] = xs[128 + 4 * lane + i];
	}
}
template <typename Slot, typename Stage>
FUNC void tfd_mma_b_of_slot(thread tfd_mma_b& b, Slot slot, Stage s, int lane) {
	tfd_mma_x xv;
	tfd_mma_x_of(xv, slot, lane);
	tfd_mma_b_of(b, xv, s, lane);
}
#define MMA_FETCH_XS(slot, xs) tfd_mma_fetch_xs(slot, xs, LANE)
#define MMA_B_OF_SLOT(b, slot, stage) tfd_mma_b_of_slot(b, slot, stage, LANE)
#define MMA_SPLIT_TO_x(slot, xv) tfd_mma_split_to(slot, xv, LANE)

// The warpgroup's matmul (kernels/src/mmawg.kern; prelude.cuh says what it is for). Here each
// SIMD group runs its own 16 outputs by N rows as mma.kern's tiles do, tile by tile, and the
// x split for it is mma_split_x's (the floats as they are). Two chunks in the ring: with the
// eight SIMD groups' stages that is the 32 KiB of threadgroup memory an Apple GPU has. A step's
// MMAs are done when it returns (WG_LAG 0), so the ring is fetched one chunk ahead.
#define WG_DEPTH 2
#define WG_LAG 0
#define WG_AHEAD (WG_DEPTH - 1 - WG_LAG)
#define WG_WAIT(n) ((void)(n))
#define MMA_SPLIT_TO_wg(slot, xv) tfd_mma_split_to(slot, xv, LANE)
#define WG_FETCH16(dst, src, ok) (*(dst) = (ok) ? VLOAD(uint4, src) : tfd_zero4())
// F4_FETCH (prelude.cuh says what for): here a plain copy, done when called.
#define F4_FETCH(dst, src, ok) (*(dst) = (ok) ? VLOAD(float4, src) : float4(0.0f))
#define WG_SHARED_READY() ((void)0)

// tfd_wg_step64 adds a chunk of x (8 slots of 8 rows at slot) to d[0 … 7], as tfd_mma_step does.
template <typename Slot, typename Stage>
FUNC void tfd_wg_step64(thread tfd_mma_acc* d, thread tfd_mma_a& a, Slot slot, Stage s, int lane) {
	for (int i = 0; i < 8; i++) {
		tfd_mma_b b;
		tfd_mma_b_of_slot(b, slot + 64 * i, s, lane);
		tfd_mma_step(d[i], a, b);
	}
}

// tfd_mma_fold adds cur to tot (or makes tot cur, first), element by element through the stage,
// and zeroes cur.
template <typename Stage>
FUNC void tfd_mma_fold(thread tfd_mma_acc& tot, thread tfd_mma_acc& cur, bool first, Stage s, int lane) {
	if (first) {
		tot = cur;
	} else {
		tfd_mma_store(tot, s);
		tfd_mma_store(cur, s + 128);
		simdgroup_barrier(mem_flags::mem_threadgroup);
		for (int e = lane; e < 128; e += 32) s[e] = ADD(s[e], s[128 + e]);
		simdgroup_barrier(mem_flags::mem_threadgroup);
		simdgroup_load(tot.m[0], s, 8);
		simdgroup_load(tot.m[1], s + 64, 8);
		simdgroup_barrier(mem_flags::mem_threadgroup);
	}
	tfd_mma_zero(cur);
}

// tfd_mma_store_out writes the tile of outputs o … o+15 by rows r … r+7 to dst[row][output] (plus
// bias[output] if withBias) through the stage, outputs from ndim and rows from rows left alone.
template <typename Stage>
FUNC void tfd_mma_store_out(thread tfd_mma_acc& a, device float* dst, int ndim, int o, int r, int rows, const device float* bias, int withBias, Stage s, int lane) {
	tfd_mma_store(a, s);
	simdgroup_barrier(mem_flags::mem_threadgroup);
	for (int e = lane; e < 128; e += 32) {
		int oo = o + e / 8, rr = r + e % 8;
		if (oo < ndim && rr < rows) dst[(ulong)rr * ndim + oo] = withBias ? ADD(s[e], bias[oo]) : s[e];
	}
	simdgroup_barrier(mem_flags::mem_threadgroup);
}
#define WG_STEP_64(acc, a, slot, stage) tfd_wg_step64(acc, a, slot, stage, LANE)
#define MMA_FOLD(tot, cur, first, stage) tfd_mma_fold(tot, cur, first, stage, LANE)
#define MMA_STORE_OUT(acc, dst, ndim, o, r, rows, bias, withBias, stage) tfd_mma_store_out(acc, dst, ndim, o, r, rows, bias, withBias, stage, LANE)

// The copy engine's matmul (kernels/src/mmawgt.kern; prelude_tma.cuh says what it is for), in
// lock step: a SIMD group that spins on threadgroup memory for a producer's flag has no promise
// of progress here, so there is no producer (WGT_PRODUCER is false) and the whole group, its
// ninth SIMD group too, copies each chunk's x into a single stage between two barriers
// (WGT_READY); each SIMD group's weights come from the buffer as mma.kern's do. The stage of 128
// rows (16 KiB) and the eight SIMD groups' MMA_STAGEs (16 KiB) fill the 32 KiB an Apple GPU has.
#define MAP(T) const device T*
#define MAP_OF(m) (m)
#define DYNAMIC_SHARED(name, metalBytes) threadgroup uint4 name[(metalBytes) / 16]
#define WGT_PRODUCER false
#define WGT_CONSUMER (WARP < 8) // the ninth SIMD group only copies
#define WG_PIN(acc) ((void)0)

// tfd_wgt_ready copies chunk c of slots slot0 … slot0+n/8−1 of x (zeros from row rows) into the
// stage, the kernel's 288 threads a uint4 each in turn, once every SIMD group is done with the
// chunk before.
template <typename Ring>
FUNC void tfd_wgt_ready(Ring ring, int n, const device uint* x, int slot0, int c, int rows, int chunks, uint tid) {
	BARRIER();
	for (int i = tid; i < n / 8 * 64; i += 288) {
		int g = slot0 + i / 64;
		ring[i] = 8 * g < rows ? VLOAD(uint4, x + ((ulong)g * chunks + c) * 256 + (i % 64) * 4) : tfd_zero4();
	}
	BARRIER();
}
#define WGT_START(ring, stages, n) ((void)(stages))
#define WGT_FETCH(ring, stages, n, j, s, ph, w, band0, x, slot0, c) ((void)0)
#define WGT_READY(ring, stages, n, s, ph, xs, slot0, c, rows, chunks) ((void)(ph), tfd_wgt_ready(ring, n, xs, slot0, c, rows, chunks, tfd_local.x))
#define WGT_LOAD_A(a, ring, stages, n, s, w, band, chunks, c, stage) MMA_LOAD_A_PACKED(a, (w) + ((ulong)(band) * (chunks) + (c)) * 512, 16, stage)
#define WGT_STEP(acc, a, ring, stages, n, s, stage) \
	for (int tfd_h = 0; tfd_h < (n) / 64; tfd_h++) tfd_wg_step64((acc) + 8 * tfd_h, a, (ring) + 512 * tfd_h, stage, LANE)
#define WGT_RELEASE(ring, stages, n, sp) ((void)(sp))

// Attention on the matrix unit (src/attention_mma.kern), emulated. The tiles and their layout are
// CUDA's (prelude.cuh): the scores' c[i] is key g + 8(i/2) of the stage by query vector 2t + i%2
// of the SIMD group, an output tile's c[i] dim 16n + g + 8(i/2) by vector 2t + i%2, for lane
// 4g + t. A score is a dot product in F32, fused multiply-adds in dim order; a value's term a
// fused multiply-add of the key's weight, the weights passed among the lanes of the same t by
// xor 0, 4, …, 28. Queries, keys and values are read where they are, in device memory (zeros past
// the stage's kc): nothing is staged (ATT_STAGED 0).
#define ATT_KEYS 16
#define ATT_STAGE4 1
#define ATT_STAGED 0
struct tfd_att_q {
	const device float* q;
	ulong o[2];    // vectors 2t and 2t+1
	bool live[2];
};
struct tfd_att_acc {
	float c[4];
};
#define ATT_Q tfd_att_q
#define ATT_ACC tfd_att_acc

// tfd_att_kv reads element i of an F32 or F16 pool, widened exactly.
FUNC float tfd_att_kv(const device float* p, ulong i) { return p[i]; }
FUNC float tfd_att_kv(const device ushort* p, ulong i) { return f16_to_f32(p[i]); }

template <typename KV>
FUNC void tfd_att_scores(thread tfd_att_acc& s, thread const tfd_att_q& f, KV kb, int st, int key0, int kc, int hd, int lane) {
	int g = lane >> 2;
	for (int i = 0; i < 4; i++) {
		int j = g + 8 * (i >> 1);
		int e = i & 1;
		float a = 0.0f;
		if (j < kc && f.live[e]) {
			for (int d = 0; d < hd; d++) a = FMA(f.q[f.o[e] + d], tfd_att_kv(kb, (ulong)(key0 + j) * st + d), a);
		}
		s.c[i] = a;
	}
}

template <typename KV>
FUNC void tfd_att_pv(thread tfd_att_acc* o, thread const tfd_att_acc& p, KV vb, int st, int key0, int kc, int hd, int lane) {
	int g = lane >> 2;
	for (int m = 0; m < 8; m++) {
		float w[4];
		for (int i = 0; i < 4; i++) w[i] = SHFL_XOR(p.c[i], m << 2);
		for (int i = 0; i < 4; i++) {
			int j = (g ^ m) + 8 * (i >> 1); // the key of the weight w[i], of vector 2t + i%2
			if (j >= kc) continue;
			for (int n = 0; 16 * n < hd; n++) {
				for (int y = 0; y < 2; y++) {
					int d = 16 * n + g + 8 * y;
					float v = d < hd ? tfd_att_kv(vb, (ulong)(key0 + j) * st + d) : 0.0f;
					o[n].c[2 * y + (i & 1)] = FMA(w[i], v, o[n].c[2 * y + (i & 1)]);
				}
			}
		}
	}
}

#define ATT_LOAD_Q(f, q_, o0, l0, o1, l1, og, lg, hd) { f.q = q_; f.o[0] = o0; f.o[1] = o1; f.live[0] = l0; f.live[1] = l1; }
#define ATT_FETCH_K(stage, buf, j, d, src, ok) ((void)(stage), (void)(src))
#define ATT_FETCH_V(stage, buf, j, d, src, ok) ((void)(stage), (void)(src))
#define ATT_PUT_K(stage, buf, j, d, v) ((void)(stage), (void)(v))
#define ATT_PUT_V(stage, buf, j, d, v) ((void)(stage), (void)(v))
#define ATT_SCORES(s, f, stage, buf, kb, st, key0, kc, hd) tfd_att_scores(s, f, kb, st, key0, kc, hd, LANE)
#define ATT_PV(o, p, stage, buf, vb, st, key0, kc, hd) tfd_att_pv(o, p, vb, st, key0, kc, hd, LANE)
