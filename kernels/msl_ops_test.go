package kernels_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"tfd/compute"
	"tfd/compute/computetest"
	_ "tfd/cpu"
	"tfd/kernels"
)

// TestMSLRuns runs every kernel of the Metal emission on the CPU, through the MSL runner, on random
// data of several shapes (ragged ones included: sizes that are not multiples of 8, 32, 128 or 256),
// launched as kernels.*Launch says a backend launches it, and compares the results with the cpu
// backend's ops at the tolerances tfd/cuda's op tests use against it: the two reduce in different
// orders, so sums agree to a tolerance; data moves agree bit for bit.
func TestMSLRuns(t *testing.T) {
	start := time.Now()
	r := startRunner(t, runner(t))
	built := time.Since(start)
	cpu, err := compute.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	defer cpu.Close()
	matched, failed, cases := map[string]bool{}, map[string]bool{}, 0
	check := func(name string, f func(o *op)) {
		from := len(r.Launched)
		ok := t.Run(name, func(t *testing.T) { f(&op{t: t, r: r, cpu: cpu}) })
		cases++
		for _, k := range r.Launched[from:] {
			matched[k] = matched[k] || ok
			failed[k] = failed[k] || !ok
		}
	}

	for _, dt := range []compute.DType{compute.F32, compute.BF16, compute.F16} {
		// in: both paths of the dot product (multiples of 8 or not), shorter and longer than a
		// warp's 256-element stride; rows: every row group R (1, 2, 4, 8, 16), and 20 = 16 + 4.
		for _, s := range []struct{ in, out int }{{8, 5}, {100, 37}, {384, 4}, {1001, 130}, {2048, 9}} {
			for _, rows := range []int{1, 2, 3, 7, 20} {
				check(fmt.Sprint("matmul ", dt, s.in, s.out, rows), func(o *op) { o.matMul(dt, s.in, s.out, rows, (s.in+rows)%2 == 0) })
			}
		}
		if dt == compute.BF16 {
			// The matrix unit (matmul_mma_bf16_S): one chunk of 32 (fewer chunks than SIMD groups),
			// 5 chunks (SIMD group 0 sums two), ragged tiles of outputs and rows, and every S.
			for _, c := range []struct{ in, out, rows int }{{32, 5, 1}, {160, 37, 9}, {384, 70, 40}, {64, 16, 8}} {
				check(fmt.Sprint("matmul ", dt, c.in, c.out, c.rows), func(o *op) { o.matMul(dt, c.in, c.out, c.rows, c.rows%2 == 1) })
			}
			for _, rows := range []int{3, 40} {
				check(fmt.Sprint("matmul_mma three matrices ", rows), func(o *op) { o.matMuls(rows) })
			}
			// Packed weights (matmul_mma_packed_bf16_S): the row-major kernel's bits, for every S;
			// 2,080 and 1,056 elements make each SIMD group's ring of chunks wrap (S = 1 and 2).
			for _, c := range []struct{ in, rows int }{{32, 1}, {160, 9}, {384, 40}, {2080, 3}, {1056, 20}} {
				check(fmt.Sprint("matmul_mma_packed ", c.in, c.rows), func(o *op) { o.matMulsPacked(c.in, c.rows, 0) })
			}
			// x split once (mma_split_x, matmul_mma_xs_bf16_S): fewer chunks than SIMD groups,
			// ragged rows over three row groups, rings that wrap.
			for _, c := range []struct{ in, rows, s int }{{32, 1, 2}, {160, 40, 2}, {64, 3, 2}, {1056, 20, 2}, {2080, 3, 1}} {
				check(fmt.Sprint("matmul_mma_xs ", c), func(o *op) { o.matMulsPacked(c.in, c.rows, c.s) })
			}
			// The warpgroup's tile (mma_split_wg, matmul_wg_bf16_N): one chunk (partials 1 to 3
			// empty), 3 and 5 chunks (uneven partials), rows over two tiles, 33 chunks that turn
			// the ring many times; 37, 16 and 50 outputs leave most of each 128-output tile past
			// its matrix.
			for _, c := range []struct{ in, rows int }{{32, 1}, {96, 70}, {160, 40}, {1056, 20}} {
				check(fmt.Sprint("matmul_wg ", c), func(o *op) { o.matMulsPacked(c.in, c.rows, kernels.WGRows) })
			}
			// The same a quarter of K a group (matmul_wg1_bf16_N, mma_sum_quarters): quarters
			// with no chunk (one and three chunks), uneven quarters, rows over two tiles.
			for _, c := range []struct{ in, rows int }{{32, 1}, {96, 70}, {160, 40}, {1056, 20}} {
				check(fmt.Sprint("matmul_wg quarters ", c), func(o *op) { o.matMulsPacked(c.in, c.rows, -kernels.WGRows) })
			}
			// The copy engine's tile (matmul_wgtP_bf16_N) for each P and N: one chunk, uneven
			// partials, rows over two tiles, many chunks.
			for _, c := range []struct{ in, rows, n, p int }{{32, 1, 64, 4}, {96, 70, 64, 1}, {160, 140, 128, 4}, {1056, 20, 128, 1}, {96, 130, 128, 1}, {1056, 3, 64, 4}} {
				check(fmt.Sprint("matmul_wgt ", c), func(o *op) { o.matMulsCopied(c.in, c.rows, c.n, c.p) })
			}
			// silu_mul folded into the split (mma_split_silu_wg): ragged rows, one chunk and many.
			for _, c := range []struct{ in, rows int }{{32, 1}, {96, 70}, {1056, 20}} {
				check(fmt.Sprint("mma_split_silu_wg ", c), func(o *op) { o.splitSiLU(c.in, c.rows) })
			}
			// The same adding gate's and up's quarters (and biases: none, gate's, up's, both).
			for _, c := range []struct {
				in, rows int
				bias     int32
			}{{32, 1, 3}, {96, 70, 0}, {1056, 20, 1}, {160, 40, 2}} {
				check(fmt.Sprint("mma_split_silu_wg quarters ", c), func(o *op) { o.splitSiLUQuarters(c.in, c.rows, c.bias) })
			}
		}
		for _, s := range []struct{ vocab, dim int }{{50, 72}, {20, 13}, {9, 300}} {
			check(fmt.Sprint("embed ", dt, s.vocab, s.dim), func(o *op) { o.embed(dt, s.vocab, s.dim, -1) })
		}
		check(fmt.Sprint("embed ", dt, " bad token"), func(o *op) { o.embed(dt, 10, 8, 10) })
		if dt == compute.BF16 {
			for _, s := range []struct{ vocab, dim, bad int }{{50, 64, -1}, {20, 288, -1}, {9, 32, 9}} {
				check(fmt.Sprint("embed packed ", s), func(o *op) { o.embedPacked(s.vocab, s.dim, s.bad) })
			}
		}
	}
	for _, s := range []struct{ n, width, rows, bad int }{{9, 72, 4, -1}, {3, 1, 7, -1}, {5, 257, 3, -1}, {4, 8, 3, 2}} {
		check(fmt.Sprint("gather ", s), func(o *op) { o.gather(s.n, s.width, s.rows, s.bad) })
	}
	for _, d := range []int{16, 77, 256, 384, 4096, 5000} { // both kernels; 5000: two passes of rmsnorm_row
		for _, n := range []int{1, 5, 33} {
			check(fmt.Sprint("rmsnorm ", d, n), func(o *op) { o.rmsNorm(d, n, false) })
			check(fmt.Sprint("rmsnorm add ", d, n), func(o *op) { o.rmsNorm(d, n, true) })
		}
	}
	// rmsnorm_row adding a matmul's quarters itself: one pass and two, with and without the
	// residual and a bias.
	for _, d := range []int{384, 5000} {
		for _, c := range []struct{ add, bias bool }{{true, true}, {true, false}, {false, true}} {
			check(fmt.Sprint("rmsnorm quarters ", d, c), func(o *op) { o.rmsNormQuarters(d, 5, c.add, c.bias) })
		}
	}
	for _, hd := range []int{16, 22, 128, 512} { // 22: 11 pairs; 512: the kernel's most, 256 pairs
		for _, heads := range []int{2, 6} {
			check(fmt.Sprint("rope ", hd, heads), func(o *op) { o.rope(hd, heads) })
		}
	}
	for _, kv := range []kernels.KV{kernels.KVF32, kernels.KVF16} {
		for _, c := range []struct{ hd, heads, kvHeads int }{{16, 4, 2}, {20, 3, 1}, {64, 6, 2}, {128, 8, 8}, {256, 4, 1}} {
			check(fmt.Sprint("kv_write and attention ", kv, c), func(o *op) { o.attention(shortSessions, c.hd, c.heads, c.kvHeads, false, kv) })
		}
		for _, c := range []struct{ hd, heads, kvHeads int }{{20, 2, 1}, {256, 2, 2}} {
			check(fmt.Sprint("kv_write and attention, long ", kv, c), func(o *op) { o.attention(longSessions, c.hd, c.heads, c.kvHeads, false, kv) })
		}
		for _, c := range []struct{ hd, heads, kvHeads int }{{64, 6, 2}, {128, 4, 4}, {256, 2, 1}} {
			for _, norm := range []bool{true, false} {
				check(fmt.Sprint("qk_rope_write ", kv, c, norm), func(o *op) { o.qkRopeWrite(c.hd, c.heads, c.kvHeads, norm, false, kv, -1) })
			}
		}
		check(fmt.Sprint("qk_rope_write outside the pool ", kv), func(o *op) { o.qkRopeWrite(128, 4, 2, true, true, kv, -1) })
		// Adding a q, k and v matmul's quarters itself (biases: none, all, k's and v's), and
		// writing v's sums where a row's slot is outside the pool too.
		for _, c := range []struct {
			hd, heads, kvHeads int
			bias               int32
			bad                bool
		}{{64, 4, 2, 0, false}, {128, 8, 2, 7, false}, {256, 2, 1, 6, true}} {
			check(fmt.Sprint("qk_rope_write quarters ", kv, c), func(o *op) { o.qkRopeWrite(c.hd, c.heads, c.kvHeads, true, c.bad, kv, c.bias) })
		}
		check(fmt.Sprint("kv_write and attention with sinks ", kv), func(o *op) { o.attention(shortSessions, 64, 6, 2, true, kv) })
		check(fmt.Sprint("kv_write and attention with sinks, long ", kv), func(o *op) { o.attention(longSessions, 20, 2, 1, true, kv) })
	}
	check("kv_write and attention outside the pool", func(o *op) { o.attentionOutside() })
	check("kv_write_f16 rounding", func(o *op) { o.kvWriteRounding() })
	for _, kv := range []kernels.KV{kernels.KVF32, kernels.KVF16} {
		for _, c := range []struct{ hd, heads, kvHeads int }{{20, 4, 1}, {128, 2, 2}, {200, 2, 1}} {
			check(fmt.Sprint("attention_tile_H against attention_split ", kv, c), func(o *op) { o.attentionTiles(c.hd, c.heads, c.kvHeads, false, kv) })
		}
		check(fmt.Sprint("attention_tile_H against attention_split with sinks ", kv), func(o *op) { o.attentionTiles(64, 4, 1, true, kv) })
		// attention_split merging its own splits (one group a row and head): heads of 20, 128 and
		// 200, rows of one split to nine.
		for _, c := range []struct{ hd, heads, kvHeads int }{{20, 4, 1}, {128, 2, 2}, {200, 2, 1}} {
			check(fmt.Sprint("attention_split merged ", kv, c), func(o *op) { o.attentionMerged(c.hd, c.heads, c.kvHeads, false, kv) })
		}
		check(fmt.Sprint("attention_split merged with sinks ", kv), func(o *op) { o.attentionMerged(64, 4, 1, true, kv) })
		// attention_warp: heads of 20 to 256; 6 heads leave two SIMD groups of the second block
		// past the last head; 8 heads to a kv head span two blocks.
		for _, c := range []struct{ hd, heads, kvHeads int }{{20, 4, 1}, {128, 8, 1}, {64, 6, 2}, {200, 2, 1}, {256, 4, 2}} {
			check(fmt.Sprint("attention_warp against attention_split ", kv, c), func(o *op) { o.attentionWarp(c.hd, c.heads, c.kvHeads, false, kv) })
		}
		check(fmt.Sprint("attention_warp against attention_split with sinks ", kv), func(o *op) { o.attentionWarp(64, 4, 1, true, kv) })
		// attention_mma: heads of 16 to 128, three heads a kv head (tiles of 10 rows), one (a tile
		// holds every row), with sinks.
		for _, c := range []struct{ hd, heads, kvHeads int }{{16, 4, 1}, {64, 6, 2}, {128, 8, 2}, {128, 2, 2}} {
			check(fmt.Sprint("attention_mma ", kv, c), func(o *op) { o.attentionMMA(c.hd, c.heads, c.kvHeads, false, kv) })
		}
		check(fmt.Sprint("attention_mma with sinks ", kv), func(o *op) { o.attentionMMA(64, 4, 1, true, kv) })
	}
	for _, n := range []int{1, 257, 5000} {
		check(fmt.Sprint("silu_mul ", n), func(o *op) { o.elementwise("silu_mul", n) })
		check(fmt.Sprint("gelu_tanh_mul ", n), func(o *op) { o.elementwise("gelu_tanh_mul", n) })
		check(fmt.Sprint("clamped_swiglu ", n), func(o *op) { o.elementwise("clamped_swiglu", n) })
		check(fmt.Sprint("add ", n), func(o *op) { o.elementwise("add", n) })
	}
	for _, c := range []struct{ n, tieA, tieB int }{{1, -1, -1}, {300, 7, 250}, {8193, 100, 8000}, {40, -2, -2}} {
		check(fmt.Sprint("argmax_next ", c), func(o *op) { o.argmaxNext(c.n, c.tieA, c.tieB) })
	}
	for _, c := range []struct{ first, rows, n int }{{0, 1, 300}, {2, 3, 8193}, {1, 4, 40}} {
		check(fmt.Sprint("argmax_rows ", c), func(o *op) { o.argmaxRows(c.first, c.rows, c.n) })
	}
	for _, c := range []struct{ rows, n, landed int }{{2, 300, 0}, {2, 300, 1}, {4, 1000, 2}, {5, 8193, 4}, {4, 40, 0}} {
		check(fmt.Sprint("verify_drafts and draft_next ", c), func(o *op) { o.verifyDrafts(c.rows, c.n, c.landed) })
	}

	for _, c := range []struct {
		rows, experts, k      int
		normalize, ties, nans bool
	}{{1, 8, 2, true, false, false}, {5, 128, 8, true, false, false}, {9, 100, 3, false, false, true}, {3, 8, 8, true, true, false}, {2, 40, 1, false, true, false}} {
		check(fmt.Sprint("route ", c), func(o *op) { o.route(c.rows, c.experts, c.k, c.normalize, c.ties, c.nans) })
	}
	for _, c := range []struct{ n, experts, bad int }{{1, 8, -1}, {16, 8, -1}, {300, 8, 123}, {300, 128, -1}, {5, 2, 0}} {
		check(fmt.Sprint("group_experts ", c), func(o *op) { o.groupExperts(c.n, c.experts, c.bad) })
	}
	for _, dt := range []compute.DType{compute.F32, compute.BF16, compute.F16} {
		// pairs among 8 experts picks every row group R (1, 2, 4, 8, 16); in: both paths of the
		// dot product; share: x rows per token (2 pairs each) and per pair.
		// Every other case with a bias per expert.
		for i, c := range []struct{ in, out, pairs, share int }{{64, 5, 8, 2}, {100, 37, 16, 1}, {64, 9, 20, 2}, {264, 4, 60, 1}, {8, 3, 100, 2}} {
			check(fmt.Sprint("expert_matmul ", dt, c), func(o *op) { o.expertMatMul(dt, c.in, c.out, c.pairs, 8, c.share, i%2 == 1) })
		}
	}
	// MXFP4: rows of whole blocks of 32; pairs among 8 experts pick every row group R.
	for i, c := range []struct{ in, out, pairs, share int }{{64, 5, 8, 2}, {96, 37, 16, 1}, {64, 9, 20, 2}, {288, 4, 60, 1}, {32, 3, 100, 2}} {
		check(fmt.Sprint("expert_matmul mxfp4 ", c), func(o *op) { o.expertMatMulMXFP4(c.in, c.out, c.pairs, 8, c.share, i%2 == 0) })
	}
	for _, c := range []struct{ rows, width, k int }{{1, 64, 2}, {7, 100, 8}, {3, 257, 1}} {
		check(fmt.Sprint("combine_experts ", c), func(o *op) { o.combine(c.rows, c.width, c.k) })
	}

	quantChecks(t, check)
	deltaCases(check)

	var missing []string
	for _, k := range kernels.All() {
		if !matched[k.Name] || failed[k.Name] {
			missing = append(missing, k.Name)
		}
	}
	if len(missing) > 0 {
		t.Errorf("kernels not run, or not matching the cpu backend: %v", missing)
	}
	summary := fmt.Sprintf("msl: %d of %d kernels run on the CPU shim and match the cpu backend (%d cases, %d launches; runner built in %v, all in %v)",
		len(kernels.All())-len(missing), len(kernels.All()), cases, len(r.Launched), built.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	t.Log(summary)
	fmt.Println(summary) // shown by go test in a package directory, with -v, or on failure
}

// op is one case: the runner and the cpu backend, fed the same data.
type op struct {
	t   *testing.T
	r   *mslRunner
	cpu compute.Backend
}

func (o *op) launch(l kernels.Launch, args ...any) {
	o.t.Helper()
	if err := o.r.launch(l, args...); err != nil {
		o.t.Fatalf("%s: %v", l.Kernel, err)
	}
}

// upload gives the cpu backend a tensor.
func (o *op) upload(dt compute.DType, data []byte, shape ...int) compute.Tensor {
	o.t.Helper()
	x, err := o.cpu.Upload(dt, shape, data)
	if err != nil {
		o.t.Fatal(err)
	}
	return x
}

// read returns n elements of a cpu tensor, failing on a data error.
func (o *op) read(x compute.Tensor, n int) []float32 {
	o.t.Helper()
	out := make([]float32, n)
	if err := o.cpu.ReadFloat32(x, out); err != nil {
		o.t.Fatal(err)
	}
	return out
}

// embedPacked checks embed_packed_bf16 on a packed table against the cpu backend's Embed of the
// row-major one, bit for bit, and its error word.
func (o *op) embedPacked(vocab, dim, badToken int) {
	rng := rand.New(rand.NewPCG(uint64(vocab), uint64(dim)))
	ids := make([]int32, 9)
	for i := range ids {
		ids[i] = int32(rng.IntN(vocab))
	}
	if badToken >= 0 {
		ids[4] = int32(badToken)
	}
	tb := computetest.Encode(compute.BF16, computetest.Randn(4, vocab*dim))
	x := o.upload(compute.F32, make([]byte, 4*len(ids)*dim), len(ids), dim)
	o.cpu.Embed(x, o.upload(compute.BF16, tb, vocab, dim), o.upload(compute.I32, computetest.I32Bytes(ids), len(ids)), len(ids))
	cpuErr := o.cpu.Sync()
	want := o.read(x, len(ids)*dim)

	packed := make([]byte, 2*kernels.MMAPackedLen(vocab, dim))
	kernels.PackMMA(packed, tb, vocab, dim)
	mx, errWord := &mbuf{make([]byte, 4*len(ids)*dim)}, &mbuf{make([]byte, 16)}
	o.launch(kernels.EmbedPackedLaunch(len(ids), dim), mx, &mbuf{packed}, &mbuf{computetest.I32Bytes(ids)}, int32(vocab), int32(dim), errWord)
	computetest.SameBits(o.t, "x", floats(mx), want)
	o.checkError(errWord, cpuErr, badToken >= 0, 1, 4, badToken) // ERR_EMBED, row 4
}

func (o *op) embed(dt compute.DType, vocab, dim, badToken int) {
	rng := rand.New(rand.NewPCG(uint64(vocab), uint64(dim)))
	ids := make([]int32, 9)
	for i := range ids {
		ids[i] = int32(rng.IntN(vocab))
	}
	if badToken >= 0 {
		ids[4] = int32(badToken)
	}
	tb := computetest.Encode(dt, computetest.Randn(4, vocab*dim))
	x := o.upload(compute.F32, make([]byte, 4*len(ids)*dim), len(ids), dim)
	o.cpu.Embed(x, o.upload(dt, tb, vocab, dim), o.upload(compute.I32, computetest.I32Bytes(ids), len(ids)), len(ids))
	cpuErr := o.cpu.Sync()
	want := o.read(x, len(ids)*dim)

	mx, errWord := &mbuf{make([]byte, 4*len(ids)*dim)}, &mbuf{make([]byte, 16)}
	o.launch(kernels.EmbedLaunch(weightSuffix(dt), len(ids), dim), mx, &mbuf{tb}, &mbuf{computetest.I32Bytes(ids)}, int32(vocab), int32(dim), errWord)
	computetest.SameBits(o.t, "x", floats(mx), want)
	o.checkError(errWord, cpuErr, badToken >= 0, 1, 4, badToken) // ERR_EMBED, row 4
}

// checkError checks the error word against the cpu backend's Sync: [code, a, b] if a report was
// due, zeros if not.
func (o *op) checkError(w *mbuf, cpuErr error, due bool, code, a, b int) {
	o.t.Helper()
	got := [3]int32{}
	for i := range got {
		got[i] = int32(binary.LittleEndian.Uint32(w.b[4*i:]))
	}
	want := [3]int32{}
	if due {
		want = [3]int32{int32(code), int32(a), int32(b)}
	}
	if got != want || (cpuErr != nil) != due {
		o.t.Errorf("error word %v, want %v; the cpu backend's Sync: %v", got, want, cpuErr)
	}
}

func (o *op) gather(n, width, rows, bad int) {
	src := computetest.Randn(5, n*width)
	idx := make([]int32, rows)
	for i := range idx {
		idx[i] = int32((i*7 + 3) % n)
	}
	if bad >= 0 {
		idx[bad] = -1
	}
	dst := o.upload(compute.F32, make([]byte, 4*rows*width), rows, width)
	o.cpu.Gather(dst, o.upload(compute.F32, computetest.F32Bytes(src), n, width), o.upload(compute.I32, computetest.I32Bytes(idx), rows), rows)
	cpuErr := o.cpu.Sync()
	want := o.read(dst, rows*width)

	md, errWord := &mbuf{make([]byte, 4*rows*width)}, &mbuf{make([]byte, 16)}
	o.launch(kernels.GatherLaunch(rows, width), md, &mbuf{computetest.F32Bytes(src)}, &mbuf{computetest.I32Bytes(idx)}, int32(n), int32(width), errWord)
	computetest.SameBits(o.t, "dst", floats(md), want)
	o.checkError(errWord, cpuErr, bad >= 0, 2, bad, -1) // ERR_GATHER
}

func (o *op) rmsNorm(d, n int, add bool) {
	const eps = 1e-6
	xs, rs, ws := computetest.Randn(5, n*d), computetest.Randn(6, n*d), computetest.Randn(7, d)
	x, res := o.upload(compute.F32, computetest.F32Bytes(xs), n, d), o.upload(compute.F32, computetest.F32Bytes(rs), n, d)
	dst := o.upload(compute.F32, make([]byte, 4*n*d), n, d)
	w := o.upload(compute.F32, computetest.F32Bytes(ws), d)
	if add {
		o.cpu.AddRMSNorm(dst, res, x, w, n, eps)
	} else {
		o.cpu.RMSNorm(dst, x, w, n, eps)
	}
	want := o.read(dst, n*d)

	l := kernels.RMSNormLaunch(n, d)
	md, mx, mw := &mbuf{make([]byte, 4*n*d)}, &mbuf{computetest.F32Bytes(xs)}, &mbuf{computetest.F32Bytes(ws)}
	if add {
		mr := &mbuf{computetest.F32Bytes(rs)}
		o.launch(l, rmsNormArgs(l, md, mr, mx, mw, n, d, eps, 1)...)
		computetest.Near(o.t, "dst", floats(md), want, 2e-6, 1e-3)
		computetest.SameBits(o.t, "residual", floats(mr), o.read(res, n*d))
		return
	}
	// Without the residual, as tfd/cuda binds it: residual is x.
	o.launch(l, rmsNormArgs(l, md, mx, mx, mw, n, d, eps, 0)...)
	computetest.Near(o.t, "dst", floats(md), want, 2e-6, 1e-3)
	// In place: dst is x too.
	o.launch(l, rmsNormArgs(l, mx, mx, mx, mw, n, d, eps, 0)...)
	computetest.SameBits(o.t, "in place", floats(mx), floats(md))
}

// rmsNormArgs are l's arguments for RMSNormLaunch's kernel, x as it is (rmsnorm_row takes sum,
// bias, quarters and hasBias too).
func rmsNormArgs(l kernels.Launch, dst, res, x, w *mbuf, n, d int, eps float32, add int32) []any {
	if l.Kernel == "rmsnorm_row" {
		return []any{dst, res, x, w, int32(n), int32(d), eps, add, &mbuf{}, &mbuf{}, int32(0), int32(0)}
	}
	return []any{dst, res, x, w, int32(n), int32(d), eps, add}
}

// rmsNormQuarters checks rmsnorm_row on a matmul's four partials (quarters set; with and without
// a bias, with and without the residual) against mma_sum_quarters of them and then rmsnorm_row on
// the sum, bit for bit: the sum it writes, the residual and the output.
func (o *op) rmsNormQuarters(d, n int, add, withBias bool) {
	const eps = 1e-6
	size := n * d
	part := &mbuf{computetest.F32Bytes(computetest.Randn(8, 4*size))}
	bias := &mbuf{computetest.F32Bytes(computetest.Randn(9, d))}
	mw := &mbuf{computetest.F32Bytes(computetest.Randn(7, d))}
	rs := computetest.Randn(6, size)
	hasBias, accumulate := int32(0), int32(0)
	if withBias {
		hasBias = 1
	}
	if add {
		accumulate = 1
	}
	wantSum := &mbuf{make([]byte, 4*size)}
	_, sum := kernels.MatMulsWGQuartersLaunch(n, [3]int{d})
	o.launch(sum, wantSum, &mbuf{}, &mbuf{}, part, bias, &mbuf{}, &mbuf{},
		int32(n), int32(d), int32(0), int32(0), hasBias)
	l := kernels.RMSNormLaunch(n, d)
	want, wantRes := &mbuf{make([]byte, 4*size)}, &mbuf{computetest.F32Bytes(rs)}
	o.launch(l, want, wantRes, wantSum, mw, int32(n), int32(d), float32(eps), accumulate, &mbuf{}, &mbuf{}, int32(0), int32(0))
	got, gotRes, gotSum := &mbuf{make([]byte, 4*size)}, &mbuf{computetest.F32Bytes(rs)}, &mbuf{make([]byte, 4*size)}
	o.launch(l, got, gotRes, part, mw, int32(n), int32(d), float32(eps), accumulate, gotSum, bias, int32(1), hasBias)
	computetest.SameBits(o.t, "the quarters' sum", floats(gotSum), floats(wantSum))
	computetest.SameBits(o.t, "residual", floats(gotRes), floats(wantRes))
	computetest.SameBits(o.t, "dst", floats(got), floats(want))
}

func (o *op) rope(hd, heads int) {
	const rows = 7
	freqs := make([]float32, hd/2)
	for j := range freqs {
		freqs[j] = float32(1 / math.Pow(10000, float64(2*j)/float64(hd)))
	}
	xs := computetest.Randn(8, rows*heads*hd)
	pos := []int32{0, 1, 2, 100, 1000, 4095, 77777}
	x := o.upload(compute.F32, computetest.F32Bytes(xs), rows, heads*hd)
	o.cpu.RoPE(x, o.upload(compute.I32, computetest.I32Bytes(pos), rows), o.upload(compute.F32, computetest.F32Bytes(freqs), hd/2), rows, heads)
	want := o.read(x, rows*heads*hd)

	mx := &mbuf{computetest.F32Bytes(xs)}
	o.launch(kernels.RoPELaunch(rows, heads, hd/2), mx, &mbuf{computetest.I32Bytes(pos)}, &mbuf{computetest.F32Bytes(freqs)}, int32(heads), int32(hd/2))
	// The same steps as the CPU's; only a cos or sin rounded the other way apart.
	computetest.Near(o.t, "x", floats(mx), want, 1e-6, 1)
}

func (o *op) elementwise(kernel string, n int) {
	as, bs := computetest.Randn(9, n), computetest.Randn(10, n)
	tail := computetest.Randn(11, 300) // past n: must stay as it is
	// One row of n: the ops' rows are of the tensors' row length.
	dst := o.upload(compute.F32, make([]byte, 4*n), 1, n)
	a, b := o.upload(compute.F32, computetest.F32Bytes(as), 1, n), o.upload(compute.F32, computetest.F32Bytes(bs), 1, n)
	l := kernels.AddLaunch(n)
	switch kernel {
	case "silu_mul":
		o.cpu.SiLUMul(dst, a, b, 1)
		l = kernels.SiLUMulLaunch(n)
	case "gelu_tanh_mul":
		o.cpu.GELUTanhMul(dst, a, b, 1)
		l = kernels.GELUTanhMulLaunch(n)
	case "clamped_swiglu":
		// A limit of 1.5 clamps about one value in seven of N(0, 1), both ways.
		o.cpu.ClampedSwiGLU(dst, a, b, 1, 1.702, 1.5)
		l = kernels.ClampedSwiGLULaunch(n)
	default:
		o.cpu.Add(dst, a, b, 1)
	}
	want := o.read(dst, n)

	md := &mbuf{computetest.F32Bytes(append(make([]float32, n), tail...))}
	ma := &mbuf{computetest.F32Bytes(as)}
	if kernel == "clamped_swiglu" {
		o.launch(l, md, ma, &mbuf{computetest.F32Bytes(bs)}, int32(n), float32(1.702), float32(1.5))
	} else {
		o.launch(l, md, ma, &mbuf{computetest.F32Bytes(bs)}, int32(n))
	}
	got := floats(md)
	if kernel != "add" {
		computetest.Near(o.t, kernel, got[:n], want, 2e-6, 1e-30)
	} else {
		computetest.SameBits(o.t, "add", got[:n], want)
		// dst may be a.
		o.launch(l, ma, ma, &mbuf{computetest.F32Bytes(bs)}, int32(n))
		computetest.SameBits(o.t, "add in place", floats(ma), want)
	}
	computetest.SameBits(o.t, "past n", got[n:], tail)
}
