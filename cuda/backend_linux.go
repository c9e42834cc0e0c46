//go:build amd64 || arm64

package cuda

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"
	"unsafe"

	"tfd/compute"
	"tfd/kernels"
)

// backend is the CUDA implementation of compute.Backend, on device 0. It is driven by one
// goroutine at a time (the contract's rule); its worker owns the driver calls.
type backend struct {
	w *worker

	// Fixed at Open.
	dev          cuDevice
	ctx          cuContext
	module       cuModule
	device, arch string
	sms          int
	total        uint64
	k            kernelSet
	mma          bool       // BF16 matmuls on the tensor cores unless TFD_CUDA_MMA=0 (matmul_linux.go, MatMuls)
	pdlAllowed   bool       // the device and driver have programmatic dependent launch
	mmaTile      int        // TFD_CUDA_MMA_TILE: the tensor-core matmuls' S, or 0 for kernels.MMATile's
	splitX       bool       // S = 2 reads x split once (mma_split_x) unless TFD_CUDA_XSPLIT=0
	wgmma        bool       // many rows run matmul_wgP_bf16_N (sm_90a) unless TFD_CUDA_WGMMA=0
	fusedSiLU    bool       // SiLUMulMatMul takes what it can unless TFD_CUDA_FUSED_SILU=0
	foldQuarters bool       // AddRMSNorm adds a matmul's quarters itself where it can unless TFD_CUDA_FOLD_QUARTERS=0
	wgt          wgtSetting // TFD_CUDA_WGT (parseWGT); off where the device or driver lacks matmul_wgtP_bf16_N
	wgQuarters   string     // TFD_CUDA_WG_QUARTERS: "" (matmul_wg1_bf16_N where kernels.UsesWGQuarters), "0" (never), "1" (wherever the warpgroup's tile runs)
	qkRoPEOff    bool       // QKRoPEWrite declines (tests: the five ops against the one launch)
	attnTile     string     // TFD_CUDA_ATTN_TILE: "" (attention_tile_H where it shares), "0" (never), "1" (from 64 rows)
	attnWarp     string     // TFD_CUDA_ATTN_WARP: "" (attention_warp where the tiles do not run), "0" (attention_split there)
	attnMMA      bool       // TFD_CUDA_ATTN_MMA=1: attention_mma for every row of a model it takes (kernels.AttentionMMA)
	// pdlRows is the most rows a forward may have for its kernels to be launched dependent
	// (pdl_linux.go; 0: every launch), and forwardRows the rows of the forward being recorded, as
	// its last matmul saw them.
	pdlRows, forwardRows int
	// With serialHeavy (TFD_CUDA_SERIAL_HEAVY=1) a heavy kernel recorded straight after another,
	// lastHeavy, is launched not dependent (heavy, pdl_linux.go).
	serialHeavy, lastHeavy bool
	// leaveOut (benchmarks: BenchmarkStepWithout) names kernel prefixes that are not launched at
	// all, to measure what the rest of a step costs; the results are then wrong.
	leaveOut []string

	// Set at Open; the pinned host buffers are read and written by both goroutines, never at the
	// same time: the worker touches them only while the backend's goroutine waits.
	errWord devPtr    // [4]int32 on the device: the kernels' error word (kernels/common.h)
	hostErr *[4]int32 // pinned copy of the error word, refreshed at every sync
	arena   []byte    // pinned staging for WriteInt32, reset at every sync
	arenaAt int       // bytes of arena in use
	stage   []byte    // pinned staging for ReadFloat32
	// packStage is the pinned staging of Upload's packing (pack_linux.go), nil until the first
	// matrix packed; the worker alone touches it.
	packStage [2][]byte
	// pinned is the page-locked memory HostFloat32 returned and FreeHost has not taken back;
	// stagedReads makes ReadFloat32 copy through the stage even into it (tests, benchmarks).
	pinned      [][]float32
	stagedReads bool
	async       asyncReads // slots for ReadInt32Async (async_linux.go)

	// attnPart is the attention kernels' scratch for the partial results of a row's key splits,
	// grown when a launch needs more (kernels.AttentionLaunch); nil until the first Attention.
	attnPart *tensor
	// qact is the quantized activations of a MatMul with quantized weights (quant_linux.go),
	// grown as attnPart is; nil until the first.
	qact *tensor
	// xsplit is x split once into the matrix unit's B operand (mma_split_x) for the S = 2 tiles,
	// grown as attnPart is; nil until the first.
	xsplit *tensor
	// wgParts is matmul_wg1_bf16_N's quarters of its outputs, before mma_sum_quarters adds them,
	// grown as attnPart is; nil until the first.
	wgParts *tensor
	// pendingSum is mma_sum_quarters of a matmul's quarters, recorded but not yet launched, where
	// the next op may add them itself and write the sums as the launch would: an AddRMSNorm of a
	// one-matrix matmul's output (rmsnorm_row with quarters set), a SiLUMulMatMul of a gate and up
	// matmul's two (mma_split_silu_wg with quarters set), a QKRoPEWrite of a q, k and v matmul's
	// three (qk_rope_write_H with quarters set). Any other command launches it first
	// (b.record, b.wait, b.flush), so the stream does the same work in the same order either way.
	// Launch.Kernel "" when none.
	pendingSum quarterSum

	maps tensorMaps // the copy engine's matmul's maps of x and the weights (tma_linux.go)

	signalsChecked time.Time // when Sync last put back the signal actions a library changed

	live    map[any]struct{} // tensors and pools not yet freed; Close frees them
	pending error            // a data error found while recording, for the next Sync
	closed  bool
}

// kernelSet holds every kernel the ops launch, resolved once at Open.
type kernelSet struct {
	siluMul *kernel
	geluMul *kernel
	// clampedSwiGLU is GPT-OSS's experts' activation.
	clampedSwiGLU *kernel
	add           *kernel
	argmaxNext    *kernel
	verify        *kernel // verify_drafts
	draftNext     *kernel

	// The mixture-of-experts kernels, launched as tfd/kernels' launch table says.
	route          *kernel
	groupExperts   *kernel
	combineExperts *kernel
	expertMatMul   map[string]*kernel // by name: expert_matmul_W_R

	// byName holds every kernel, for the ops launched as tfd/kernels' *Launch says.
	byName map[string]*kernel
}

// kernel is a loaded kernel function.
type kernel struct {
	name    string
	fn      cuFunction
	threads int
	params  int
	heavy   bool   // heavy(name): a matmul or attention, which another must not start under
	maps    uint32 // bit i: parameter i is a tensor map (kernels.Map), passed as the address of its host copy
}

// The weight dtypes the kernels come in, by index, and their suffix in kernel names.
var weightSuffix = [3]string{"bf16", "f16", "f32"}

func weightIndex(d compute.DType) int {
	switch d {
	case compute.BF16:
		return 0
	case compute.F16:
		return 1
	case compute.F32:
		return 2
	}
	return -1
}

// matmulRows are the row-group sizes of the SIMD-lane matmul kernels (the R of matmul_W_R and
// expert_matmul_W_R).
var matmulRows = kernels.MatMulRows

const (
	arenaBytes = 1 << 20
	stageBytes = 1 << 20
)

func open() (compute.Backend, error) {
	if err := loadDriver(); err != nil {
		return nil, err
	}
	b := &backend{w: newWorker(), live: map[any]struct{}{}}
	err := b.w.start(b.init)
	putBackSigactions(goHandlers, "open") // NVRTC has compiled and the context is made, or tried
	if err != nil {
		return nil, err
	}
	return b, nil
}

// init runs on the worker's thread: it picks device 0, compiles or reuses the kernels, makes the
// primary context current, and allocates the backend's own buffers.
func (b *backend) init() (err error) {
	defer func() {
		if err != nil {
			b.release()
		}
	}()
	var n int32
	if err := check("cuDeviceGetCount", cuDeviceGetCount(&n)); err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("%w: cuda: the driver sees no CUDA device", compute.ErrNoDevice)
	}
	if err := check("cuDeviceGet", cuDeviceGet(&b.dev, 0)); err != nil {
		return err
	}
	var major, minor, sms int32
	for _, a := range []struct {
		v    *int32
		attr int32
	}{{&major, attrComputeCapabilityMajor}, {&minor, attrComputeCapabilityMinor}, {&sms, attrMultiprocessorCount}} {
		if err := check("cuDeviceGetAttribute", cuDeviceGetAttribute(a.v, a.attr, b.dev)); err != nil {
			return err
		}
	}
	b.arch, b.sms = fmt.Sprintf("sm_%d%d", major, minor), int(sms)
	if major == 9 && minor == 0 {
		// sm_90a's code has Hopper's warpgroup MMA (wgmma), which the many-row matmuls use; it
		// runs on compute capability 9.0 alone, which is this device.
		b.arch = "sm_90a"
	}
	var name [256]byte
	if err := check("cuDeviceGetName", cuDeviceGetName(&name[0], int32(len(name)), b.dev)); err != nil {
		return err
	}
	b.device = goString(&name[0])
	if err := check("cuDeviceTotalMem", cuDeviceTotalMem(&b.total, b.dev)); err != nil {
		return err
	}
	cubin, err := compile(b.arch)
	if err != nil && b.arch == "sm_90a" {
		// An NVRTC older than CUDA 12 knows no sm_90a: the plain sm_90 code has every kernel
		// but the warpgroup's tile, which the backend then leaves alone (b.wgmma).
		slog.Warn("cuda: compiling for sm_90a failed; compiling for sm_90, without the wgmma matmuls", "err", err)
		b.arch = "sm_90"
		cubin, err = compile(b.arch)
	}
	if err != nil {
		return err
	}
	if err := check("cuDevicePrimaryCtxRetain", cuDevicePrimaryCtxRetain(&b.ctx, b.dev)); err != nil {
		return err
	}
	if err := check("cuCtxSetCurrent", cuCtxSetCurrent(b.ctx)); err != nil {
		return err
	}
	if err := check("cuStreamCreate", cuStreamCreate(&b.w.stream, cuStreamNonBlocking)); err != nil {
		return err
	}
	if err := check("cuModuleLoadData", cuModuleLoadData(&b.module, &cubin[0])); err != nil {
		return err
	}
	if err := b.resolve(); err != nil {
		return err
	}
	// The copy engine's matmul (kernels.UsesWGT) runs where the warpgroup's tile does and the
	// driver encodes tensor maps, unless TFD_CUDA_WGT=0; "N:P" (128:4, 128:1, 64:4, 64:1) runs
	// matmul_wgtP_bf16_N wherever the warpgroup's tile runs, for tests and benchmarks. The bits
	// are the same either way.
	if b.wgt, err = parseWGT(os.Getenv("TFD_CUDA_WGT")); err != nil {
		return err
	}
	if b.arch != "sm_90a" || !tmaAvailable() {
		b.wgt = wgtSetting{off: true}
	} else if err := b.allowDynamicShared(); err != nil {
		return err
	}
	if b.errWord, err = deviceAlloc(16); err != nil {
		return err
	}
	if err := b.zeroNow(b.errWord, 16); err != nil {
		return err
	}
	var host unsafe.Pointer
	if host, err = hostAlloc(16); err != nil {
		return err
	}
	b.hostErr = (*[4]int32)(host)
	*b.hostErr = [4]int32{}
	if b.arena, err = hostSlice(arenaBytes); err != nil {
		return err
	}
	if b.stage, err = hostSlice(stageBytes); err != nil {
		return err
	}
	if err := b.initAsync(); err != nil {
		return err
	}
	b.w.onSync = b.collectErrors
	// Graphs are on unless TFD_CUDA_GRAPHS=0 or the driver lacks them (graph_linux.go).
	b.w.g.allowed = graphsAvailable() && os.Getenv("TFD_CUDA_GRAPHS") != "0"
	b.w.g.on = b.w.g.allowed
	// Kernels may start while the one before them ends (pdl_linux.go) unless TFD_CUDA_PDL=0.
	b.pdlAllowed = pdlAvailable(major)
	b.w.setDependentLaunch(b.pdlAllowed && os.Getenv("TFD_CUDA_PDL") != "0")
	b.pdlRows = pdlRows
	if s := os.Getenv("TFD_CUDA_PDL_ROWS"); s != "" {
		b.pdlRows, _ = strconv.Atoi(s)
	}
	b.serialHeavy = os.Getenv("TFD_CUDA_SERIAL_HEAVY") == "1"
	// BF16 matmuls run on the tensor cores unless TFD_CUDA_MMA=0: on the H200 that is 1.2 times
	// the CUDA cores' single-stream decode of an 8B model, 3.6 to 6.4 times the aggregate of 8 to
	// 64 streams and 4.8 times the prefill (docs/performance.md). The bits differ between the two, so
	// a prompt cache spilled under one setting must not be read under the other.
	b.mma = os.Getenv("TFD_CUDA_MMA") != "0"
	// Attention runs attention_tile_H where its tiles share loads of keys
	// (kernels.AttentionTileShares); TFD_CUDA_ATTN_TILE=0 runs it for no launch and =1 runs
	// attention_tile_H from kernels.AttentionTileFrom rows whatever their bases, for
	// measuring one against the other and testing the tiles on any rows. The bits are the same
	// either way.
	b.attnTile = os.Getenv("TFD_CUDA_ATTN_TILE")
	// Where the tiles do not run, attention_warp makes the splits (a SIMD group a row and head);
	// TFD_CUDA_ATTN_WARP=0 runs attention_split there instead (four a row and head), for
	// measuring one against the other. The bits are the same either way.
	b.attnWarp = os.Getenv("TFD_CUDA_ATTN_WARP")
	// TFD_CUDA_ATTN_MMA=1 puts attention's products on the tensor cores (attention_mma, whose
	// arithmetic is its own: other bits than the kernels above, within the same tolerances of the
	// cpu backend) for every row of a model whose heads it takes. Like TFD_CUDA_MMA, it is part of
	// Arithmetic, so the prompt cache keeps the blocks of one setting from the other.
	b.attnMMA = b.mma && os.Getenv("TFD_CUDA_ATTN_MMA") == "1"
	// TFD_CUDA_MMA_TILE=1, 2, 4 or 64 (kernels.WGRows: matmul_wg_bf16_N, on a GPU with wgmma)
	// runs every tensor-core matmul with tiles of that S instead of
	// kernels.MMATile's choice by shape (BenchmarkTileSizes); the bits are the same.
	// TFD_CUDA_XSPLIT=0 has the S = 2 tiles split x into BF16 hi and lo in every group, as
	// before mma_split_x (kernels/src/mmasplit.kern); the bits are the same.
	b.splitX = os.Getenv("TFD_CUDA_XSPLIT") != "0"
	// TFD_CUDA_WGMMA=0 keeps the many-row matmuls off Hopper's warpgroup MMA
	// (kernels/src/mmawg.kern); the bits are the same.
	b.wgmma = b.arch == "sm_90a" && os.Getenv("TFD_CUDA_WGMMA") != "0"
	// The warpgroup's tile runs a quarter of K a group where its whole tiles would be too few
	// (kernels.UsesWGQuarters); TFD_CUDA_WG_QUARTERS=0 never, =1 wherever the warpgroup's tile
	// runs (with TFD_CUDA_MMA_TILE=64, every launch). The bits are the same either way.
	b.wgQuarters = os.Getenv("TFD_CUDA_WG_QUARTERS")
	// A matmul in quarters whose outputs the next op reads leaves the sum of its quarters to it
	// (b.pendingSum) where it can add them: an AddRMSNorm of one matrix's output, a
	// SiLUMulMatMul of a gate and up matmul's, a QKRoPEWrite of a q, k and v matmul's;
	// TFD_CUDA_FOLD_QUARTERS=0 launches
	// mma_sum_quarters for every one. The bits are the same either way.
	b.foldQuarters = os.Getenv("TFD_CUDA_FOLD_QUARTERS") != "0"
	// Where the warpgroup's tile splits x for the down projection, the SwiGLU's product goes
	// straight into the split (mma_split_silu_wg), saving silu_mul's launch and the product's
	// pass through memory; TFD_CUDA_FUSED_SILU=0 launches the two apart. The bits are the same.
	b.fusedSiLU = os.Getenv("TFD_CUDA_FUSED_SILU") != "0"
	switch s := os.Getenv("TFD_CUDA_MMA_TILE"); s {
	case "1", "2", "4":
		b.mmaTile = int(s[0] - '0')
	case strconv.Itoa(kernels.WGRows): // the warpgroup's tile, where the device has it
		b.mmaTile = kernels.WGRows
	}
	return nil
}

// resolve looks up every kernel of tfd/kernels in the module.
func (b *backend) resolve() error {
	b.k.byName = map[string]*kernel{}
	for _, def := range kernels.All() {
		if len(def.Params) > maxArgs {
			return fmt.Errorf("cuda: kernel %s takes %d parameters; commands hold %d (maxArgs)", def.Name, len(def.Params), maxArgs)
		}
		k := &kernel{name: def.Name, threads: def.Threads, params: len(def.Params), heavy: heavy(def.Name)}
		for i, p := range def.Params {
			if p.Kind == kernels.Map {
				k.maps |= 1 << i
			}
		}
		if err := check("cuModuleGetFunction "+def.Name, cuModuleGetFunction(&k.fn, b.module, def.Name)); err != nil {
			return err
		}
		b.k.byName[def.Name] = k
	}
	get := func(name string) (*kernel, error) {
		if k := b.k.byName[name]; k != nil {
			return k, nil
		}
		return nil, fmt.Errorf("cuda: tfd/kernels has no kernel %s", name)
	}
	var err error
	b.k.expertMatMul = map[string]*kernel{}
	for _, suffix := range append(weightSuffix[:], "mxfp4") {
		for _, rows := range matmulRows {
			name := fmt.Sprintf("expert_matmul_%s_%d", suffix, rows)
			if b.k.expertMatMul[name], err = get(name); err != nil {
				return err
			}
		}
	}
	for _, s := range []struct {
		k    **kernel
		name string
	}{
		{&b.k.siluMul, "silu_mul"}, {&b.k.geluMul, "gelu_tanh_mul"}, {&b.k.clampedSwiGLU, "clamped_swiglu"}, {&b.k.add, "add"}, {&b.k.argmaxNext, "argmax_next"},
		{&b.k.verify, "verify_drafts"}, {&b.k.draftNext, "draft_next"},
		{&b.k.route, "route"}, {&b.k.groupExperts, "group_experts"}, {&b.k.combineExperts, "combine_experts"},
	} {
		if *s.k, err = get(s.name); err != nil {
			return err
		}
	}
	return nil
}

// release frees everything the backend holds, on the worker's thread: its tensors and pools, its
// buffers, the module and stream, and its reference to the primary context.
func (b *backend) release() error {
	var errs []error
	keep := func(call string, r cuResult) { errs = append(errs, check(call, r)) }
	b.w.dropGraphs() // they launch kernels of the module and belong to the context
	for t := range b.live {
		keep("cuMemFree", cuMemFree(ptrOf(t)))
	}
	clear(b.live)
	if b.errWord != 0 {
		keep("cuMemFree", cuMemFree(b.errWord))
	}
	for _, p := range []unsafe.Pointer{unsafe.Pointer(b.hostErr), sliceData(b.arena), sliceData(b.stage), sliceData(b.packStage[0]), sliceData(b.packStage[1])} {
		if p != nil {
			keep("cuMemFreeHost", cuMemFreeHost(p))
		}
	}
	for _, p := range b.pinned {
		keep("cuMemFreeHost", cuMemFreeHost(unsafe.Pointer(unsafe.SliceData(p))))
	}
	b.pinned = nil
	b.errWord, b.hostErr, b.arena, b.stage, b.packStage = 0, nil, nil, nil, [2][]byte{}
	b.releaseAsync(keep)
	if b.module != 0 {
		keep("cuModuleUnload", cuModuleUnload(b.module))
		b.module = 0
	}
	if b.w.stream != 0 {
		keep("cuStreamDestroy", cuStreamDestroy(b.w.stream))
		b.w.stream = 0
	}
	if b.ctx != 0 {
		keep("cuDevicePrimaryCtxRelease", cuDevicePrimaryCtxRelease(b.dev))
		b.ctx = 0
	}
	return errors.Join(errs...)
}

var (
	_ compute.Chainer       = (*backend)(nil)
	_ compute.AsyncReader   = (*backend)(nil)
	_ compute.DraftVerifier = (*backend)(nil)
	_ compute.HostBuffers   = (*backend)(nil)
)

func (b *backend) Name() string { return "cuda" }

// ForwardRows implements compute.ForwardSizer: 1,024 rows a forward. On the H200 the 8B-shaped
// checkpoint's 4,096-token prompt took 481.3 ms in forwards of 256 rows, 453.2 in forwards of 512
// and 445.3 in forwards of 1,024 (the thirty-second session's call; the twenty-sixth's: 562,
// 543, 529 and 533 at 2,048): the small matrices' tiles fill the GPU, and a prompt makes a
// quarter of the launches. The scratch grows by the activations alone (0.17 GB for that
// checkpoint): the daemon keeps the rows that may ask for logits at 256.
func (b *backend) ForwardRows() int { return 1024 }

// Arithmetic says whether BF16 matmuls run on the tensor cores or the CUDA cores, and whether
// attention does too (TFD_CUDA_ATTN_MMA=1): each way gives other bits, so a cached block of one
// is not another's (compute.Arithmetic).
func (b *backend) Arithmetic() string {
	a := "cuda cores"
	if b.mma {
		a = "tensor cores"
	}
	if b.attnMMA {
		a += ", attention on tensor cores"
	}
	return a
}

// Memory returns the device's memory in bytes (cuDeviceTotalMem).
func (b *backend) Memory() uint64 { return b.total }

// Describe names the device, its architecture and size, for logs.
func (b *backend) Describe() string {
	return fmt.Sprintf("%s (%s, %d SMs, %.1f GiB)", b.device, b.arch, b.sms, float64(b.total)/(1<<30))
}

// Sync waits for all recorded work and returns, and forgets, the first error since the last
// Sync: a failed launch or copy, or a data error (a token, index or slot out of range) that a
// kernel or the recording side found.
func (b *backend) Sync() error {
	if b.closed {
		return errors.New("cuda: Sync on a closed backend")
	}
	c := b.record()
	*c = command{kind: cmdDtoH, args: [maxArgs]uint64{uint64(uintptr(unsafe.Pointer(b.hostErr))), uint64(b.errWord), 16}}
	err := b.wait(true, nil)
	b.arenaAt = 0
	// A library may install a signal handler long after open (signals_linux.go): look again
	// now and then, a second apart at most, at the cost of 64 system calls.
	if now := time.Now(); now.Sub(b.signalsChecked) >= time.Second {
		b.signalsChecked = now
		putBackSigactions(goHandlers, "a sync")
	}
	if b.pending != nil {
		err = errors.Join(b.pending, err)
		b.pending = nil
	}
	return err
}

// collectErrors runs on the worker's thread after a sync: it turns the error word, copied to
// hostErr by the sync's last command, into an error, and clears it on both sides.
func (b *backend) collectErrors() error {
	e := *b.hostErr
	if e[0] == 0 {
		return nil
	}
	*b.hostErr = [4]int32{}
	if err := b.zeroNow(b.errWord, 16); err != nil {
		return err
	}
	switch e[0] {
	case 1:
		return fmt.Errorf("cuda: Embed: token %d of row %d is outside the vocabulary", e[2], e[1])
	case 2:
		return fmt.Errorf("cuda: Gather: index %d of row %d is outside src", e[2], e[1])
	case 3:
		return fmt.Errorf("cuda: KVWrite: row %d: slot %d is outside the pool", e[1], e[2])
	case 4:
		return fmt.Errorf("cuda: Attention: row %d: slot %d is outside the pool", e[1], e[2])
	case 5:
		return fmt.Errorf("cuda: GroupByExpert: pair %d has expert %d, which the model lacks", e[1], e[2])
	case 6:
		return fmt.Errorf("cuda: a DeltaNet step list: step %d (row %d) is outside the rows or the states", e[1], e[2])
	}
	return fmt.Errorf("cuda: a kernel reported error %d (%d, %d)", e[0], e[1], e[2])
}

// Close waits for recorded work, frees everything the backend allocated, and ends its worker.
func (b *backend) Close() error {
	if b.closed {
		return errors.New("cuda: backend closed twice")
	}
	b.launchPendingSum()
	err := b.w.stop(b.release)
	b.closed = true
	return err
}

// zeroNow clears bytes at p and waits; worker thread only.
func (b *backend) zeroNow(p devPtr, bytes int) error {
	c := command{kind: cmdZero, args: [maxArgs]uint64{uint64(p), uint64(bytes)}}
	b.w.exec(&c)
	w := b.w
	if err := w.err; err != nil {
		w.err = nil
		return err
	}
	return check("cuStreamSynchronize", cuStreamSynchronize(w.stream))
}
