// The copy engine's matmul (kernels/src/mmawgt.kern), CUDA's half: dynamic shared memory, tensor
// maps, a ring of stages filled by the tensor memory accelerator (TMA) and guarded by mbarriers,
// and wgmma on 64 weight rows by 128 rows of x. Appended to prelude.cuh; Hopper's operations are
// in sm_90a's code only, which the backend compiles for compute capability 9.0 and where alone it
// launches these kernels (elsewhere they trap).
//
// A ring of stages, each a chunk's weights for the group's 128 outputs (8 bands of the packed
// order, kernels.PackMMA: 8 KiB) and then its x (N/8 slots of mma_split_wg: N/8 KiB), is copied
// by the group's producer SIMD group (WGT_PRODUCER), a stage at a time, each by two TMA copies
// that arm the stage's full barrier for its bytes; the eight others wait on it (WGT_READY), load
// their 16 outputs' A registers from the stage, run the chunk's wgmma on its x (WGT_STEP) and,
// once those are done, give the stage back on its empty barrier (WGT_RELEASE: a SIMD group an
// arrival). The ring's `stages` stages, then `stages` full and `stages` empty barriers, fill the
// launch's dynamic shared memory (kernels.WGTShared). docs/performance.md ("The prefill's matmul
// modelled with the copy engine") measured the design in tools/bench/wgb.cu.

// tfd_tensor_map is CUDA's CUtensorMap (NVRTC has no cuda.h): 128 opaque bytes, 64-byte aligned.
struct __align__(64) tfd_tensor_map {
	ulong opaque[16];
};
// MAP(T) is the type of a reference to a map parameter of elements T; MAP_OF(m) takes one.
#define MAP(T) const tfd_tensor_map*
#define MAP_OF(m) (&(m))
// DYNAMIC_SHARED(name, metalBytes) declares the launch's dynamic shared memory as uint4s (metalBytes
// is Metal's static size).
#define DYNAMIC_SHARED(name, metalBytes) extern __shared__ __align__(1024) uint4 name[]

// A stage's bytes: the weights', then n rows of x's.
static constexpr int tfd_wgt_w_bytes = 8192;
FUNC int tfd_wgt_stage_bytes(int n) { return tfd_wgt_w_bytes + n * 128; }
#define WGT_PRODUCER (WARP == 8)
// WGT_CONSUMER: a SIMD group that runs MMAs, here every one past the producer's return (a test
// of WARP there made ptxas serialize the wgmma, C7518: "in divergent path").
#define WGT_CONSUMER 1

// tfd_wgt_full is the shared address of stage s's full barrier; its empty one is 8·stages on.
FUNC uint tfd_wgt_full(const uint4* ring, int stages, int n, int s) {
	return tfd_shared_addr(ring) + stages * tfd_wgt_stage_bytes(n) + 8 * s;
}

// WG_PIN(acc) keeps acc's zeroing where it is written: ptxas otherwise moves it in among the
// wgmma that add to acc and serializes them (C7515).
#define WG_PIN(acc) asm volatile("" : "+f"((acc).c[0]), "+f"((acc).c[1]), "+f"((acc).c[2]), "+f"((acc).c[3])::"memory")

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
FUNC void tfd_mbar_wait(uint bar, int parity) {
	asm volatile("{\n.reg .pred done;\nWAIT_%=:\n"
	             "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
	             "@!done bra WAIT_%=;\n}" ::"r"(bar),
	             "r"(parity)
	             : "memory");
}

// tfd_wgt_start readies the ring's barriers: each full one waits for one arrival (the producer's,
// with its copies' bytes), each empty one for the eight consumer SIMD groups'.
FUNC void tfd_wgt_start(const uint4* ring, int stages, int n) {
	if (LOCAL_X != 0) return;
	uint full = tfd_wgt_full(ring, stages, n, 0);
	for (int s = 0; s < stages; s++) {
		asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(full + 8 * s) : "memory");
		asm volatile("mbarrier.init.shared::cta.b64 [%0], 8;" ::"r"(full + 8 * (stages + s)) : "memory");
	}
	asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// tfd_wgt_copy starts the TMA copy of the box at (word col, row) of map m to the shared address
// dst, counted on the barrier bar as it lands.
FUNC void tfd_wgt_copy(uint dst, const tfd_tensor_map* m, int col, int row, uint bar) {
	asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(dst), "l"(m), "r"(col), "r"(row), "r"(bar)
	             : "memory");
}

// tfd_wgt_fetch is the producer's step j: once stage s is empty (its chunk of the ring's turn
// before, whose parity is ph's other, done; none before the first turn), copy chunk c of bands
// band0 … band0+7 of w and of slots slot0 … slot0+n/8−1 of x into it. Boxes past a map's end
// land as zeros, which only make outputs and rows never stored.
FUNC void tfd_wgt_fetch(const uint4* ring, int stages, int n, int j, int s, int ph, const tfd_tensor_map* w, int band0, const tfd_tensor_map* x, int slot0, int c) {
	uint full = tfd_wgt_full(ring, stages, n, s);
	if (j >= stages) tfd_mbar_wait(full + 8 * stages, ph ^ 1);
	if (LANE != 0) return;
	uint dst = tfd_shared_addr(ring) + s * tfd_wgt_stage_bytes(n);
	asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1;\n}" ::"r"(full), "r"(tfd_wgt_stage_bytes(n)) : "memory");
	tfd_wgt_copy(dst, w, 256 * c, band0, full);
	tfd_wgt_copy(dst + tfd_wgt_w_bytes, x, 256 * c, slot0, full);
}

// tfd_wgt_release waits for all but the last group of this warpgroup's wgmma (the step's), then
// gives the stage sp of the step before back (none: sp < 0).
FUNC void tfd_wgt_release(const uint4* ring, int stages, int n, int sp) {
	asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
	if (sp < 0) return;
	__syncwarp();
	if (LANE == 0) asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.shared::cta.b64 st, [%0];\n}" ::"r"(tfd_wgt_full(ring, stages, n, stages + sp)) : "memory");
}

// tfd_wg128 is one step, D += A·B, for 64 weight rows by 128 rows of x.
FUNC void tfd_wg128(tfd_mma_acc* d, uint a0, uint a1, uint a2, uint a3, ulong desc) {
	asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
	             "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, p, 1, 1, 0;\n}"
	             : "+f"(d[0].c[0]), "+f"(d[0].c[1]), "+f"(d[0].c[2]), "+f"(d[0].c[3]), "+f"(d[1].c[0]), "+f"(d[1].c[1]), "+f"(d[1].c[2]), "+f"(d[1].c[3]), "+f"(d[2].c[0]), "+f"(d[2].c[1]), "+f"(d[2].c[2]), "+f"(d[2].c[3]), "+f"(d[3].c[0]), "+f"(d[3].c[1]), "+f"(d[3].c[2]), "+f"(d[3].c[3]), "+f"(d[4].c[0]), "+f"(d[4].c[1]), "+f"(d[4].c[2]), "+f"(d[4].c[3]), "+f"(d[5].c[0]), "+f"(d[5].c[1]), "+f"(d[5].c[2]), "+f"(d[5].c[3]), "+f"(d[6].c[0]), "+f"(d[6].c[1]), "+f"(d[6].c[2]), "+f"(d[6].c[3]), "+f"(d[7].c[0]), "+f"(d[7].c[1]), "+f"(d[7].c[2]), "+f"(d[7].c[3]), "+f"(d[8].c[0]), "+f"(d[8].c[1]), "+f"(d[8].c[2]), "+f"(d[8].c[3]), "+f"(d[9].c[0]), "+f"(d[9].c[1]), "+f"(d[9].c[2]), "+f"(d[9].c[3]), "+f"(d[10].c[0]), "+f"(d[10].c[1]), "+f"(d[10].c[2]), "+f"(d[10].c[3]), "+f"(d[11].c[0]), "+f"(d[11].c[1]), "+f"(d[11].c[2]), "+f"(d[11].c[3]), "+f"(d[12].c[0]), "+f"(d[12].c[1]), "+f"(d[12].c[2]), "+f"(d[12].c[3]), "+f"(d[13].c[0]), "+f"(d[13].c[1]), "+f"(d[13].c[2]), "+f"(d[13].c[3]), "+f"(d[14].c[0]), "+f"(d[14].c[1]), "+f"(d[14].c[2]), "+f"(d[14].c[3]), "+f"(d[15].c[0]), "+f"(d[15].c[1]), "+f"(d[15].c[2]), "+f"(d[15].c[3])
	             : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(desc));
}

// tfd_wg_step128 is a chunk of 128 rows (16 slots).
FUNC void tfd_wg_step128(tfd_mma_acc* d, const tfd_mma_a& a, const uint4* slot) { tfd_wg_chunk<tfd_wg128>(d, a, slot); }
#else
FUNC void tfd_wgt_start(const uint4*, int, int) { __trap(); }
FUNC void tfd_mbar_wait(uint, int) { __trap(); }
FUNC void tfd_wgt_fetch(const uint4*, int, int, int, int, int, const tfd_tensor_map*, int, const tfd_tensor_map*, int, int) { __trap(); }
FUNC void tfd_wgt_release(const uint4*, int, int, int) { __trap(); }
FUNC void tfd_wg_step128(tfd_mma_acc*, const tfd_mma_a&, const uint4*) { __trap(); }
#endif

// tfd_wgt_x is stage s's x.
FUNC const uint4* tfd_wgt_x(const uint4* ring, int n, int s) {
	return ring + (s * tfd_wgt_stage_bytes(n) + tfd_wgt_w_bytes) / 16;
}

// tfd_wgt_load_a reads this SIMD group's band of stage s's weights into a: lane l's 16 bytes of
// each step, 512 bytes apart, as the packed order keeps them.
FUNC void tfd_wgt_load_a(tfd_mma_a& a, const uint4* ring, int n, int s) {
	const uint4* p = ring + (s * tfd_wgt_stage_bytes(n) + 1024 * WARP) / 16 + LANE;
	a.w[0] = p[0];
	a.w[1] = p[32];
}

// The ring's operations (mmawgt.kern; prelude.metal has Metal's lock-step versions, which copy
// x where CUDA waits and read the weights from the buffer).
#define WGT_START(ring, stages, n) tfd_wgt_start(ring, stages, n)
#define WGT_FETCH(ring, stages, n, j, s, ph, w, band0, x, slot0, c) tfd_wgt_fetch(ring, stages, n, j, s, ph, w, band0, x, slot0, c)
#define WGT_READY(ring, stages, n, s, ph, x, slot0, c, rows, chunks) tfd_mbar_wait(tfd_wgt_full(ring, stages, n, s), ph)
#define WGT_LOAD_A(a, ring, stages, n, s, w, band, chunks, c, stage) tfd_wgt_load_a(a, ring, n, s)
#define WGT_STEP(acc, a, ring, stages, n, s, stage) tfd_wg_step##n(acc, a, tfd_wgt_x(ring, n, s))
#define WGT_RELEASE(ring, stages, n, sp) tfd_wgt_release(ring, stages, n, sp)
