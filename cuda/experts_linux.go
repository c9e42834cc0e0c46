//go:build amd64 || arm64

package cuda

import (
	"fmt"
	"math"

	"tfd/compute"
	"tfd/kernels"
	"tfd/quant"
)

// The mixture-of-experts ops (kernels/src/experts.kern). Grouping pairs by expert runs on the
// device, so a forward of a sparse model still records without waiting, and graphs capture it
// whole: the expert matrices' kernels read each expert's run from the groups the grouping wrote,
// and a block of an expert without pairs returns at once.

// RouteTopK writes each row's k best experts and their weights; one warp per row.
func (b *backend) RouteTopK(ids, weights, logits compute.Tensor, rows, experts, k int, normalize bool) {
	if k <= 0 || k > experts {
		panic(fmt.Sprintf("cuda: RouteTopK: %d experts a row out of %d", k, experts))
	}
	it := b.tensorOf(ids, "RouteTopK", "ids", compute.I32, rows*k)
	wt := b.tensorOf(weights, "RouteTopK", "weights", compute.F32, rows*k)
	lt := b.tensorOf(logits, "RouteTopK", "logits", compute.F32, rows*experts)
	norm := 0
	if normalize {
		norm = 1
	}
	l := kernels.RouteLaunch(rows)
	b.launch(b.k.route, l.Groups[0], l.Groups[1], ptr(it), ptr(wt), ptr(lt), i32(rows), i32(experts), i32(k), i32(norm))
}

// GroupByExpert lists the n pairs of ids by expert; one block per expert. An id that is no expert
// is reported by the next Sync.
func (b *backend) GroupByExpert(groups, ids compute.Tensor, n, experts int) {
	gt := b.tensorOf(groups, "GroupByExpert", "groups", compute.I32, experts+1+n)
	it := b.tensorOf(ids, "GroupByExpert", "ids", compute.I32, n)
	l := kernels.GroupExpertsLaunch(experts)
	b.launch(b.k.groupExperts, l.Groups[0], l.Groups[1], ptr(gt), ptr(it), i32(n), i32(experts), uint64(b.errWord))
}

// ExpertMatMul runs each listed pair through its expert's matrix: a row of blocks per expert,
// each walking its run in row groups sized for an expert's average share of the pairs (the size
// changes no bits). A bias is added to each finished dot product. Quantized experts take two
// launches, as MatMul's (quant_linux.go): the rows of x quantized, then quant's dot products of
// each pair, so a pair's bits are the cpu backend's.
func (b *backend) ExpertMatMul(dst, x, w, bias, groups compute.Tensor, n, share int) {
	wt := b.asTensor(w, "ExpertMatMul", "w")
	wi := weightIndex(wt.dtype)
	format, bits, group, quantized := kernels.QuantFormat(wt.dtype)
	if len(wt.shape) != 3 || wi < 0 && wt.dtype != compute.MXFP4 && !quantized {
		panic(fmt.Sprintf("cuda: ExpertMatMul: w is %v %v, want [experts, out, in] of F32, F16, BF16, MXFP4 or a quantized format", wt.dtype, wt.shape))
	}
	if share <= 0 {
		panic(fmt.Sprintf("cuda: ExpertMatMul: share %d, want 1 or more", share))
	}
	experts, out, in := wt.shape[0], wt.shape[1], wt.shape[2]
	dt := b.tensorOf(dst, "ExpertMatMul", "dst", compute.F32, n*out)
	xt := b.tensorOf(x, "ExpertMatMul", "x", compute.F32, (n+share-1)/share*in)
	gt := b.tensorOf(groups, "ExpertMatMul", "groups", compute.I32, experts+1+n)
	var bp, hasBias uint64
	if bias != nil {
		bp, hasBias = ptr(b.tensorOf(bias, "ExpertMatMul", "bias", compute.F32, experts*out)), 1
	}
	if quantized {
		// The rows of x quantized as MatMul quantizes its own, then quant's dot products.
		qx, dx, ok := b.quantizeActivations(xt, (n+share-1)/share*in/quant.BlockSize)
		if !ok {
			return
		}
		b.launchAs(kernels.ExpertQMatMulLaunch(format, n, experts, out), ptr(dt), qx, dx, ptr(wt), bp, ptr(gt),
			i32(n), i32(share), i32(in), i32(out), i32(experts), hasBias, i32(bits), i32(group))
		return
	}
	if wt.dtype == compute.MXFP4 {
		// The codes of every row, then the scales from this word on (compute.MXFP4).
		scalesAt := uint64(experts*out*quant.MXFP4RowCodes(in)) / 4
		l := kernels.ExpertMatMulLaunch("mxfp4", n, experts, out)
		b.launch(b.k.expertMatMul[l.Kernel], l.Groups[0], l.Groups[1], ptr(dt), ptr(xt), ptr(wt), bp, ptr(gt),
			i32(n), i32(share), i32(in), i32(out), i32(experts), hasBias, scalesAt)
		return
	}
	l := kernels.ExpertMatMulLaunch(weightSuffix[wi], n, experts, out)
	b.launch(b.k.expertMatMul[l.Kernel], l.Groups[0], l.Groups[1], ptr(dt), ptr(xt), ptr(wt), bp, ptr(gt),
		i32(n), i32(share), i32(in), i32(out), i32(experts), hasBias)
}

// CombineExperts writes each row's weighted sum of its pairs' outputs, by rank; one thread per
// element of dst.
func (b *backend) CombineExperts(dst, x, weights compute.Tensor, rows, k int) {
	width := b.asTensor(dst, "CombineExperts", "dst").rowLen()
	n := rows * width
	if n > math.MaxInt32-256 {
		panic(fmt.Sprintf("cuda: CombineExperts of %d elements: past the kernels' 32-bit index", n))
	}
	dt := b.tensorOf(dst, "CombineExperts", "dst", compute.F32, n)
	xt := b.tensorOf(x, "CombineExperts", "x", compute.F32, rows*k*width)
	wt := b.tensorOf(weights, "CombineExperts", "weights", compute.F32, rows*k)
	l := kernels.CombineExpertsLaunch(n)
	b.launch(b.k.combineExperts, l.Groups[0], l.Groups[1], ptr(dt), ptr(xt), ptr(wt), i32(n), i32(width), i32(k))
}
