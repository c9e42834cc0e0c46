//go:build darwin && arm64

package metal

import (
	"fmt"
	"math"

	"tfd/compute"
	"tfd/kernels"
	"tfd/quant"
)

// The mixture-of-experts ops (kernels/src/experts.kern), encoded as tfd/kernels' launch table
// says. Grouping pairs by expert runs on the GPU: nothing waits for the host between the router
// and the experts.

// RouteTopK writes each row's k best experts and their weights; one SIMD group per row.
func (b *backend) RouteTopK(ids, weights, logits compute.Tensor, rows, experts, k int, normalize bool) {
	if k <= 0 || k > experts {
		panic(fmt.Sprintf("metal: RouteTopK: %d experts a row out of %d", k, experts))
	}
	it := b.tensorOf(ids, "RouteTopK", "ids", compute.I32, rows*k)
	wt := b.tensorOf(weights, "RouteTopK", "weights", compute.F32, rows*k)
	lt := b.tensorOf(logits, "RouteTopK", "logits", compute.F32, rows*experts)
	norm := 0
	if normalize {
		norm = 1
	}
	b.dispatch(kernels.RouteLaunch(rows), bufArg(it), bufArg(wt), bufArg(lt), i32(rows), i32(experts), i32(k), i32(norm))
}

// GroupByExpert lists the n pairs of ids by expert; one threadgroup per expert. An id that is no
// expert is reported by the next Sync.
func (b *backend) GroupByExpert(groups, ids compute.Tensor, n, experts int) {
	gt := b.tensorOf(groups, "GroupByExpert", "groups", compute.I32, experts+1+n)
	it := b.tensorOf(ids, "GroupByExpert", "ids", compute.I32, n)
	b.dispatch(kernels.GroupExpertsLaunch(experts), bufArg(gt), bufArg(it), i32(n), i32(experts), b.errArg())
}

// ExpertMatMul runs each listed pair through its expert's matrix: a row of threadgroups per
// expert, each walking its run in row groups (whose size changes no bits). Quantized experts take
// two dispatches, as MatMul's (quant_darwin.go): the rows of x quantized, then quant's dot
// products of each pair, so a pair's bits are the cpu backend's.
func (b *backend) ExpertMatMul(dst, x, w, bias, groups compute.Tensor, n, share int) {
	wt := b.asTensor(w, "ExpertMatMul", "w")
	ws := weightSuffix(wt.dtype)
	if wt.dtype == compute.MXFP4 {
		ws = "mxfp4"
	}
	format, bits, group, quantized := kernels.QuantFormat(wt.dtype)
	if len(wt.shape) != 3 || ws == "" && !quantized {
		panic(fmt.Sprintf("metal: ExpertMatMul: w is %v %v, want [experts, out, in] of F32, F16, BF16, MXFP4 or a quantized format", wt.dtype, wt.shape))
	}
	if share <= 0 {
		panic(fmt.Sprintf("metal: ExpertMatMul: share %d, want 1 or more", share))
	}
	experts, out, in := wt.shape[0], wt.shape[1], wt.shape[2]
	dt := b.tensorOf(dst, "ExpertMatMul", "dst", compute.F32, n*out)
	xt := b.tensorOf(x, "ExpertMatMul", "x", compute.F32, (n+share-1)/share*in)
	gt := b.tensorOf(groups, "ExpertMatMul", "groups", compute.I32, experts+1+n)
	var bt arg
	hasBias := 0
	if bias != nil {
		bt, hasBias = bufArg(b.tensorOf(bias, "ExpertMatMul", "bias", compute.F32, experts*out)), 1
	}
	if quantized {
		// The rows of x quantized as MatMul quantizes its own, then quant's dot products.
		qx, dx, ok := b.quantizeActivations(xt, (n+share-1)/share*in/quant.BlockSize)
		if !ok {
			return
		}
		b.dispatch(kernels.ExpertQMatMulLaunch(format, n, experts, out), bufArg(dt), qx, dx, bufArg(wt), bt, bufArg(gt),
			i32(n), i32(share), i32(in), i32(out), i32(experts), i32(hasBias), i32(bits), i32(group))
		return
	}
	l := kernels.ExpertMatMulLaunch(ws, n, experts, out)
	if wt.dtype == compute.MXFP4 {
		// The codes of every row, then the scales from this word on (compute.MXFP4).
		scalesAt := arg{scalar: uint64(experts*out*quant.MXFP4RowCodes(in)) / 4}
		b.dispatch(l, bufArg(dt), bufArg(xt), bufArg(wt), bt, bufArg(gt), i32(n), i32(share), i32(in), i32(out), i32(experts), i32(hasBias), scalesAt)
		return
	}
	b.dispatch(l, bufArg(dt), bufArg(xt), bufArg(wt), bt, bufArg(gt), i32(n), i32(share), i32(in), i32(out), i32(experts), i32(hasBias))
}

// CombineExperts writes each row's weighted sum of its pairs' outputs, by rank; one thread per
// element of dst.
func (b *backend) CombineExperts(dst, x, weights compute.Tensor, rows, k int) {
	width := b.asTensor(dst, "CombineExperts", "dst").rowLen()
	n := rows * width
	if n > math.MaxInt32-256 {
		panic(fmt.Sprintf("metal: CombineExperts of %d elements: past the kernels' 32-bit index", n))
	}
	dt := b.tensorOf(dst, "CombineExperts", "dst", compute.F32, n)
	xt := b.tensorOf(x, "CombineExperts", "x", compute.F32, rows*k*width)
	wt := b.tensorOf(weights, "CombineExperts", "weights", compute.F32, rows*k)
	b.dispatch(kernels.CombineExpertsLaunch(n), bufArg(dt), bufArg(xt), bufArg(wt), i32(n), i32(width), i32(k))
}
