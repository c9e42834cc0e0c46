package metal

import "strings"

// launched says whether the Metal backend ever dispatches kernel name, and so builds its
// pipeline at Open. It does not dispatch the kernels that only the CUDA backend's choices launch:
// the matrix unit's tiles on packed weights or on x split once (the warpgroup's and the copy
// engine's among them) and what feeds and sums them, and every attention kernel but
// attention_split and its combine (Metal attends with those for every row). Leaving their
// pipelines out keeps a device whose pipeline for one of them could not hold its threads
// (matmul_wgt's 288, with registers no Metal GPU has been asked about) from failing Open over a
// kernel it never runs, and spares Open their compiles; the library still compiles their source,
// so an MSL error in any kernel fails Open as before.
func launched(name string) bool {
	for _, p := range cudaOnly() {
		if strings.HasPrefix(name, p) {
			return false
		}
	}
	return true
}

// cudaOnly begins the names of the kernels launched() leaves out.
func cudaOnly() []string {
	return []string{
		"matmul_mma_packed_", "matmul_mma_xs_", "matmul_wg", "mma_split_", "mma_sum_quarters",
		"embed_packed_", "attention_tile_", "attention_warp_", "attention_mma_",
	}
}
