package kernels_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"tfd/compute"
	"tfd/compute/computetest"
	"tfd/kernels"
	"tfd/quant"
)

// The mixture-of-experts kernels on the MSL runner against the cpu backend (TestMSLRuns calls
// them): routes and groups exactly, expert matrices at matmul's tolerance and bit for bit equal
// to the SIMD-lane matmul kernel (matmul_W_R) on the same rows, the weighted sums bit for bit.

// route runs route on random scores; ties puts equal scores in the first rows (the lower expert
// goes first) and nan a NaN in the last row (it ranks lowest; the weights are NaN).
func (o *op) route(rows, experts, k int, normalize bool, ties, nan bool) {
	scores := computetest.Randn(uint64(rows*experts+k), rows*experts)
	if ties {
		for e := range experts {
			scores[e] = 0.5 // row 0: every expert alike
		}
		if rows > 1 {
			scores[experts+3%experts], scores[experts+(experts-1)] = 9, 9 // row 1: two tied best
		}
	}
	if nan {
		scores[(rows-1)*experts] = float32(math.NaN())
	}
	norm := 0
	if normalize {
		norm = 1
	}
	ids, w := o.upload(compute.I32, make([]byte, 4*rows*k), rows*k), o.upload(compute.F32, make([]byte, 4*rows*k), rows*k)
	o.cpu.RouteTopK(ids, w, o.upload(compute.F32, computetest.F32Bytes(scores), rows, experts), rows, experts, k, normalize)
	wantIDs := make([]int32, rows*k)
	if err := o.cpu.ReadInt32(ids, wantIDs); err != nil {
		o.t.Fatal(err)
	}
	wantW := o.read(w, rows*k)

	mi, mw := &mbuf{make([]byte, 4*rows*k)}, &mbuf{make([]byte, 4*rows*k)}
	o.launch(kernels.RouteLaunch(rows), mi, mw, &mbuf{computetest.F32Bytes(scores)}, int32(rows), int32(experts), int32(k), int32(norm))
	if got := ints(mi); !slices.Equal(got, wantIDs) {
		o.t.Fatalf("ids %v, cpu %v", got, wantIDs)
	}
	got := floats(mw)
	if nan {
		last := (rows - 1) * k
		for j := range k {
			if g, c := got[last+j], wantW[last+j]; g == g || c == c {
				o.t.Errorf("weight %d of the row with a NaN score: %v, cpu %v; want NaN", j, g, c)
			}
		}
		got, wantW = got[:last], wantW[:last]
	}
	// exp rounds its last bit differently here and on the cpu backend.
	computetest.Near(o.t, "weights", got, wantW, 2e-6, 1e-30)
}

// randomIDs returns n expert ids among experts, leaving expert 1 without a pair when there are
// more than two, and with an id outside the experts at pair bad when bad >= 0.
func randomIDs(seed uint64, n, experts, bad int) []int32 {
	rng := rand.New(rand.NewPCG(seed, 77))
	ids := make([]int32, n)
	for i := range ids {
		e := rng.IntN(experts)
		if e == 1 && experts > 2 {
			e = 2
		}
		ids[i] = int32(e)
	}
	if bad >= 0 {
		ids[bad] = int32(experts)
	}
	return ids
}

// garbage returns n I32 of a value no op writes, so that what an op leaves alone shows.
func garbage(n int) []int32 {
	g := make([]int32, n)
	for i := range g {
		g[i] = -7
	}
	return g
}

// cpuGroups runs GroupByExpert on the cpu backend and returns its groups and its Sync's report.
func (o *op) cpuGroups(ids []int32, experts int) ([]int32, error) {
	o.t.Helper()
	n := len(ids)
	groups := o.upload(compute.I32, computetest.I32Bytes(garbage(experts+1+n)), experts+1+n)
	o.cpu.GroupByExpert(groups, o.upload(compute.I32, computetest.I32Bytes(ids), n), n, experts)
	cpuErr := o.cpu.Sync()
	want := make([]int32, experts+1+n)
	if err := o.cpu.ReadInt32(groups, want); err != nil {
		o.t.Fatal(err)
	}
	return want, cpuErr
}

// groupExperts runs group_experts on n random ids (one of them bad when bad >= 0).
func (o *op) groupExperts(n, experts, bad int) {
	ids := randomIDs(uint64(n*experts), n, experts, bad)
	want, cpuErr := o.cpuGroups(ids, experts)

	mg, errWord := &mbuf{computetest.I32Bytes(garbage(experts + 1 + n))}, &mbuf{make([]byte, 16)}
	o.launch(kernels.GroupExpertsLaunch(experts), mg, &mbuf{computetest.I32Bytes(ids)}, int32(n), int32(experts), errWord)
	if got := ints(mg); !slices.Equal(got, want) {
		o.t.Fatalf("groups\n%v\ncpu\n%v", got, want)
	}
	o.checkError(errWord, cpuErr, bad >= 0, 5, bad, experts) // ERR_EXPERT
}

// expertMatMul runs expert_matmul on pairs pairs among experts (pair 0's id is no expert: its
// row stays as it was), share pairs to an x row, and compares it with the cpu backend within
// matmul's tolerance, and with the matmul kernel run on each expert's rows, bit for bit.
func (o *op) expertMatMul(dt compute.DType, in, out, pairs, experts, share int, withBias bool) {
	ids := randomIDs(uint64(pairs+in), pairs, experts, 0)
	groups, _ := o.cpuGroups(ids, experts)
	xrows := (pairs + share - 1) / share
	xs, ws := computetest.Randn(13, xrows*in), computetest.Randn(14, experts*out*in)
	wb := computetest.Encode(dt, ws)
	before := computetest.Randn(15, pairs*out) // what dst holds before
	dst := o.upload(compute.F32, computetest.F32Bytes(before), pairs, out)
	bs := make([]float32, experts*out)
	var bias compute.Tensor
	mb, hasBias := &mbuf{}, int32(0)
	if withBias {
		bs = computetest.Randn(19, experts*out)
		bias, mb, hasBias = o.upload(compute.F32, computetest.F32Bytes(bs), experts, out), &mbuf{computetest.F32Bytes(bs)}, 1
	}
	o.cpu.ExpertMatMul(dst, o.upload(compute.F32, computetest.F32Bytes(xs), xrows, in), o.upload(dt, wb, experts, out, in), bias,
		o.upload(compute.I32, computetest.I32Bytes(groups), len(groups)), pairs, share)
	want := o.read(dst, pairs*out)

	md := &mbuf{computetest.F32Bytes(before)}
	mx, mw, mg := &mbuf{computetest.F32Bytes(xs)}, &mbuf{wb}, &mbuf{computetest.I32Bytes(groups)}
	l := kernels.ExpertMatMulLaunch(weightSuffix(dt), pairs, experts, out)
	o.launch(l, md, mx, mw, mb, mg, int32(pairs), int32(share), int32(in), int32(out), int32(experts), hasBias)
	got := floats(md)
	computetest.SameBits(o.t, "the row of the pair in no run", got[:out], before[:out])
	for a := 1; a < pairs; a++ {
		e, r := int(ids[a]), a/share
		for c := range out {
			mag := math.Abs(float64(bs[e*out+c]))
			for i := range in {
				mag += math.Abs(float64(xs[r*in+i]) * float64(ws[(e*out+c)*in+i]))
			}
			if d := math.Abs(float64(got[a*out+c] - want[a*out+c])); !(d <= 1e-5*mag) {
				o.t.Fatalf("%s: dst[%d][%d] = %v, cpu %v: |Δ| %.3g > 1e-5·Σ|xw| (%.3g)", l.Kernel, a, c, got[a*out+c], want[a*out+c], d, mag)
			}
		}
	}
	// Each expert's pairs as rows of one matmul against its matrix: the same bits.
	order := groups[experts+1:]
	for e := range experts {
		run := order[groups[e]:groups[e+1]]
		if len(run) == 0 {
			continue
		}
		var rows []float32
		for _, a := range run {
			r := int(a) / share
			rows = append(rows, xs[r*in:(r+1)*in]...)
		}
		mm := &mbuf{make([]byte, 4*len(run)*out)}
		eb := &mbuf{}
		if withBias {
			eb = &mbuf{computetest.F32Bytes(bs[e*out : (e+1)*out])}
		}
		o.launch(kernels.MatMulLanesLaunch(weightSuffix(dt), len(run), out), mm, &mbuf{computetest.F32Bytes(rows)},
			&mbuf{wb[e*out*in*dt.Size() : (e+1)*out*in*dt.Size()]}, eb, int32(len(run)), int32(in), int32(out), hasBias)
		m := floats(mm)
		for i, a := range run {
			computetest.SameBits(o.t, fmt.Sprintf("pair %d of expert %d against matmul", a, e), got[int(a)*out:(int(a)+1)*out], m[i*out:(i+1)*out])
		}
	}
}

// combine runs combine_experts on rows rows of k pairs each, width wide.
func (o *op) combine(rows, width, k int) {
	xs, ws := computetest.Randn(16, rows*k*width), computetest.Randn(17, rows*k)
	tail := computetest.Randn(18, 300) // past rows·width: must stay as it is
	dst := o.upload(compute.F32, make([]byte, 4*rows*width), rows, width)
	o.cpu.CombineExperts(dst, o.upload(compute.F32, computetest.F32Bytes(xs), rows*k, width), o.upload(compute.F32, computetest.F32Bytes(ws), rows*k), rows, k)
	want := o.read(dst, rows*width)

	n := rows * width
	md := &mbuf{computetest.F32Bytes(append(make([]float32, n), tail...))}
	o.launch(kernels.CombineExpertsLaunch(n), md, &mbuf{computetest.F32Bytes(xs)}, &mbuf{computetest.F32Bytes(ws)}, int32(n), int32(width), int32(k))
	got := floats(md)
	computetest.SameBits(o.t, "dst", got[:n], want)
	computetest.SameBits(o.t, "past n", got[n:], tail)
}

// expertMatMulMXFP4 runs expert_matmul_mxfp4 on random MXFP4 weights (random codes, scales about
// 2⁰) against the cpu backend's ExpertMatMul of the same MXFP4 tensor, at matmul's tolerance, and
// against expert_matmul_f32 on the weights dequantized: the same bits, since MXFP4's weights are
// exact in F32.
func (o *op) expertMatMulMXFP4(in, out, pairs, experts, share int, withBias bool) {
	ids := randomIDs(uint64(pairs+in), pairs, experts, 0)
	groups, _ := o.cpuGroups(ids, experts)
	xrows := (pairs + share - 1) / share
	xs := computetest.Randn(13, xrows*in)
	rows := experts * out
	rng := rand.New(rand.NewPCG(uint64(in), uint64(out)))
	codes, scales := make([]byte, rows*quant.MXFP4RowCodes(in)), make([]byte, rows*quant.MXFP4RowScales(in))
	for i := range codes {
		codes[i] = byte(rng.Uint32())
	}
	for i := range scales {
		scales[i] = byte(123 + rng.IntN(6))
	}
	ws := make([]float32, rows*in)
	for r := range rows {
		quant.DequantizeMXFP4(ws[r*in:(r+1)*in], codes[r*quant.MXFP4RowCodes(in):], scales[r*quant.MXFP4RowScales(in):])
	}
	wb := append(append([]byte(nil), codes...), scales...)
	var bias compute.Tensor
	mb, hasBias := &mbuf{}, int32(0)
	if withBias {
		bs := computetest.Randn(19, experts*out)
		bias, mb, hasBias = o.upload(compute.F32, computetest.F32Bytes(bs), experts, out), &mbuf{computetest.F32Bytes(bs)}, 1
	}
	before := computetest.Randn(15, pairs*out)
	dst := o.upload(compute.F32, computetest.F32Bytes(before), pairs, out)
	o.cpu.ExpertMatMul(dst, o.upload(compute.F32, computetest.F32Bytes(xs), xrows, in), o.upload(compute.MXFP4, wb, experts, out, in), bias,
		o.upload(compute.I32, computetest.I32Bytes(groups), len(groups)), pairs, share)
	want := o.read(dst, pairs*out)

	mx, mg := &mbuf{computetest.F32Bytes(xs)}, &mbuf{computetest.I32Bytes(groups)}
	md := &mbuf{computetest.F32Bytes(before)}
	l := kernels.ExpertMatMulLaunch("mxfp4", pairs, experts, out)
	o.launch(l, md, mx, &mbuf{wb}, mb, mg, int32(pairs), int32(share), int32(in), int32(out), int32(experts), hasBias, uint64(len(codes)/4))
	got := floats(md)
	computetest.Near(o.t, l.Kernel, got, want, 1e-5, 8) // weights up to 6·2¹, x about 1
	mf := &mbuf{computetest.F32Bytes(before)}
	o.launch(kernels.ExpertMatMulLaunch("f32", pairs, experts, out), mf, mx, &mbuf{computetest.F32Bytes(ws)}, mb, mg,
		int32(pairs), int32(share), int32(in), int32(out), int32(experts), hasBias)
	computetest.SameBits(o.t, "against expert_matmul_f32 on the dequantized weights", got, floats(mf))
}
