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
}

// MatMulRows are the row-group sizes of the matmul kernels: matmul_W_R makes R rows per weight load.
var MatMulRows = [...]int{1, 2, 4, 8, 16}

// MatMulLaunch is the launch of MatMul for rows rows of out output columns, with weights of dtype
// suffix w ("bf16", "f16" or "f32"): four columns per group (one per SIMD group), and the
// smallest row group that holds rows, or 16 (grid y then takes groups of 16 rows).
func MatMulLaunch(w string, rows, out int) Launch {
	r := MatMulRows[len(MatMulRows)-1]
	for _, n := range MatMulRows {
		if n >= rows {
			r = n
			break
		}
	}
	return launch(fmt.Sprintf("matmul_%s_%d", w, r), ceilDiv(out, 4), ceilDiv(rows, r))
}

// EmbedLaunch is the launch of Embed for rows tokens from a table of dtype suffix w: a group per row.
func EmbedLaunch(w string, rows int) Launch { return launch("embed_"+w, rows, 1) }

// GatherLaunch is the launch of Gather for rows rows: a group per row.
func GatherLaunch(rows int) Launch { return launch("gather", rows, 1) }

// RMSNormLaunch is the launch of RMSNorm and AddRMSNorm for n vectors: four per group, one per
// SIMD group.
func RMSNormLaunch(n int) Launch { return launch("rmsnorm", ceilDiv(n, 4), 1) }

// RoPELaunch is the launch of RoPE for rows rows: a group per row.
func RoPELaunch(rows int) Launch { return launch("rope", rows, 1) }

// KVWriteLaunch is the launch of KVWrite for rows rows: a group per row.
func KVWriteLaunch(rows int) Launch { return launch("kv_write", rows, 1) }

// AttentionLaunch is the launch of Attention for rows rows of heads query heads: a group per
// (head, row), heads along x.
func AttentionLaunch(rows, heads int) Launch { return launch("attention", heads, rows) }

// SiLUMulLaunch is the launch of SiLUMul over n elements: a thread per element.
func SiLUMulLaunch(n int) Launch { return launch("silu_mul", ceilDiv(n, 256), 1) }

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

// ArgmaxNextLaunch is the launch of ArgmaxNext: one group.
func ArgmaxNextLaunch() Launch { return launch("argmax_next", 1, 1) }

func launch(name string, gx, gy int) Launch {
	k, ok := Lookup(name)
	if !ok {
		panic("kernels: no kernel " + name) // the package's tests rule it out
	}
	return Launch{Kernel: name, Groups: [2]int{max(gx, 0), max(gy, 0)}, Threads: k.Threads}
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }
