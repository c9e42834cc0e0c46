//go:build amd64 || arm64

package cuda

import (
	"fmt"
	"strconv"
	"strings"

	"tfd/compute"
	"tfd/kernels"
)

// The matmuls: which kernel and tile a shape gets (the tensor cores' tiles, the warpgroup's,
// the lanes'), what x needs before it (a split once, the SwiGLU product made in it), and the
// scratch buffers the tiles write quarters and splits to. Every choice keeps the bits.

// MatMul writes dst[r][o] = Σ_i x[r][i]·w[o][i] + bias[o] for r < rows; w is [out, in] of F32,
// F16 or BF16, or quantized (quant_linux.go); bias is nil or [out]. dst must not overlap x. Unless
// TFD_CUDA_MMA=0, BF16 weights whose rows are a multiple of 32 long run on the tensor cores
// (kernels.MatMulLaunch; stored in their packed order, kernels.MatMulsPackedLaunch), the others
// on the lanes of each warp; either way the kernel follows the weights alone, and its tiles and
// the weights' order change no bits (kernels/src/mma.kern, matmul.kern).
func (b *backend) MatMul(dst, x, w, bias compute.Tensor, rows int) {
	b.MatMuls([3]compute.Tensor{dst}, x, [3]compute.Tensor{w}, [3]compute.Tensor{bias}, rows)
}

// MatMuls runs MatMul for each present w[m] against one x: in one launch on the tensor cores when
// every matrix goes there, else one launch each. It implements compute.MultiMatMul.
func (b *backend) MatMuls(dst [3]compute.Tensor, x compute.Tensor, w, bias [3]compute.Tensor, rows int) {
	b.forwardRows = rows
	var wts [3]*tensor
	var outs [3]int
	in, mma, packed, rowMajor := -1, b.mma, true, true
	for m := range w {
		if w[m] == nil {
			continue
		}
		wts[m] = b.asTensor(w[m], "MatMul", "w")
		if wts[m].dtype.Quantized() {
			mma = false
			continue
		}
		if len(wts[m].shape) != 2 || weightIndex(wts[m].dtype) < 0 {
			panic(fmt.Sprintf("cuda: MatMul: w is %v %v, want [out, in] of F32, F16 or BF16", wts[m].dtype, wts[m].shape))
		}
		if in >= 0 && wts[m].shape[1] != in {
			panic(fmt.Sprintf("cuda: MatMuls: rows of %d and %d elements, want one length", in, wts[m].shape[1]))
		}
		outs[m], in = wts[m].shape[0], wts[m].shape[1]
		mma = mma && kernels.UsesMMA(weightSuffix[weightIndex(wts[m].dtype)], in)
		packed, rowMajor = packed && wts[m].packed, rowMajor && !wts[m].packed
	}
	var xp uint64
	var dps, wps, bps [3]uint64
	hasBias := uint64(0)
	if in >= 0 {
		xp = ptr(b.tensorOf(x, "MatMul", "x", compute.F32, rows*in))
	}
	for m, wt := range wts {
		if wt == nil || wt.dtype.Quantized() {
			continue
		}
		dps[m], wps[m] = ptr(b.tensorOf(dst[m], "MatMul", "dst", compute.F32, rows*outs[m])), ptr(wt)
		if bias[m] != nil {
			bps[m] = ptr(b.tensorOf(bias[m], "MatMul", "bias", compute.F32, outs[m]))
			hasBias |= 1 << m
		}
	}
	if mma && (packed || rowMajor) {
		if r, ok := b.mmaLaunch(packed, rows, in, outs, xp, 0, quarterSum{}); ok {
			b.launchMMA(r, dps, wps, bps, rows, in, outs, hasBias)
		}
		return
	}
	// One launch each, every matrix on the kernel MatMul gives it alone.
	for m, wt := range wts {
		switch {
		case wt == nil:
		case wt.dtype.Quantized():
			b.matmulQuant(dst[m], x, wt, bias[m], rows)
		case b.mma && kernels.UsesMMA(weightSuffix[weightIndex(wt.dtype)], in):
			if r, ok := b.mmaLaunch(wt.packed, rows, in, [3]int{outs[m]}, xp, 0, quarterSum{}); ok {
				b.launchMMA(r, [3]uint64{dps[m]}, [3]uint64{wps[m]}, [3]uint64{bps[m]}, rows, in, [3]int{outs[m]}, hasBias>>m&1)
			}
		default:
			b.launchAs(kernels.MatMulLanesLaunch(weightSuffix[weightIndex(wt.dtype)], rows, outs[m]),
				dps[m], xp, wps[m], bps[m], i32(rows), i32(in), i32(outs[m]), hasBias>>m&1)
		}
	}
}

// SiLUMulMatMul runs MatMul(dst, silu(gate)·up, w, bias, rows) where that matmul would split x
// for the warpgroup's tile: the split reads gate and up (mma_split_silu_wg), with the bits of
// SiLUMul then that split, so the product never goes through memory and silu_mul's launch goes;
// where gate and up are the outputs of the matmul just before, still in quarters, the split adds
// them too (and writes their sums to gate and up), so mma_sum_quarters's launch goes as well.
// Elsewhere it reports false. It implements compute.SiLUMulMatMuler.
func (b *backend) SiLUMulMatMul(dst, gate, up, w, bias compute.Tensor, rows int) bool {
	wt := b.asTensor(w, "SiLUMulMatMul", "w")
	if !b.fusedSiLU || !b.mma || !wt.packed || wt.dtype != compute.BF16 || len(wt.shape) != 2 {
		return false
	}
	outs, in := [3]int{wt.shape[0]}, wt.shape[1]
	if !kernels.UsesMMA(weightSuffix[weightIndex(wt.dtype)], in) || !b.wgSplits(rows, outs) {
		return false
	}
	b.forwardRows = rows
	gp := ptr(b.tensorOf(gate, "SiLUMulMatMul", "gate", compute.F32, rows*in))
	upp := ptr(b.tensorOf(up, "SiLUMulMatMul", "up", compute.F32, rows*in))
	dp := ptr(b.tensorOf(dst, "SiLUMulMatMul", "dst", compute.F32, rows*outs[0]))
	var bp, hasBias uint64
	if bias != nil {
		bp, hasBias = ptr(b.tensorOf(bias, "SiLUMulMatMul", "bias", compute.F32, outs[0])), 1
	}
	// gate and up may still be the quarters of the matmul just before (b.pendingSum): the split
	// adds them itself.
	q, _ := b.takeSum([3]uint64{gp, upp}, rows, [3]int{in, in})
	if r, ok := b.mmaLaunch(true, rows, in, outs, gp, upp, q); ok {
		b.launchMMA(r, [3]uint64{dp}, [3]uint64{ptr(wt)}, [3]uint64{bp}, rows, in, outs, hasBias)
	}
	return true
}

// mmaRun is a tensor-core matmul as mmaLaunch plans it: l on x at xa; where sum names a kernel,
// l writes quarters to the scratch at part and sum adds them into the outputs.
type mmaRun struct {
	l, sum   kernels.Launch
	xa, part uint64
	wgt      int // matmul_wgtP_bf16_N's N (its x and weights passed as maps), or 0
}

// mmaPlan is the tile of the tensor cores' matmul of rows rows against matrices of outs outputs,
// stored packed or row-major: S (kernels.WGRows for the warpgroup's tile), and for the warpgroup's
// tile whether its groups make a quarter of K each.
func (b *backend) mmaPlan(packed bool, rows int, outs [3]int) (s int, quarters bool) {
	s, quarters = b.mmaTile, b.wgQuarters == "1"
	if s == 0 {
		s = kernels.MMATile(rows, outs, b.sms)
		switch {
		case packed && b.wgmma && b.wgQuarters != "0" && kernels.UsesWGQuarters(rows, outs, b.sms):
			s, quarters = kernels.WGRows, true
		case packed && b.wgmma && kernels.UsesWG(rows, outs, b.sms):
			s = kernels.WGRows
		}
	}
	return s, quarters
}

// wgSplits says whether the tensor cores' matmul of rows rows against packed matrices of outs
// outputs is the warpgroup's tile, on x split once by mma_split_wg.
func (b *backend) wgSplits(rows int, outs [3]int) bool {
	s, _ := b.mmaPlan(true, rows, outs)
	return s == kernels.WGRows && b.wgmma
}

// mmaLaunch plans the tensor cores' matmul of rows rows of x (at xp, in elements each) against
// matrices stored packed or row-major, the same tiles and bits either way (mmaPlan), and
// launches what x needs first: for S = 2 on packed matrices, unless TFD_CUDA_XSPLIT=0, x split
// once into the B operand by mma_split_x (matmul_mma_xs_bf16_S then reads the split); for the
// warpgroup's tile (kernels.UsesWG, on sm_90a), x split once by mma_split_wg, and where its
// groups would be too few (kernels.UsesWGQuarters) a group a quarter of K and a sum of the
// quarters. Where up is not zero, x is a SwiGLU's gate and the matmul's x is silu(gate)·up,
// which only the warpgroup's split makes (mma_split_silu_wg; wgSplits says when). False, with
// the error kept for the next Sync, if the device has no room for a scratch. Where gate names a
// sum (gate.l not ""), x and up are still the quarters of a gate and up matmul, which the split
// adds (mma_split_silu_wg with quarters set), writing the sums where gate.dst says.
func (b *backend) mmaLaunch(packed bool, rows, in int, outs [3]int, xp, up uint64, gate quarterSum) (mmaRun, bool) {
	s, quarters := b.mmaPlan(packed, rows, outs)
	if up != 0 && !(packed && s == kernels.WGRows && b.wgmma) {
		panic("cuda: a SwiGLU product for a matmul that does not split x for the warpgroup's tile")
	}
	// split launches split (mma_split_x or mma_split_wg) of x into the scratch and plans the
	// matmul l that reads it.
	split := func(split, l kernels.Launch) (mmaRun, bool) {
		xs, ok := b.scratch(&b.xsplit, kernels.SplitXWords(rows, in), "MatMul: the scratch for its split of x")
		if !ok {
			return mmaRun{}, false
		}
		switch {
		case gate.l.Kernel != "":
			// The quarters: gate's four partials, then up's (mma_sum_quarters's part).
			ups := gate.part + 4*uint64(kernels.WGQuarterWords(rows, [3]int{in}))
			b.launchAs(kernels.SplitSiLUWGLaunch(rows, in), xs, gate.part, ups, i32(rows), i32(in),
				gate.dst[0], gate.dst[1], gate.bias[0], gate.bias[1], 1, gate.bits)
		case up != 0:
			b.launchAs(kernels.SplitSiLUWGLaunch(rows, in), xs, xp, up, i32(rows), i32(in), 0, 0, 0, 0, 0, 0)
		default:
			b.launchAs(split, xs, xp, i32(rows), i32(in))
		}
		return mmaRun{l: l, xa: xs}, true
	}
	// inQuarters plans l on the split, then sum of its quarters where sum names a kernel.
	inQuarters := func(l, sum kernels.Launch) (mmaRun, bool) {
		// The split first: it may read the quarters of the matmul before (gate), which a
		// larger scratch for this one's would free.
		r, ok := split(kernels.SplitWGLaunch(rows, in), l)
		if !ok || sum.Kernel == "" {
			return r, ok
		}
		r.sum = sum
		r.part, ok = b.scratch(&b.wgParts, kernels.WGQuarterWords(rows, outs), "MatMul: the scratch for its quarters")
		return r, ok
	}
	n, p, wgt := b.wgtPlan(rows, in, outs)
	switch {
	case packed && s == kernels.WGRows && b.wgmma && wgt:
		r, ok := inQuarters(kernels.MatMulsWGTLaunch(rows, outs, n, p))
		r.wgt = n
		return r, ok
	case packed && s == kernels.WGRows && b.wgmma && quarters:
		return inQuarters(kernels.MatMulsWGQuartersLaunch(rows, outs))
	case packed && s == kernels.WGRows && b.wgmma:
		return split(kernels.SplitWGLaunch(rows, in), kernels.MatMulsWGLaunch(rows, outs))
	case s == kernels.WGRows: // no wgmma here, or weights not packed: the largest tile instead
		if packed {
			return mmaRun{l: kernels.MatMulsPackedLaunchS(rows, outs, 4), xa: xp}, true
		}
		return mmaRun{l: kernels.MatMulsLaunchS(rows, outs, 4), xa: xp}, true
	case packed && s == 2 && b.splitX:
		return split(kernels.SplitXLaunch(rows, in), kernels.MatMulsSplitLaunch(rows, outs, s))
	case packed:
		return mmaRun{l: kernels.MatMulsPackedLaunchS(rows, outs, s), xa: xp}, true
	}
	return mmaRun{l: kernels.MatMulsLaunchS(rows, outs, s), xa: xp}, true
}

// launchMMA launches r for up to three matrices (a zero address: none) against rows rows of in
// elements.
func (b *backend) launchMMA(r mmaRun, dst, w, bias [3]uint64, rows, in int, outs [3]int, hasBias uint64) {
	d := dst
	if r.sum.Kernel != "" {
		d = [3]uint64{r.part}
	}
	if r.wgt > 0 {
		xa, wa, err := b.wgtMaps(r, w, rows, in, outs)
		if err != nil {
			if b.pending == nil {
				b.pending = err
			}
			return
		}
		b.launchAs(r.l, d[0], d[1], d[2], xa, wa[0], wa[1], wa[2], bias[0], bias[1], bias[2],
			i32(rows), i32(in), i32(outs[0]), i32(outs[1]), i32(outs[2]), hasBias, uint64(kernels.WGTStages(r.wgt)))
	} else {
		b.launchAs(r.l, d[0], d[1], d[2], r.xa, w[0], w[1], w[2], bias[0], bias[1], bias[2],
			i32(rows), i32(in), i32(outs[0]), i32(outs[1]), i32(outs[2]), hasBias)
	}
	if r.sum.Kernel == "" {
		return
	}
	s := quarterSum{l: r.sum, dst: dst, part: r.part, bias: bias, rows: rows, outs: outs}
	for m, n := range outs {
		if n > 0 {
			s.bits |= hasBias & (1 << m) // only existing matrices' bits: rmsnorm_row tests it whole
		}
	}
	if b.foldQuarters {
		// The next op may add the quarters itself: an AddRMSNorm of one matrix's output
		// (rmsnorm), a SiLUMulMatMul of a gate and up (SiLUMulMatMul), a QKRoPEWrite of a q, k
		// and v (QKRoPEWrite).
		b.pendingSum = s
		return
	}
	b.launchSum(s)
}

// quarterSum is mma_sum_quarters (l) of the quarters at part into up to three matrices' outputs
// dst (0: none) of outs outputs, rows rows, with bias[m] where bits has bit m.
type quarterSum struct {
	l          kernels.Launch
	dst, bias  [3]uint64
	part, bits uint64
	rows       int
	outs       [3]int
}

// launchSum launches s.
func (b *backend) launchSum(s quarterSum) {
	b.launchAs(s.l, s.dst[0], s.dst[1], s.dst[2], s.part, s.bias[0], s.bias[1], s.bias[2],
		i32(s.rows), i32(s.outs[0]), i32(s.outs[1]), i32(s.outs[2]), s.bits)
}

// takeSum returns the sum of quarters left pending if it is that of dst and nothing else, rows
// rows of outs outputs, and forgets it: the caller's kernel adds the quarters instead.
func (b *backend) takeSum(dst [3]uint64, rows int, outs [3]int) (quarterSum, bool) {
	p := b.pendingSum
	if p.l.Kernel == "" || p.dst != dst || p.rows != rows || p.outs != outs {
		return quarterSum{}, false
	}
	b.pendingSum.l = kernels.Launch{}
	return p, true
}

// scratch returns the address of *t, a scratch buffer of F32-sized elements grown to at least n
// of them; false, with the error (naming what it is for) kept for the next Sync, if the device has
// no room for it. The old buffer is freed once the work recorded so far is done with it.
func (b *backend) scratch(t **tensor, n int, what string) (uint64, bool) {
	if *t != nil && (*t).n >= n {
		return ptr(*t), true
	}
	nt, err := b.Alloc(compute.F32, max(n, 1))
	if err != nil {
		if b.pending == nil {
			b.pending = fmt.Errorf("cuda: %s: %w", what, err)
		}
		return 0, false
	}
	if *t != nil {
		b.free(*t)
	}
	*t = nt.(*tensor)
	return ptr(*t), true
}

// wgtSetting is TFD_CUDA_WGT as Open read it: off, or the variant N:P forced wherever the
// warpgroup's tile runs (n and p; 0: kernels.UsesWGT's choice).
type wgtSetting struct {
	off  bool
	n, p int
}

// parseWGT reads a value of TFD_CUDA_WGT: "" (kernels.UsesWGT's choice), "0" (off), or one of
// the kernel's variants as N:P.
func parseWGT(s string) (wgtSetting, error) {
	switch s {
	case "":
		return wgtSetting{}, nil
	case "0":
		return wgtSetting{off: true}, nil
	case "128:4", "128:1", "64:4", "64:1":
		ns, ps, _ := strings.Cut(s, ":")
		n, _ := strconv.Atoi(ns)
		p, _ := strconv.Atoi(ps)
		return wgtSetting{n: n, p: p}, nil
	}
	return wgtSetting{}, fmt.Errorf("cuda: TFD_CUDA_WGT=%q: want 0, or N:P of 128:4, 128:1, 64:4, 64:1", s)
}

// wgtPlan says whether rows rows against packed matrices of outs outputs run the copy engine's
// tile where the warpgroup's would, and which: kernels.UsesWGT's, or TFD_CUDA_WGT's N:P.
func (b *backend) wgtPlan(rows, in int, outs [3]int) (n, p int, ok bool) {
	switch {
	case b.wgt.off:
		return 0, 0, false
	case b.wgt.n == 0:
		return kernels.UsesWGT(rows, in, outs, b.sms)
	}
	return b.wgt.n, b.wgt.p, true
}

// wgtMaps are the maps of r's x and of the matrices at w (an absent one: the first's, which the
// kernel never reads for it).
func (b *backend) wgtMaps(r mmaRun, w [3]uint64, rows, in int, outs [3]int) (xa uint64, wa [3]uint64, err error) {
	if xa, err = b.tensorMap(r.xa, kernels.WGTXMap(rows, in, r.wgt)); err != nil {
		return 0, wa, err
	}
	for m := range w {
		if w[m] == 0 {
			wa[m] = wa[0]
			continue
		}
		if wa[m], err = b.tensorMap(w[m], kernels.WGTWeightMap(outs[m], in)); err != nil {
			return 0, wa, err
		}
	}
	return xa, wa, nil
}
