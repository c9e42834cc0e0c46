package kernels

import (
	"fmt"
	"strings"
	"testing"
)

// TestLaunches checks the launch table against the kernels: every kernel has a launch, each with
// the kernel's own threads, and the grids are those the bodies assume.
func TestLaunches(t *testing.T) {
	seen := map[string]bool{}
	add := func(l Launch) Launch {
		k, ok := Lookup(l.Kernel)
		if !ok || l.Threads != k.Threads {
			t.Errorf("%+v: no such kernel, or not its %d threads", l, k.Threads)
		}
		seen[l.Kernel] = true
		return l
	}
	for _, w := range []string{"bf16", "f16", "f32", "mxfp4"} {
		for _, c := range []struct {
			rows, out int
			kernel    string
			groups    [2]int
		}{
			{1, 5, "matmul_" + w + "_1", [2]int{2, 1}},
			{2, 8, "matmul_" + w + "_2", [2]int{2, 1}},
			{3, 9, "matmul_" + w + "_4", [2]int{3, 1}},
			{5, 4, "matmul_" + w + "_8", [2]int{1, 1}},
			{16, 4, "matmul_" + w + "_16", [2]int{1, 1}},
			{33, 130, "matmul_" + w + "_16", [2]int{33, 3}},
		} {
			if w == "mxfp4" {
				break // only experts' matrices come as MXFP4
			}
			if l := add(MatMulLaunch(w, c.rows, 100, c.out)); l.Kernel != c.kernel || l.Groups != c.groups {
				t.Errorf("MatMulLaunch(%s, %d, 100, %d) = %+v, want %s on %v", w, c.rows, c.out, l, c.kernel, c.groups)
			}
		}
		// Rows a multiple of 32 long: BF16 on the matrix unit, the others as above.
		if w != "mxfp4" {
			if l := add(MatMulLaunch(w, 3, 64, 9)); (w == "bf16") != (l.Kernel == "matmul_mma_bf16_1") {
				t.Errorf("MatMulLaunch(%s, 3, 64, 9) = %+v", w, l)
			}
		}
		if w != "mxfp4" && add(EmbedLaunch(w, 7, 300)).Groups != [2]int{7, 2} {
			t.Errorf("EmbedLaunch: %+v", EmbedLaunch(w, 7, 300))
		}
		// The row group holds an expert's average share of the pairs: decode (8 pairs among 128
		// experts) walks one pair at a time, prefill (2048 pairs) sixteen.
		for _, c := range []struct {
			pairs, experts, out int
			kernel              string
			groups              [2]int
		}{
			{8, 128, 768, "expert_matmul_" + w + "_1", [2]int{192, 128}},
			{16, 8, 5, "expert_matmul_" + w + "_2", [2]int{2, 8}},
			{20, 8, 8, "expert_matmul_" + w + "_4", [2]int{2, 8}},
			{60, 8, 8, "expert_matmul_" + w + "_8", [2]int{2, 8}},
			{96, 8, 64, "expert_matmul_" + w + "_16", [2]int{16, 8}},
			{2048, 128, 2048, "expert_matmul_" + w + "_16", [2]int{512, 128}},
		} {
			if l := add(ExpertMatMulLaunch(w, c.pairs, c.experts, c.out)); l.Kernel != c.kernel || l.Groups != c.groups {
				t.Errorf("ExpertMatMulLaunch(%s, %d, %d, %d) = %+v, want %s on %v", w, c.pairs, c.experts, c.out, l, c.kernel, c.groups)
			}
		}
	}
	for _, c := range []struct {
		rows, out int
		kernel    string
		groups    [2]int
	}{
		{1, 5, "matmul_mma_bf16_1", [2]int{1, 1}},
		{8, 4096, "matmul_mma_bf16_1", [2]int{1, 256}},
		{9, 130, "matmul_mma_bf16_2", [2]int{1, 5}},
		{32, 4096, "matmul_mma_bf16_2", [2]int{2, 128}},
		{33, 130, "matmul_mma_bf16_4", [2]int{2, 3}},
		{4096, 4096, "matmul_mma_bf16_4", [2]int{128, 64}},
	} {
		if l := add(MatMulLaunch("bf16", c.rows, 4096, c.out)); l.Kernel != c.kernel || l.Groups != c.groups {
			t.Errorf("MatMulLaunch(bf16, %d, 4096, %d) = %+v, want %s on %v", c.rows, c.out, l, c.kernel, c.groups)
		}
		// Packed matrices: the same tiles, on the packed kernel of the same S.
		packed := strings.Replace(c.kernel, "mma_", "mma_packed_", 1)
		if l := add(MatMulsPackedLaunch(c.rows, [3]int{c.out})); l.Kernel != packed || l.Groups != c.groups {
			t.Errorf("MatMulsPackedLaunch(%d, {%d}) = %+v, want %s on %v", c.rows, c.out, l, packed, c.groups)
		}
	}
	// x split once: the grid of S = 2 or 1; a SIMD group per slot of 8 rows by 32, rows rounded up
	// to 32.
	if l := add(MatMulsSplitLaunch(20, [3]int{4096, 1000, 40}, 2)); l.Kernel != "matmul_mma_xs_bf16_2" || l.Groups != [2]int{2, 128 + 32 + 2} {
		t.Errorf("MatMulsSplitLaunch(20, {4096, 1000, 40}, 2) = %+v", l)
	}
	if l := add(MatMulsSplitLaunch(3, [3]int{4096}, 1)); l.Kernel != "matmul_mma_xs_bf16_1" || l.Groups != [2]int{1, 256} {
		t.Errorf("MatMulsSplitLaunch(3, {4096}, 1) = %+v", l)
	}
	if l := add(SplitXLaunch(70, 4096)); l.Kernel != "mma_split_x" || l.Groups != [2]int{96 * 128 / 8 / 4, 1} || SplitXWords(70, 4096) != 96*4096 {
		t.Errorf("SplitXLaunch(70, 4096) = %+v, %d words", l, SplitXWords(70, 4096))
	}
	// The warpgroup's tile: 128 outputs by WGRows rows a group, 256 threads; its split has
	// mma_split_x's grid; UsesWG from WGFrom rows where the groups fill every SM once.
	if l := add(MatMulsWGLaunch(70, [3]int{4096, 1000, 40})); l.Kernel != "matmul_wg4_bf16_64" || l.Groups != [2]int{2, 32 + 8 + 1} || l.Threads != 256 {
		t.Errorf("MatMulsWGLaunch(70, {4096, 1000, 40}) = %+v", l)
	}
	if l, sum := MatMulsWGQuartersLaunch(70, [3]int{4096, 1000, 40}); add(l).Kernel != "matmul_wg1_bf16_64" || l.Groups != [2]int{8, 32 + 8 + 1} ||
		add(sum).Kernel != "mma_sum_quarters" || sum.Groups != [2]int{(70*5136 + 255) / 256, 1} || WGQuarterWords(70, [3]int{4096, 1000, 40}) != 4*70*5136 {
		t.Errorf("MatMulsWGQuartersLaunch(70, {4096, 1000, 40}) = %+v, %+v", l, sum)
	}
	// The copy engine's tile (TestMatMulsWGTLaunch checks its grid and bytes).
	for _, n := range []int{64, 128} {
		for _, p := range []int{4, 1} {
			l, _ := MatMulsWGTLaunch(70, [3]int{4096, 1000, 40}, n, p)
			if add(l).Kernel != fmt.Sprintf("matmul_wgt%d_bf16_%d", p, n) {
				t.Errorf("MatMulsWGTLaunch(70, {4096, 1000, 40}, %d, %d) = %+v", n, p, l)
			}
		}
	}
	if l := add(SplitWGLaunch(70, 4096)); l.Kernel != "mma_split_wg" || l.Groups != [2]int{96 * 128 / 8 / 4, 1} {
		t.Errorf("SplitWGLaunch(70, 4096) = %+v", l)
	}
	if l := add(SplitSiLUWGLaunch(70, 4096)); l.Kernel != "mma_split_silu_wg" || l.Groups != [2]int{96 * 128 / 8 / 4, 1} {
		t.Errorf("SplitSiLUWGLaunch(70, 4096) = %+v", l)
	}
	for _, c := range []struct {
		rows int
		outs [3]int
		want bool
	}{{64, [3]int{12288, 12288}, true}, {47, [3]int{12288, 12288}, false}, {64, [3]int{4096}, false}, {64, [3]int{4096, 1024, 1024}, false},
		{256, [3]int{4096, 1024, 1024}, true}, {256, [3]int{4096}, false}, {256, [3]int{12288, 12288}, true}} {
		if got := UsesWG(c.rows, c.outs, 132); got != c.want {
			t.Errorf("UsesWG(%d, %v, 132) = %v, want %v", c.rows, c.outs, got, c.want)
		}
	}
	// Quarters where the whole tiles would make fewer than two groups an SM.
	for _, c := range []struct {
		rows int
		outs [3]int
		want bool
	}{{64, [3]int{4096}, true}, {64, [3]int{4096, 1024, 1024}, true}, {64, [3]int{12288, 12288}, true}, {47, [3]int{4096}, false},
		{64, [3]int{1024}, true}, {256, [3]int{4096}, true}, {256, [3]int{4096, 1024, 1024}, true}, {256, [3]int{12288, 12288}, false}, {200, [3]int{12288, 12288}, false}} {
		if got := UsesWGQuarters(c.rows, c.outs, 132); got != c.want {
			t.Errorf("UsesWGQuarters(%d, %v, 132) = %v, want %v", c.rows, c.outs, got, c.want)
		}
	}
	if add(EmbedPackedLaunch(7, 320)).Groups != [2]int{7, 2} {
		t.Errorf("EmbedPackedLaunch: %+v", EmbedPackedLaunch(7, 320))
	}
	for _, c := range []struct {
		l      Launch
		groups [2]int
	}{
		{GatherLaunch(3, 256), [2]int{3, 1}},
		{RMSNormLaunch(9, 128), [2]int{3, 1}},
		{RMSNormLaunch(9, 256), [2]int{3, 1}},
		{RMSNormLaunch(9, 257), [2]int{9, 1}},
		{RMSNormLaunch(1, 4096), [2]int{1, 1}},
		{RoPELaunch(5, 32, 64), [2]int{5, 8}},
		{KVWriteLaunch(6, 1024, KVF32), [2]int{6, 4}},
		{KVWriteLaunch(6, 1024, KVF16), [2]int{6, 4}},
		{AttentionLaunch(1, 32, 4, 128, KVF32).Split, [2]int{32 * 16, 1}},
		{AttentionLaunch(8, 32, 4, 128, KVF32).Split, [2]int{32 * 4, 8}},
		{AttentionSplitLaunch(64, 32, 128, KVF32).Split, [2]int{32, 64}},
		{AttentionLaunch(6, 8, 1, 64, KVF32).Combine, [2]int{8, 6}},
		{AttentionLaunch(64, 32, 4, 128, KVF32).Split, [2]int{8 * 16, 8}},
		{AttentionLaunch(100, 8, 1, 64, KVF32).Split, [2]int{8 * 16, 4}},
		{AttentionLaunch(64, 16, 8, 256, KVF32).Split, [2]int{2 * 16, 32}},
		{AttentionLaunch(1, 32, 4, 128, KVF16).Split, [2]int{32 * 16, 1}},
		{AttentionLaunch(64, 32, 4, 128, KVF16).Split, [2]int{8 * 16, 8}},
		{AttentionLaunch(64, 16, 8, 256, KVF16).Split, [2]int{2 * 16, 32}},
		{AttentionWarpLaunch(1, 32, 128, KVF32).Split, [2]int{8 * 16, 1}},
		{AttentionWarpLaunch(16, 32, 128, KVF32).Split, [2]int{8 * 4, 16}},
		{AttentionWarpLaunch(64, 32, 128, KVF32).Split, [2]int{8, 64}},
		{AttentionWarpLaunch(128, 32, 128, KVF16).Split, [2]int{8, 128}},
		{AttentionWarpLaunch(20, 6, 64, KVF16).Combine, [2]int{6, 20}},
		// attention_mma: a row a tile for rows of many sessions, 16 blocks a (row, kv head) at one
		// row (1,024 groups' worth: 1024·4/32 = 128, capped), 2 at 64; a prompt's 256 rows in tiles
		// of 32/group rows, 16 blocks.
		{AttentionMMALaunch(1, 1, 32, 4, 128, KVF32).Split, [2]int{8 * 16, 1}},
		{AttentionMMALaunch(64, 64, 32, 4, 128, KVF32).Split, [2]int{8 * 2, 64}},
		{AttentionMMALaunch(256, 1, 32, 4, 128, KVF16).Split, [2]int{8 * 16, 32}},
		{AttentionMMALaunch(256, 1, 8, 1, 64, KVF32).Split, [2]int{8 * 16, 8}},
		{SiLUMulLaunch(257), [2]int{2, 1}},
		{GELUTanhMulLaunch(257), [2]int{2, 1}},
		{ClampedSwiGLULaunch(257), [2]int{2, 1}},
		{AddLaunch(256), [2]int{1, 1}},
		{ArgmaxNextLaunch(), [2]int{1, 1}},
		{ArgmaxRowsLaunch(5), [2]int{5, 1}},
		{VerifyDraftsLaunch(), [2]int{1, 1}},
		{DraftNextLaunch(), [2]int{1, 1}},
		{RouteLaunch(9), [2]int{3, 1}},
		{GroupExpertsLaunch(128), [2]int{128, 1}},
		{CombineExpertsLaunch(257), [2]int{2, 1}},
		{AddLaunch(0), [2]int{0, 1}},
		{SigmoidMulLaunch(257), [2]int{2, 1}},
		{AddSigmoidScaledLaunch(256), [2]int{1, 1}},
		{CausalConvSiLULaunch(8192), [2]int{32, 1}},
		{GatedDeltaRuleLaunch(32, 128, 128), [2]int{32, 4}},
		{GatedDeltaRuleLaunch(4, 16, 16), [2]int{4, 1}},
	} {
		if add(c.l).Groups != c.groups {
			t.Errorf("%+v: want groups %v", c.l, c.groups)
		}
	}
	for _, c := range []struct{ rows, heads, blocks int }{{1, 32, 16}, {1, 6, 16}, {8, 32, 4}, {33, 32, 1}, {256, 32, 1}} {
		if l := AttentionSplitLaunch(c.rows, c.heads, 128, KVF32); l.Blocks != c.blocks || l.Split.Groups[0] != c.heads*c.blocks {
			t.Errorf("AttentionSplitLaunch(%d, %d, 128, KVF32): %d blocks on %v, want %d", c.rows, c.heads, l.Blocks, l.Split.Groups, c.blocks)
		} else if (l.Combine.Kernel == "") != (c.blocks == 1) {
			t.Errorf("AttentionSplitLaunch(%d, %d, 128, KVF32): %d blocks and combine %q, want a combine where blocks > 1 only", c.rows, c.heads, l.Blocks, l.Combine.Kernel)
		}
	}
	for _, c := range []struct{ rows, heads, blocks int }{{1, 32, 16}, {16, 32, 4}, {32, 32, 2}, {64, 32, 1}, {400, 6, 1}, {150, 6, 2}} {
		if l := AttentionWarpLaunch(c.rows, c.heads, 128, KVF32); l.Blocks != c.blocks || l.Split.Groups[0] != (c.heads+3)/4*c.blocks {
			t.Errorf("AttentionWarpLaunch(%d, %d, 128, KVF32): %d blocks on %v, want %d", c.rows, c.heads, l.Blocks, l.Split.Groups, c.blocks)
		} else if (l.Combine.Kernel == "") != (c.blocks == 1) {
			t.Errorf("AttentionWarpLaunch(%d, %d, 128, KVF32): %d blocks and combine %q, want a combine where blocks > 1 only", c.rows, c.heads, l.Blocks, l.Combine.Kernel)
		}
	}
	if got, want := AttentionLaunch(3, 8, 1, 64, KVF32).Scratch, 3*8*AttentionSplits*66; got != want {
		t.Errorf("AttentionLaunch(3, 8, 1, 64, KVF32).Scratch = %d, want %d", got, want)
	}
	// The tiled kernel from AttentionTileFrom rows, when a tile holds a row; attention_split
	// otherwise.
	for _, c := range []struct {
		rows, heads, group, hd int
		kernel                 string
	}{
		{AttentionTileFrom - 1, 32, 4, 128, "attention_split_f32"},
		{AttentionTileFrom, 32, 4, 128, "attention_tile_128_f32"},
		{4096, 8, 1, 64, "attention_tile_128_f32"},
		{4096, 16, 8, 256, "attention_tile_256_f32"},
		{4096, 32, 32, 128, "attention_tile_128_f32"},
		{4096, 64, 64, 128, "attention_split_f32"},
		{4096, 32, 32, 256, "attention_split_f32"},
	} {
		if l := AttentionLaunch(c.rows, c.heads, c.group, c.hd, KVF32); l.Split.Kernel != c.kernel {
			t.Errorf("AttentionLaunch(%d, %d, %d, %d) runs %s, want %s", c.rows, c.heads, c.group, c.hd, l.Split.Kernel, c.kernel)
		}
	}
	for _, c := range []struct{ rows, heads, kvHeads, hd, gx int }{{1, 32, 8, 128, 10}, {7, 6, 2, 64, 2}, {3, 8, 1, 256, 3}} {
		for _, kv := range []KV{KVF32, KVF16} {
			l, ok := QKRopeWriteLaunch(c.rows, c.heads, c.kvHeads, c.hd, c.hd/2, kv)
			if !ok || add(l).Groups != [2]int{c.gx, c.rows} {
				t.Errorf("QKRopeWriteLaunch(%d, %d, %d, %d, %s) = %+v, %v; want groups %v", c.rows, c.heads, c.kvHeads, c.hd, kv, l, ok, [2]int{c.gx, c.rows})
			}
		}
	}
	for _, c := range []struct{ hd, half int }{{16, 8}, {96, 48}, {512, 256}, {128, 32}} {
		if l, ok := QKRopeWriteLaunch(1, 4, 4, c.hd, c.half, KVF32); ok {
			t.Errorf("QKRopeWriteLaunch for heads of %d turned by %d frequencies = %+v, want none", c.hd, c.half, l)
		}
	}
	checkQuantLaunches(t, add)
	for _, k := range All() {
		if !seen[k.Name] {
			t.Errorf("%s has no launch", k.Name)
		}
	}
}

// TestAttentionSplitAgrees checks that the Go constants of attention's split are those the kernels
// are compiled with (common.h).
func TestAttentionSplitAgrees(t *testing.T) {
	common := Prelude("common.h")
	for name, v := range map[string]int{"ATTN_CHUNK": AttentionChunk, "ATTN_SPLITS": AttentionSplits} {
		if want := fmt.Sprintf("#define %s %d\n", name, v); !strings.Contains(common, want) {
			t.Errorf("common.h does not say %q", strings.TrimSpace(want))
		}
	}
}

// TestMatMulLaunchAllocatesNothing: a backend records a matmul per layer and projection on every
// forward, which must allocate nothing (the cuda backend's TestRecordingAllocatesNothing).
func TestMatMulLaunchAllocatesNothing(t *testing.T) {
	if a := testing.AllocsPerRun(100, func() {
		_ = MatMulLaunch("bf16", 4, 256, 256)
		_ = MatMulLaunch("f16", 40, 256, 256)
		_ = MatMulsLaunch(40, [3]int{4096, 1024, 1024})
	}); a != 0 {
		t.Errorf("MatMulLaunch and MatMulsLaunch allocate %v times", a)
	}
}

// TestAttentionTileShares: the tiles run where a run of rows of one base is on average at least
// a tile long (a prompt), not for a round of rows of as many sessions or a window that moves
// with each row.
func TestAttentionTileShares(t *testing.T) {
	for _, c := range []struct {
		rows, runs, group, hd int
		want                  bool
	}{
		{256, 1, 4, 128, true},   // a prompt's chunk
		{256, 32, 4, 128, true},  // 32 prompts of 8 rows: a tile (32/4 = 8 rows) each
		{256, 33, 4, 128, false}, // a run shorter than a tile on average
		{64, 64, 4, 128, false},  // 64 decode rows of 64 sessions
		{AttentionTileFrom - 1, 1, 4, 128, false},
		{256, 16, 1, 256, true}, // 16-row tiles past 128 elements a head
		{256, 17, 1, 256, false},
		{256, 200, 32, 128, true}, // a tile of one row shares among heads alone
		{256, 0, 4, 128, false},   // nothing known
	} {
		if got := AttentionTileShares(c.rows, c.runs, c.group, c.hd); got != c.want {
			t.Errorf("AttentionTileShares(%d, %d, %d, %d) = %v, want %v", c.rows, c.runs, c.group, c.hd, got, c.want)
		}
	}
}

// TestMMATileChoosesTheMeasuredBest checks MMATile against BenchmarkTileSizes on the H200 (132
// SMs; docs/performance.md): the 8B layer's matrices at 16 to 256 rows, each the S that was
// fastest or within 10% of it.
func TestMMATileChoosesTheMeasuredBest(t *testing.T) {
	qkv, o, gateup, down := [3]int{4096, 1024, 1024}, [3]int{4096}, [3]int{12288, 12288}, [3]int{4096}
	for _, c := range []struct {
		rows int
		outs [3]int
		want int
	}{
		{1, gateup, 1}, {8, qkv, 1},
		{16, qkv, 2}, {16, o, 2}, {16, gateup, 2}, {16, down, 2},
		{32, qkv, 2}, {32, o, 2}, {32, gateup, 4}, {32, down, 2},
		{64, qkv, 2}, {64, o, 2}, {64, gateup, 4}, {64, down, 2},
		{256, qkv, 4}, {256, o, 4}, {256, gateup, 4}, {256, down, 4},
	} {
		if got := MMATile(c.rows, c.outs, 132); got != c.want {
			t.Errorf("MMATile(%d rows, %v, 132 SMs) = %d, want %d", c.rows, c.outs, got, c.want)
		}
	}
}

// TestUsesWGT pins the copy engine's tile to where it measured faster on the H200 (132
// multiprocessors; kernels.UsesWGT's figures): an 8B layer's matrices at 48 to 256 rows, and
// none for the bundled model's K of 384 and 1,024, where it measured slower.
func TestUsesWGT(t *testing.T) {
	qkv, o, gateUp, down := [3]int{4096, 1024, 1024}, [3]int{4096}, [3]int{12288, 12288}, [3]int{4096}
	for _, c := range []struct {
		rows, kdim int
		outs       [3]int
		n, p       int // 0: not the copy engine's tile
	}{
		{47, 4096, gateUp, 0, 0},
		{64, 4096, gateUp, 64, 4}, {64, 4096, qkv, 0, 0}, {64, 4096, o, 64, 1}, {64, 12288, down, 64, 1},
		{128, 4096, gateUp, 128, 4}, {128, 4096, qkv, 64, 4}, {128, 4096, o, 0, 0}, {128, 12288, down, 128, 1},
		{192, 4096, o, 64, 4}, {200, 4096, [3]int{1024}, 128, 1},
		{256, 4096, gateUp, 128, 4}, {256, 4096, qkv, 128, 4}, {256, 4096, o, 64, 4}, {256, 12288, down, 128, 1},
		{256, 384, [3]int{1024, 1024}, 0, 0}, {256, 1024, [3]int{384}, 0, 0}, {256, 4095, gateUp, 0, 0},
	} {
		n, p, ok := UsesWGT(c.rows, c.kdim, c.outs, 132)
		if !ok {
			n, p = 0, 0
		}
		if n != c.n || p != c.p {
			t.Errorf("UsesWGT(%d, %d, %v, 132) = %d, %d, %v; want %d, %d", c.rows, c.kdim, c.outs, n, p, ok, c.n, c.p)
		}
	}
}

// TestMatMulsWGTLaunch checks the grid and shared memory of matmul_wgtP_bf16_N: row tiles of N
// (four times for quarters) by the matrices' tiles of 128 outputs, and the ring's bytes.
func TestMatMulsWGTLaunch(t *testing.T) {
	l, sum := MatMulsWGTLaunch(130, [3]int{37, 16, 300}, 128, 1)
	if l.Kernel != "matmul_wgt1_bf16_128" || l.Groups != [2]int{8, 5} || l.Threads != 288 || l.Shared != WGTShared(128, WGTStages(128)) {
		t.Errorf("P = 1: %+v", l)
	}
	if sum.Kernel != "mma_sum_quarters" {
		t.Errorf("P = 1: sum %+v, want mma_sum_quarters", sum)
	}
	l, sum = MatMulsWGTLaunch(256, [3]int{4096}, 64, 4)
	if l.Kernel != "matmul_wgt4_bf16_64" || l.Groups != [2]int{4, 32} || l.Shared != 8*(8192+64*128)+8*16 || sum.Kernel != "" {
		t.Errorf("P = 4: %+v, sum %+v", l, sum)
	}
	if x, w := WGTXMap(70, 4096, 128), WGTWeightMap(37, 96); x != (WGTMap{Rows: 12, Chunks: 128, Box: 16}) || w != (WGTMap{Rows: 3, Chunks: 3, Box: 8}) {
		t.Errorf("WGTXMap(70, 4096, 128) = %+v, WGTWeightMap(37, 96) = %+v", x, w)
	}
	if k, _ := Lookup(l.Kernel); !k.Dynamic {
		t.Errorf("%s does not declare DYNAMIC_SHARED", l.Kernel)
	}
}
