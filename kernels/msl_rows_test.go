package kernels_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"tfd/compute"
	"tfd/compute/computetest"
	"tfd/kernels"
)

// The row kernels of a greedy or drafted step on the device (rows.kern): argmax_next,
// argmax_rows, verify_drafts and draft_next, each against the cpu backend's ops.

// argmaxNext checks argmax_next, a greedy chain's step, against the cpu backend's pick.
func (o *op) argmaxNext(n, tieA, tieB int) {
	logits := computetest.Randn(12, n)
	if tieA >= 0 {
		logits[tieA], logits[tieB] = 10, 10 // ties go to the lower index
	}
	if tieA == -2 {
		for i := range logits {
			logits[i] = float32(math.Inf(-1))
		}
	}
	const step, pos0 = 3, 41
	l := o.upload(compute.F32, computetest.F32Bytes(logits), n)
	tok, pos := o.upload(compute.I32, make([]byte, 4), 1), o.upload(compute.I32, computetest.I32Bytes([]int32{pos0}), 1)
	chain := o.upload(compute.I32, make([]byte, 4*(step+1)), step+1)
	o.cpu.(compute.Chainer).ArgmaxNext(l, tok, pos, chain, n, step)
	want := make([]int32, step+1)
	if err := o.cpu.ReadInt32(chain, want); err != nil {
		o.t.Fatal(err)
	}

	mt, mp, mc := &mbuf{make([]byte, 4)}, &mbuf{computetest.I32Bytes([]int32{pos0})}, &mbuf{make([]byte, 4*(step+1))}
	o.launch(kernels.ArgmaxNextLaunch(), &mbuf{computetest.F32Bytes(logits)}, mt, mp, mc, int32(n), int32(step))
	if got := ints(mc); !slices.Equal(got, want) {
		o.t.Errorf("chain %v, want %v", got, want)
	}
	if tk, p := int32(binary.LittleEndian.Uint32(mt.b)), int32(binary.LittleEndian.Uint32(mp.b)); tk != want[step] || p != pos0+1 {
		o.t.Errorf("tokens[0] %d, positions[0] %d; want %v, %d", tk, p, want[step], pos0+1)
	}
}

// argmaxRows checks the picks of rows logits rows of n from row first (argmax_rows) against the
// cpu backend's: random rows, a tie in the first picked row (the lower index), and the last row
// all −∞ where there are several (index 0).
func (o *op) argmaxRows(first, rows, n int) {
	logits := computetest.Randn(14, (first+rows)*n)
	logits[first*n+n/3], logits[first*n+n-1] = 10, 10
	if rows > 1 {
		for i := (first + rows - 1) * n; i < (first+rows)*n; i++ {
			logits[i] = float32(math.Inf(-1))
		}
	}
	l := o.upload(compute.F32, computetest.F32Bytes(logits), len(logits))
	p := o.upload(compute.I32, make([]byte, 4*rows), rows)
	o.cpu.(compute.Picker).ArgmaxRows(l, p, first, rows, n)
	want := make([]int32, rows)
	if err := o.cpu.ReadInt32(p, want); err != nil {
		o.t.Fatal(err)
	}
	mp := &mbuf{make([]byte, 4*rows)}
	o.launch(kernels.ArgmaxRowsLaunch(rows), &mbuf{computetest.F32Bytes(logits)}, mp, int32(first), int32(n))
	if got := ints(mp); !slices.Equal(got, want) {
		o.t.Errorf("picks %v, want %v", got, want)
	}
	if want[0] != int32(n/3) {
		o.t.Errorf("the cpu backend's pick of the tied row is %d, want %d", want[0], n/3)
	}
}

// verifyDrafts checks a drafted forward's verification and the MTP head's chain after it
// (verify_drafts, then draft_next for each of rows-1 steps) against the cpu backend, every row
// tensor and the verdict bit for bit: rows rows of n logits whose first landed drafts equal the
// argmax of the row before them, the next one not.
func (o *op) verifyDrafts(rows, n, landed int) {
	logits := computetest.Randn(13, rows*n)
	logits[n+3], logits[n+n/2] = 50, 50 // a tie in row 1: the lower index
	tokens := make([]int32, rows)
	for r := range rows - 1 {
		best := 0
		row := logits[r*n : (r+1)*n]
		for i, v := range row {
			if v > row[best] {
				best = i
			}
		}
		tokens[1+r] = int32(best)
		if r >= landed {
			tokens[1+r] = int32((best + 1) % n)
		}
	}
	const pos0 = 17
	positions := make([]int32, rows)
	for r := range positions {
		positions[r] = int32(pos0 + r)
	}
	drafts := computetest.Randn(14, (rows-1)*n)
	l := o.upload(compute.F32, computetest.F32Bytes(logits), rows*n)
	tensors := make([]compute.Tensor, 5)
	bufs := make([]*mbuf, 5)
	for i, v := range [][]int32{tokens, positions, make([]int32, rows), make([]int32, rows), make([]int32, rows)} {
		tensors[i] = o.upload(compute.I32, computetest.I32Bytes(v), rows)
		bufs[i] = &mbuf{computetest.I32Bytes(v)}
	}
	vlen := compute.VerdictLen(rows)
	verdict, mv := o.upload(compute.I32, make([]byte, 4*vlen), vlen), &mbuf{make([]byte, 4*vlen)}
	dv := o.cpu.(compute.DraftVerifier)
	dv.VerifyDrafts(l, tensors[0], tensors[1], tensors[2], tensors[3], tensors[4], verdict, rows, n)
	o.launch(kernels.VerifyDraftsLaunch(), &mbuf{computetest.F32Bytes(logits)}, bufs[0], bufs[1], bufs[2], bufs[3], bufs[4], mv, int32(rows), int32(n))
	o.sameInts("after verify_drafts", tensors, verdict, bufs, mv, rows)
	if got := ints(mv)[0]; got != int32(landed) {
		o.t.Errorf("verify_drafts: %d drafts landed, want %d", got, landed)
	}
	for step := range rows - 1 {
		row := drafts[step*n : (step+1)*n]
		dl := o.upload(compute.F32, computetest.F32Bytes(row), n)
		dv.DraftNext(dl, tensors[0], tensors[1], tensors[2], tensors[3], tensors[4], verdict, rows, n, step)
		o.launch(kernels.DraftNextLaunch(), &mbuf{computetest.F32Bytes(row)}, bufs[0], bufs[1], bufs[2], bufs[3], bufs[4], mv, int32(rows), int32(n), int32(step))
		o.sameInts(fmt.Sprint("after draft_next ", step), tensors, verdict, bufs, mv, rows)
	}
	if got, want := ints(bufs[1])[0], int32(pos0+landed+1); got != want {
		o.t.Errorf("the next forward starts at position %d, want %d", got, want)
	}
}

// sameInts compares the cpu backend's row tensors and verdict with the runner's buffers.
func (o *op) sameInts(when string, tensors []compute.Tensor, verdict compute.Tensor, bufs []*mbuf, mv *mbuf, rows int) {
	o.t.Helper()
	names := []string{"tokens", "positions", "ropePositions", "sources", "wanted"}
	for i, x := range append(tensors, verdict) {
		m, name := mv, "verdict"
		if i < len(bufs) {
			m, name = bufs[i], names[i]
		}
		want := make([]int32, len(m.b)/4)
		if err := o.cpu.ReadInt32(x, want); err != nil {
			o.t.Fatal(err)
		}
		if got := ints(m); !slices.Equal(got, want) {
			o.t.Errorf("%s: %s %v, want %v", when, name, got, want)
		}
	}
}
