package kernels

import "fmt"

// The copy engine's matmul, matmul_wgtP_bf16_N (src/mmawgt.kern): the warpgroup's tile with both
// operands brought into a ring of shared memory by TMA copies, on compute capability 9.0.

// WGTStages is the ring's stages for a tile of n rows: a stage holds 8 KiB of weights and n/8
// KiB of x, and at one group a multiprocessor (the group's 288 threads hold 224 registers each)
// the stages may take most of the H200's 227 KiB; the model (tools/bench/wgb.cu) ran its best
// tiles at 4 to 8 stages.
func WGTStages(n int) int {
	if n <= 64 {
		return 8
	}
	return 6
}

// WGTShared is the dynamic shared memory of a tile of n rows with its ring of stages: the stages,
// then a full and an empty barrier (8 bytes each) a stage (prelude_tma.cuh's layout).
func WGTShared(n, stages int) int { return stages*(8192+128*n) + 16*stages }

// WGTFromK is the shortest K that UsesWGT gives the copy engine's tile.
const WGTFromK = 4096

// UsesWGT says which matmul_wgtP_bf16_N the backend gives rows rows of kdim against matrices of
// outs outputs on a GPU of sms multiprocessors that has it (ok false: none), where it measured
// faster than matmul_wg4/1_bf16_64 on the H200 (BenchmarkTileSizes on an 8B layer's matrices, µs
// a launch against the warpgroup tile's best, the thirty-second session's call, P = 1 with its
// sum of quarters; docs/performance.md):
//
//   - From 65 rows, tiles of 128 rows, each group its four partials, where those groups make at
//     least half a group a multiprocessor: gate and up at 128 and 256 rows (105.8 against 133.4,
//     155.9 against 233.4), q, k and v at 256 (55.5 against 76.5).
//   - Otherwise a quarter a group on tiles of 128 rows where K is long enough (8,192 or more)
//     that a quarter's chunks fill its ring many times: down at 128 and 256 rows (54.1 against
//     69.2, 95.9 against 128.3).
//   - Otherwise tiles of 64 rows, each group its four partials, where those groups make at least
//     two thirds of a group a multiprocessor, so one wave nearly fills the GPU: o at 256 rows (128
//     groups: 40.8 against 53.2, where its quarters on tiles of 128 rows, 256 groups in two
//     waves, took 46.7) and q, k and v at 128 (96 groups: 42.5 against the quarters' 46.5).
//   - Otherwise, from 129 rows, a quarter a group on tiles of 128 rows; o at 128 rows stays on the
//     warpgroup's quarters (29.6 against 28.6 with the sum the engine folds away).
//   - At 48 to 64 rows, tiles of 64 rows: each group its four partials where the tiles make at
//     least half a group a multiprocessor (gate and up, 76.8 against 81.8), a quarter a group for
//     matrices of fewer than a third of a tile a multiprocessor (o and down, 20.9 against 21.9,
//     43.5 against 50.4); q, k and v between them stay (34.2 against the quarters' 30.3).
//
// and none where K is under 4,096 (WGTFromK): measured at the 8B's K (4,096 and 12,288), and
// slower at the bundled model's (384 and 1,024, where a quarter's chunks never fill the ring):
// its prefill of 256 rows 0.845 ms with the copy engine's tile against 0.737 without it, three
// interleaved rounds in one call (thirty-third session, docs/performance.md). K between 1,024
// and 4,096 is unmeasured and stays on the warpgroup's tile.
func UsesWGT(rows, kdim int, outs [3]int, sms int) (n, p int, ok bool) {
	tiles := ceilDiv(outs[0], 128) + ceilDiv(outs[1], 128) + ceilDiv(outs[2], 128)
	switch {
	case rows < WGFrom || kdim < WGTFromK:
		return 0, 0, false
	case rows <= 64 && 2*tiles >= sms:
		return 64, 4, true
	case rows <= 64:
		return 64, 1, 3*tiles < sms
	case 2*tiles*ceilDiv(rows, 128) >= sms:
		return 128, 4, true
	case kdim >= 8192:
		return 128, 1, true
	case 3*tiles*ceilDiv(rows, 64) >= 2*sms:
		return 64, 4, true
	}
	return 128, 1, rows > 128
}

// MatMulsWGTLaunch is the launch of matmul_wgtP_bf16_N for rows rows against matrices of outs
// outputs: matmul_wgP_bf16_64's arguments (x split by SplitWGLaunch), x and the weights as maps
// (WGTXMap, WGTWeightMap), then the ring's stages (WGTStages(n)), which set Shared. For P = 1, dst0 is a
// scratch of WGQuarterWords floats and sum adds its quarters (MatMulsWGQuartersLaunch's sum).
func MatMulsWGTLaunch(rows int, outs [3]int, n, p int) (matmul, sum Launch) {
	tiles := ceilDiv(outs[0], 128) + ceilDiv(outs[1], 128) + ceilDiv(outs[2], 128)
	groups := ceilDiv(rows, n) * 4 / p
	matmul = launch(fmt.Sprintf("matmul_wgt%d_bf16_%d", p, n), groups, tiles)
	matmul.Shared = WGTShared(n, WGTStages(n))
	if p == 1 {
		_, sum = MatMulsWGQuartersLaunch(rows, outs)
	}
	return matmul, sum
}

// WGTMap is the shape of a map argument of matmul_wgtP_bf16_N: Rows rows (bands of 16 weight
// rows, or slots of 8 rows of x) of Chunks · 256 32-bit words, copied in boxes of Box rows by
// 256 words; rows past Rows land as zeros.
type WGTMap struct {
	Rows, Chunks, Box int
}

// WGTXMap is the map of x for a tile of n rows: x split by mma_split_wg for rows rows of kdim
// (SplitXWords: its rows rounded up to 32), in slots of 8 rows.
func WGTXMap(rows, kdim, n int) WGTMap {
	return WGTMap{Rows: SplitXWords(rows, kdim) / kdim / 8, Chunks: kdim / MMAChunk, Box: n / 8}
}

// WGTWeightMap is the map of a packed matrix of out outputs by kdim (PackMMA's whole bands of 16).
func WGTWeightMap(out, kdim int) WGTMap {
	return WGTMap{Rows: ceilDiv(out, 16), Chunks: kdim / MMAChunk, Box: 8}
}
