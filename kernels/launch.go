package kernels

import "fmt"

// Launch is one launch of a kernel as a backend makes it for an op: which kernel, its grid of
// threadgroups (CUDA blocks), and the threads in each. Arguments go in the kernel's parameter order
// (Kernel.Params); on Metal, parameter i is [[buffer(i)]]. The grid is what the kernel's body
// assumes (one warp per output column, four per group, and so on), so it lives here beside the
// bodies, for every backend.
type Launch struct {
	Kernel  string
	Groups  [2]int // threadgroups along x and y; none when either is 0
	Threads int    // threads per threadgroup: the kernel's threads(N)
	Shared  int    // bytes of dynamic shared memory (CUDA; kernels that declare DYNAMIC_SHARED)
}

// MatMulRows are the row-group sizes of the matmul kernels: matmul_W_R makes R rows per weight load.
var MatMulRows = [...]int{1, 2, 4, 8, 16}

// MMAChunk is the K a chunk of the matrix-unit kernels (matmul_mma_bf16_S) covers; MatMulLaunch
// picks them for BF16 weights whose rows are a multiple of it long.
const MMAChunk = 32

// MatMulLaunch is the launch of MatMul for rows rows of x against weights of dtype suffix w
// ("bf16", "f16" or "f32") with out rows of in elements.
//
// BF16 weights with in a multiple of MMAChunk go to the matrix unit (matmul_mma_bf16_S): four
// SIMD groups per group on a tile of 16·M outputs by 8·N rows, M and N growing with rows so that a
// large product reuses each load and a small one still spreads over many groups. The choice of
// kernel follows the weights alone, and every M and N gives the same bits, so a row's bits never
// depend on how many rows share the launch.
//
// Others go to matmul_W_R, as MatMulLanesLaunch says.
func MatMulLaunch(w string, rows, in, out int) Launch {
	if UsesMMA(w, in) {
		return MatMulsLaunch(rows, [3]int{out})
	}
	return MatMulLanesLaunch(w, rows, out)
}

// MatMulsLaunch is the launch of matmul_mma_bf16_S for rows rows of x against up to three BF16
// matrices of outs[m] outputs each (0: no matrix), which UsesMMA must allow: its arguments are
// dst0, dst1, dst2, x, w0, w1, w2, bias0, bias1, bias2, rows, kdim, n0, n1, n2, and hasBias with
// bit m set where matrix m has a bias (every buffer bound, those of absent matrices and biases
// never read). MatMul is the case of one matrix. Each output gets the bits a launch of its
// matrix alone gives it.
func MatMulsLaunch(rows int, outs [3]int) Launch {
	return MatMulsLaunchS(rows, outs, MMATile(rows, outs, 0))
}

// mmaGroups is the grid of matmul_mma_bf16_S and its packed twin for tiles of S = s.
func mmaGroups(rows int, outs [3]int, s int) (tiles, rowGroups int) {
	return ceilDiv(outs[0], 16*s) + ceilDiv(outs[1], 16*s) + ceilDiv(outs[2], 16*s), ceilDiv(rows, 8*s)
}

// MMATile chooses the tile size S of matmul_mma_bf16_S and its packed twin, which give the same
// bits whatever S, for rows rows against matrices of outs outputs on a GPU of sms
// multiprocessors (0: unknown). One to 8 rows take S = 1 (a tile of 8 rows), 9 to 31 take S = 2.
// From 32 rows S = 4 (tiles of 64 outputs by 32 rows) does the most work a weight load, but
// gives a quarter of S = 2's groups: on the H200 (132 SMs) with an 8B layer's matrices, against
// S = 2 on x split once, it was 1.3 times as fast for gate and up at 32 rows (384 groups) and 1.15
// to 1.2 times as slow for q/k/v (192) and o (128) at 64; so S = 4 where it makes at least two
// groups for every multiprocessor, S = 2 where it would not (BenchmarkTileSizes,
// docs/performance.md). Without sms, S = 4 from 33 rows.
func MMATile(rows int, outs [3]int, sms int) int {
	switch {
	case rows <= 8:
		return 1
	case rows < 32, sms == 0 && rows <= 32:
		return 2
	case sms == 0:
		return 4
	}
	if tiles, rowGroups := mmaGroups(rows, outs, 4); tiles*rowGroups >= 2*sms {
		return 4
	}
	return 2
}

// MatMulsLaunchS is MatMulsLaunch with tiles of S = s (1, 2 or 4): the same bits whatever s.
func MatMulsLaunchS(rows int, outs [3]int, s int) Launch {
	tiles, rowGroups := mmaGroups(rows, outs, s)
	return launch(mmaNames[s], rowGroups, tiles)
}

// MatMulsPackedLaunch is MatMulsLaunch for matrices stored in the matrix unit's packed order
// (PackMMA): matmul_mma_packed_bf16_S, with the same arguments, tiles and bits.
func MatMulsPackedLaunch(rows int, outs [3]int) Launch {
	return MatMulsPackedLaunchS(rows, outs, MMATile(rows, outs, 0))
}

// MatMulsPackedLaunchS is MatMulsLaunchS for packed matrices.
func MatMulsPackedLaunchS(rows int, outs [3]int, s int) Launch {
	tiles, rowGroups := mmaGroups(rows, outs, s)
	return launch(mmaPackedNames[s], rowGroups, tiles)
}

// MatMulsSplitLaunch is the launch of matmul_mma_xs_bf16_S, MatMulsPackedLaunchS's S = s (1 or 2:
// the same arguments, grid and bits) with x split once beforehand (SplitXLaunch): x is then the
// split. (S = 4 splitting once was measured and dropped: docs/performance.md.)
func MatMulsSplitLaunch(rows int, outs [3]int, s int) Launch {
	tiles, rowGroups := mmaGroups(rows, outs, s)
	return launch(mmaSplitNames[s], rowGroups, tiles)
}

// SplitXLaunch is the launch of mma_split_x for rows rows of kdim elements (a multiple of 32): a
// SIMD group per slot of 8 rows by 32 elements, rows rounded up to 32.
func SplitXLaunch(rows, kdim int) Launch { return splitLaunch("mma_split_x", rows, kdim) }

// splitLaunch is the launch of mma_split_L (name) for rows rows of kdim elements.
func splitLaunch(name string, rows, kdim int) Launch {
	return launch(name, ceilDiv(SplitXWords(rows, kdim)/256, 4), 1)
}

// SplitXWords is the size of mma_split_x's output in 32-bit words: rows rounded up to 32, by kdim.
func SplitXWords(rows, kdim int) int { return ceilDiv(max(rows, 0), 32) * 32 * kdim }

// WGRows is the rows of matmul_wgP_bf16_N's tile (N), which makes 128 outputs by WGRows rows a
// group; the backend runs it from WGFrom rows on a GPU that has wgmma (CUDA compute capability
// 9.0), and its bits are the other tiles' (kernels/src/mmawg.kern).
const WGRows = 64

// WGFrom is the fewest rows the backend gives matmul_wgP_bf16_N: below it a tile of WGRows rows
// is mostly rows that are not there, and MMATile's tiles waste less (not measured below 64).
const WGFrom = 48

// UsesWG says whether the backend gives rows rows against matrices of outs outputs to
// matmul_wg4_bf16_N on a GPU of sms multiprocessors that has it: from WGFrom rows, where its
// groups (128 outputs by WGRows rows each) fill every multiprocessor at least once. On the H200
// (132) with an 8B layer's matrices (BenchmarkTileSizes, µs a launch, against S = 4's tiles):
// gate and up at 64 rows (192 groups) 103 against 121, at 256 rows 315 against 446; q/k/v at
// 256 rows (192) 108 against 117; but q/k/v at 64 rows (48 groups) 86 against 51, o and down at
// 64 rows (32) 85 and 249 against 40 and 116. The backend asks UsesWGT first (where the copy
// engine's tile, launch_wgt.go, runs instead), then UsesWGQuarters: where the whole tiles make
// fewer than two groups a multiprocessor, their quarters run instead.
func UsesWG(rows int, outs [3]int, sms int) bool {
	tiles, rowGroups := wgGroups(rows, outs)
	return rows >= WGFrom && tiles*rowGroups >= sms
}

// UsesWGQuarters says whether the backend gives rows rows against matrices of outs outputs to
// matmul_wg1_bf16_N (MatMulsWGQuartersLaunch) on a GPU of sms multiprocessors that has it, ahead
// of UsesWG: from WGFrom rows, where matmul_wg4_bf16_N would make fewer than two groups a
// multiprocessor. On the H200 (BenchmarkTileSizes, µs a launch, the quarters against the best
// other tile): q/k/v, o and down at 64 rows 35.3 / 29.7 / 79.8 against S = 2's 44.9 / 31.5 /
// 83.3; o and down at 128 rows 36.8 / 92.8 against S = 4's 48.4 / 137.8, q/k/v 64.6 against 61.9;
// at 256 rows 100.5 / 70.0 / 175.4 against the whole tiles' 105.1 / 82.6 / 243.9.
func UsesWGQuarters(rows int, outs [3]int, sms int) bool {
	tiles, rowGroups := wgGroups(rows, outs)
	return rows >= WGFrom && tiles*rowGroups < 2*sms
}

// wgGroups is the grid of matmul_wg4_bf16_N: tiles of 128 outputs by row groups of WGRows.
func wgGroups(rows int, outs [3]int) (tiles, rowGroups int) {
	return ceilDiv(outs[0], 128) + ceilDiv(outs[1], 128) + ceilDiv(outs[2], 128), ceilDiv(rows, WGRows)
}

// MatMulsWGLaunch is the launch of matmul_wg4_bf16_N, MatMulsPackedLaunch's kernel (the same
// arguments and bits) with x split once beforehand by SplitWGLaunch: x is then that split.
func MatMulsWGLaunch(rows int, outs [3]int) Launch {
	tiles, rowGroups := wgGroups(rows, outs)
	return launch(wgName, rowGroups, tiles)
}

// MatMulsWGQuartersLaunch is matmul_wg4_bf16_N's work in four times the groups: matmul_wg1_bf16_N
// (its arguments, but dst0 a scratch of WGQuarterWords floats and dst1, dst2 unused), a group a
// quarter of K's chunks, and then Sum, mma_sum_quarters (dst0, dst1, dst2, that scratch, bias0,
// bias1, bias2, rows, n0, n1, n2, hasBias), which adds the quarters in matmul_wg4_bf16_N's order:
// the same bits.
func MatMulsWGQuartersLaunch(rows int, outs [3]int) (matmul, sum Launch) {
	tiles, rowGroups := wgGroups(rows, outs)
	n := max(rows, 0) * (max(outs[0], 0) + max(outs[1], 0) + max(outs[2], 0))
	return launch(wgQuartersName, 4*rowGroups, tiles), launch("mma_sum_quarters", ceilDiv(n, 256), 1)
}

// WGQuarterWords is the size of matmul_wg1_bf16_N's scratch of quarters, in floats.
func WGQuarterWords(rows int, outs [3]int) int {
	return 4 * max(rows, 0) * (max(outs[0], 0) + max(outs[1], 0) + max(outs[2], 0))
}

// SplitWGLaunch is the launch of mma_split_wg, mma_split_x's other layout, for matmul_wgP_bf16_N:
// its output is SplitXWords(rows, kdim) words too.
func SplitWGLaunch(rows, kdim int) Launch { return splitLaunch("mma_split_wg", rows, kdim) }

// SplitSiLUWGLaunch is the launch of mma_split_silu_wg (xs, gate, up, rows, kdim, gsum, usum,
// gbias, ubias, quarters, hasBias): SplitWGLaunch's split of silu_mul(gate, up), its grid and
// output; with quarters set, gate and up are a gate and up matmul's quarters, which it adds.
func SplitSiLUWGLaunch(rows, kdim int) Launch { return splitLaunch("mma_split_silu_wg", rows, kdim) }

// The kernels' names, made once: a backend records a matmul without allocating.
var (
	mmaNames       = [...]string{1: "matmul_mma_bf16_1", 2: "matmul_mma_bf16_2", 4: "matmul_mma_bf16_4"}
	mmaPackedNames = [...]string{1: "matmul_mma_packed_bf16_1", 2: "matmul_mma_packed_bf16_2", 4: "matmul_mma_packed_bf16_4"}
	mmaSplitNames  = [...]string{1: "matmul_mma_xs_bf16_1", 2: "matmul_mma_xs_bf16_2"}
	wgName         = fmt.Sprintf("matmul_wg4_bf16_%d", WGRows)
	wgQuartersName = fmt.Sprintf("matmul_wg1_bf16_%d", WGRows)
	matmulNames    = func() map[string][len(MatMulRows)]string {
		m := map[string][len(MatMulRows)]string{}
		for _, w := range []string{"bf16", "f16", "f32"} {
			var names [len(MatMulRows)]string
			for i, r := range MatMulRows {
				names[i] = fmt.Sprintf("matmul_%s_%d", w, r)
			}
			m[w] = names
		}
		return m
	}()
)

// MatMulLanesLaunch is the launch of matmul_W_R, the kernel that sums each dot product across the
// lanes of a SIMD group (ExpertMatMul's order): four outputs per group (one per SIMD group), and
// the smallest row group R that holds rows, or 16 (grid y then takes groups of 16 rows).
func MatMulLanesLaunch(w string, rows, out int) Launch {
	i := len(MatMulRows) - 1
	for j, n := range MatMulRows {
		if n >= rows {
			i = j
			break
		}
	}
	return launch(matmulNames[w][i], ceilDiv(out, 4), ceilDiv(rows, MatMulRows[i]))
}

// UsesMMA says whether MatMul with weights of dtype suffix w and rows of in elements runs on the
// matrix unit (see MatMulLaunch).
func UsesMMA(w string, in int) bool { return w == "bf16" && in%MMAChunk == 0 }

// rowBlock is the threads of one block of the row kernels that give a thread to each element
// (embed, gather, rope, kv_write): a row's elements go in blocks of rowBlock along grid y.
const rowBlock = 256

// EmbedLaunch is the launch of Embed for rows tokens of dim elements from a table of dtype suffix
// w: a thread per element, rows along x.
func EmbedLaunch(w string, rows, dim int) Launch {
	return launch("embed_"+w, rows, ceilDiv(dim, rowBlock))
}

// EmbedPackedLaunch is EmbedLaunch for a BF16 table stored in the matrix unit's packed order
// (PackMMA), dim a multiple of MMAChunk: embed_packed_bf16, the same grid.
func EmbedPackedLaunch(rows, dim int) Launch {
	return launch("embed_packed_bf16", rows, ceilDiv(dim, rowBlock))
}

// GatherLaunch is the launch of Gather for rows rows of width elements: a thread per element.
func GatherLaunch(rows, width int) Launch { return launch("gather", rows, ceilDiv(width, rowBlock)) }

// RMSNormRowFrom is the shortest vector that RMSNorm and AddRMSNorm give a block of its own
// (rmsnorm_row); shorter ones, such as the per-head q/k norms, get a SIMD group each (rmsnorm).
// The choice follows the vector length alone, never the count, so a vector's bits never depend
// on how many share the launch.
const RMSNormRowFrom = 257

// RMSNormLaunch is the launch of RMSNorm and AddRMSNorm for n vectors of d elements: a group per
// vector from RMSNormRowFrom elements, else four vectors per group, one per SIMD group. rmsnorm
// takes (dst, residual, x, w, n, d, eps, accumulate); rmsnorm_row those and (sum, bias,
// quarters, hasBias), quarters 0 but where x is a matmul's quarters (kernels/src/norm.kern).
func RMSNormLaunch(n, d int) Launch {
	if d >= RMSNormRowFrom {
		return launch("rmsnorm_row", n, 1)
	}
	return launch("rmsnorm", ceilDiv(n, 4), 1)
}

// RoPELaunch is the launch of RoPE for rows rows of heads heads of 2·halfDim elements: a thread per
// rotated pair.
func RoPELaunch(rows, heads, halfDim int) Launch {
	return launch("rope", rows, ceilDiv(heads*halfDim, rowBlock))
}

// KV is how a KV pool stores keys and values (compute.KVSpec.DType): the suffix of the names of
// the kernels that write and read them, whose KV and K, V parameters are of that dtype.
type KV string

const (
	KVF32 KV = "f32"
	KVF16 KV = "f16"
)

// QKRopeWriteLaunch is the launch of qk_rope_write_H_KV, a layer's per-head norms, RoPE and
// kv_write in one, for rows rows of heads query and kvHeads kv heads of hd elements turned by
// halfDim frequencies: a warp per head. ok is false where the kernel does not apply, and those
// heads keep the ops one by one: a head size without a variant (64, 128 and 256 have one), or a
// rotation of part of the head (halfDim other than hd/2: the kernel pairs element j with j + hd/2).
func QKRopeWriteLaunch(rows, heads, kvHeads, hd, halfDim int, kv KV) (l Launch, ok bool) {
	if (hd != 64 && hd != 128 && hd != 256) || 2*halfDim != hd {
		return Launch{}, false
	}
	return launch(fmt.Sprintf("qk_rope_write_%d_%s", hd, kv), ceilDiv(heads+kvHeads, 4), rows), true
}

// KVWriteLaunch is the launch of KVWrite for rows rows of st elements (kvHeads·headDim) each: a
// thread per element of k (and of v).
func KVWriteLaunch(rows, st int, kv KV) Launch {
	return launch("kv_write_"+string(kv), rows, ceilDiv(st, rowBlock))
}

// AttentionChunk and AttentionSplits are attention's split of a row's keys (ATTN_CHUNK and
// ATTN_SPLITS in common.h): chunks of AttentionChunk keys by position, grouped in order into at
// most AttentionSplits splits, each made by one group and merged in order.
const (
	AttentionChunk  = 64
	AttentionSplits = 16
)

// attentionGroups is about how many groups the split kernel is given: enough to fill a large GPU
// (132 SMs on an H200) when a few rows attend, with no idle groups when many do.
const attentionGroups = 1024

// AttentionLaunches is how Attention launches for rows rows of heads query heads of hd elements:
// Split, then Combine unless its Kernel is "" (attention_split with Blocks = 1 merges its splits
// itself). Split takes Blocks as its `blocks` argument; both take a scratch buffer of Scratch F32
// elements for the splits' partial results (never read for a row of one chunk).
// Split is attention_split_KV or attention_tile_H_KV, which take the same arguments (dst, part, q, K,
// V, bases, positions, sinks, hasSinks, rows, heads, group, hd, st, slots, scale, blocks, err)
// and give every row the same bits.
type AttentionLaunches struct {
	Split, Combine Launch
	Blocks         int
	Scratch        int
	// Tile is attention_mma's rows a tile, passed after Blocks; 0 for the kernels without it.
	Tile int
}

// AttentionTileFrom is the fewest rows for which Attention runs attention_tile_H: a tile of rows
// shares its loads of keys only when its rows share a session (a prompt's rows), which a launch
// of many rows is likely to hold and a round of a few decoding streams is not. The choice changes
// no bits.
const AttentionTileFrom = 64

// AttentionTileShares says whether attention_tile_H pays for rows rows whose bases come in runs
// runs of one value each (a prompt's rows are one run; a round of rows of as many sessions, or a
// sliding window whose base moves with each row, as many runs as rows): a tile holds 32/group
// rows (16/group past 128 elements a head) and makes a pass over the keys for each base among
// them, so it shares its loads only where a run is on average at least a tile long: 64 decode
// rows of 64 sessions through the tiles gave the 8B checkpoint 1,991 tok/s, where attention_split
// had given 2,556 in another call that day (docs/performance.md). The choice changes no bits.
func AttentionTileShares(rows, runs, group, hd int) bool {
	if group <= 0 || runs <= 0 {
		return false
	}
	return rows >= AttentionTileFrom && rows >= runs*max(attentionTileVectors(hd)/group, 1)
}

// attentionTileVectors is the query vectors of a tile of attention_tile_H (4096/H): H = 128 for
// heads of at most 128 elements, 256 for longer.
func attentionTileVectors(hd int) int {
	if hd <= 128 {
		return 32
	}
	return 16
}

// AttentionLaunch says how Attention launches for rows rows of heads query heads of hd
// elements, group query heads to a kv head: from AttentionTileFrom rows, attention_tile_H where
// AttentionTileLaunch allows it; else attention_split, as AttentionSplitLaunch says. Both make
// each row's splits with the same arithmetic, so a row's bits do not depend on the choice.
func AttentionLaunch(rows, heads, group, hd int, kv KV) AttentionLaunches {
	if rows >= AttentionTileFrom {
		if l, ok := AttentionTileLaunch(rows, heads, group, hd, kv); ok {
			return l
		}
	}
	return AttentionSplitLaunch(rows, heads, hd, kv)
}

// AttentionTileLaunch is the launch of attention_tile_H (and attention_combine) for any number of
// rows: a group per (tile of 32/group rows, or 16/group for heads over 128 elements; kv head;
// split), Blocks = AttentionSplits. It is false where a tile would hold no row (group over 32, or
// 16) or heads is not a multiple of group.
func AttentionTileLaunch(rows, heads, group, hd int, kv KV) (AttentionLaunches, bool) {
	qt := attentionTileVectors(hd)
	if group <= 0 || group > qt || heads%group != 0 {
		return AttentionLaunches{}, false
	}
	name := "attention_tile_128_" + string(kv)
	if hd > 128 {
		name = "attention_tile_256_" + string(kv)
	}
	return AttentionLaunches{
		Split:   launch(name, heads/group*AttentionSplits, ceilDiv(rows, qt/group)),
		Combine: launch("attention_combine", heads, rows),
		Blocks:  AttentionSplits,
		Scratch: attentionScratch(rows, heads, hd),
	}, true
}

// AttentionSplitLaunch is the launch of attention_split (and attention_combine) whatever the
// rows: Split has Blocks groups per (row, head), each making the splits Blocks apart, as many as
// fill the GPU for few rows and one for many (the bits of a split do not depend on which group
// makes it); Combine has a group per (head, row), and is none where Blocks is 1: a group then makes
// all its row's splits and merges them itself, with the same bits.
func AttentionSplitLaunch(rows, heads, hd int, kv KV) AttentionLaunches {
	blocks := 1
	if rows > 0 && heads > 0 {
		blocks = min(max(attentionGroups/(rows*heads), 1), AttentionSplits)
	}
	l := AttentionLaunches{
		Split:   launch("attention_split_"+string(kv), heads*blocks, rows),
		Combine: launch("attention_combine", heads, rows),
		Blocks:  blocks,
		Scratch: attentionScratch(rows, heads, hd),
	}
	if blocks == 1 {
		l.Combine = Launch{} // each block merges its own row's splits
	}
	return l
}

// attentionWarps is about how many SIMD groups attention_warp is given where few rows attend:
// one group a row and head from 2,048 row-heads, a wave of four groups an SM on a 132-SM GPU. On
// the H200 32 rows of 32 heads ran 4% faster on two groups a (row, head) and a combine than on
// one merging its splits; 64 rows the same on one.
const attentionWarps = 2 * attentionGroups

// AttentionWarpLaunch is the launch of attention_warp (and attention_combine): a SIMD group per
// (row, head, g), blocks of four heads; Blocks groups per (row, head) as AttentionSplitLaunch
// counts them, and no Combine where Blocks is 1 (each SIMD group merges its head's splits). It
// gives every row attention_split's bits. The CUDA backend takes it for every round the tiles do
// not make: on the H200 with the 8B's 32 heads, decoding rounds of 8 and 16 rows ran 6% and 11%
// faster with it than with attention_split and one row level (the twenty-fifth session), 32 and
// 64 rows 8% and 14% (the thirteenth; docs/performance.md).
func AttentionWarpLaunch(rows, heads, hd int, kv KV) AttentionLaunches {
	blocks := 1
	if rows > 0 && heads > 0 {
		blocks = min(max(attentionWarps/(rows*heads), 1), AttentionSplits)
	}
	l := AttentionLaunches{
		Split:   launch("attention_warp_"+string(kv), ceilDiv(heads, 4)*blocks, rows),
		Combine: launch("attention_combine", heads, rows),
		Blocks:  blocks,
		Scratch: attentionScratch(rows, heads, hd),
	}
	if blocks == 1 {
		l.Combine = Launch{}
	}
	return l
}

// AttentionMMA says whether attention_mma takes a model's attention: heads of a multiple of 16
// elements up to 128, at most 32 query heads a kv head. The kernel's arithmetic is its own (the
// matrix unit's sums, not attention_split's), so a backend that takes it must take it for every
// row of the model, whatever the rows of a launch.
func AttentionMMA(group, hd int) bool {
	return hd > 0 && hd%16 == 0 && hd <= 128 && group >= 1 && group <= 32
}

// AttentionMMALaunch is the launch of attention_mma (and attention_combine) for rows rows whose
// bases come in runs runs (as AttentionTileShares counts them), for a shape AttentionMMA allows.
// Where runs are at least a tile long (a prompt's rows), a tile is 32/group rows, whose 32 query
// vectors share each stage of keys, and a group per (tile, kv head, split); elsewhere (a round of
// decoding rows of as many sessions) a tile is one row, with as many groups per (row, kv head) as
// fill a large GPU. Neither choice changes a row's bits.
func AttentionMMALaunch(rows, runs, heads, group, hd int, kv KV) AttentionLaunches {
	tile, blocks := 1, AttentionSplits
	if AttentionTileShares(rows, runs, group, hd) {
		tile = max(32/max(group, 1), 1)
	} else if rows > 0 && heads > 0 {
		blocks = min(max(attentionGroups*group/(rows*heads), 1), AttentionSplits)
	}
	return AttentionLaunches{
		Split:   launch("attention_mma_"+string(kv), heads/max(group, 1)*blocks, ceilDiv(rows, tile)),
		Combine: launch("attention_combine", heads, rows),
		Blocks:  blocks,
		Scratch: attentionScratch(rows, heads, hd),
		Tile:    tile,
	}
}

func attentionScratch(rows, heads, hd int) int {
	return max(rows, 0) * max(heads, 0) * AttentionSplits * (hd + 2)
}

// SiLUMulLaunch is the launch of SiLUMul over n elements: a thread per element.
func SiLUMulLaunch(n int) Launch { return launch("silu_mul", ceilDiv(n, 256), 1) }

// GELUTanhMulLaunch is the launch of GELUTanhMul over n elements: a thread per element.
func GELUTanhMulLaunch(n int) Launch { return launch("gelu_tanh_mul", ceilDiv(n, 256), 1) }

// ClampedSwiGLULaunch is the launch of ClampedSwiGLU over n elements: a thread per element.
func ClampedSwiGLULaunch(n int) Launch { return launch("clamped_swiglu", ceilDiv(n, 256), 1) }

// AddLaunch is the launch of Add over n elements: a thread per element.
func AddLaunch(n int) Launch { return launch("add", ceilDiv(n, 256), 1) }

// RouteLaunch is the launch of RouteTopK for rows rows: four per group, one per SIMD group.
func RouteLaunch(rows int) Launch { return launch("route", ceilDiv(rows, 4), 1) }

// GroupExpertsLaunch is the launch of GroupByExpert: a group per expert.
func GroupExpertsLaunch(experts int) Launch { return launch("group_experts", experts, 1) }

// ExpertMatMulLaunch is the launch of ExpertMatMul for pairs pairs among experts experts, out
// output columns, weights of dtype suffix w: four columns per group (one per SIMD group), a row of
// groups per expert, each walking its expert's pairs in row groups of the smallest R that holds as
// many pairs as an expert has on average, or 16. R changes no bits.
func ExpertMatMulLaunch(w string, pairs, experts, out int) Launch {
	per := ceilDiv(pairs, max(experts, 1))
	r := MatMulRows[len(MatMulRows)-1]
	for _, n := range MatMulRows {
		if n >= per {
			r = n
			break
		}
	}
	return launch(fmt.Sprintf("expert_matmul_%s_%d", w, r), ceilDiv(out, 4), experts)
}

// CombineExpertsLaunch is the launch of CombineExperts over n elements of dst: a thread per element.
func CombineExpertsLaunch(n int) Launch { return launch("combine_experts", ceilDiv(n, 256), 1) }

// SigmoidMulLaunch is the launch of SigmoidMul over n elements: a thread per element.
func SigmoidMulLaunch(n int) Launch { return launch("sigmoid_mul", ceilDiv(n, 256), 1) }

// AddSigmoidScaledLaunch is the launch of AddSigmoidScaled over n elements of dst: a thread per
// element.
func AddSigmoidScaledLaunch(n int) Launch { return launch("add_sigmoid_scaled", ceilDiv(n, 256), 1) }

// CausalConvSiLULaunch is the launch of CausalConvSiLU over channels channels: a thread per
// channel, through every step.
func CausalConvSiLULaunch(channels int) Launch {
	return launch("causal_conv_silu", ceilDiv(channels, 256), 1)
}

// DeltaKeyDimMost is the longest key head GatedDeltaRule takes: its normalised queries and keys
// are kept in threadgroup memory of that many floats each.
const DeltaKeyDimMost = 256

// GatedDeltaRuleLaunch is the launch of GatedDeltaRule for vHeads value heads of vDim: a SIMD
// group per value head and 32 of its columns. It panics for a key head longer than
// DeltaKeyDimMost.
func GatedDeltaRuleLaunch(vHeads, kDim, vDim int) Launch {
	if kDim > DeltaKeyDimMost {
		panic(fmt.Sprintf("kernels: gated_delta_rule: key heads of %d, at most %d", kDim, DeltaKeyDimMost))
	}
	return launch("gated_delta_rule", vHeads, ceilDiv(vDim, 32))
}

// ArgmaxNextLaunch is the launch of ArgmaxNext: one group.
func ArgmaxNextLaunch() Launch { return launch("argmax_next", 1, 1) }

// ArgmaxRowsLaunch is the launch of ArgmaxRows for rows rows: a group a row.
func ArgmaxRowsLaunch(rows int) Launch { return launch("argmax_rows", rows, 1) }

// VerifyDraftsLaunch is the launch of VerifyDrafts: one group, the rows in order.
func VerifyDraftsLaunch() Launch { return launch("verify_drafts", 1, 1) }

// DraftNextLaunch is the launch of DraftNext: one group.
func DraftNextLaunch() Launch { return launch("draft_next", 1, 1) }

func launch(name string, gx, gy int) Launch {
	k, ok := Lookup(name)
	if !ok {
		panic("kernels: no kernel " + name) // the package's tests rule it out
	}
	return Launch{Kernel: name, Groups: [2]int{max(gx, 0), max(gy, 0)}, Threads: k.Threads}
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }
