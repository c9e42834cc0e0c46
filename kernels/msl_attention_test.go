package kernels_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"testing"

	"tfd/compute"
	"tfd/compute/computetest"
	"tfd/kernels"
	"tfd/quant"
)

// attentionCase is a pool of sessions to attend over: their first slots, their lengths, and the
// positions at which rows of every session (those the session holds) attend.
type attentionCase struct {
	slots     int
	sessions  []int32
	lengths   []int
	positions []int
}

// shortSessions fill a pool of 1,200 slots with sessions of 40, 300 and 129 keys: one split (40
// keys, position 39) and several of one chunk each.
var shortSessions = attentionCase{1200, []int32{0, 300, 700}, []int{40, 300, 129}, []int{0, 1, 39, 127, 128, 129, 299}}

// longSessions hold a session of 2,100 keys: past AttentionSplits chunks, so each split is
// several chunks (2,100 keys are 33 chunks, 11 splits of 3), the last chunk ragged.
var longSessions = attentionCase{2200, []int32{0, 2150}, []int{2100, 30}, []int{5, 64, 1023, 1024, 1500, 2099}}

// attention writes random keys and values for the sessions of c with kv_write_KV, checks where
// they landed (in kv's dtype, F16 as quant.F32ToF16 rounds), and attends over them from rows of
// every session at several positions, in a mixed order, with a sink per head when withSinks is
// set; the cpu backend gets the same rows through KVWrite and Attention on a pool of kv's dtype.
// With F16 keys and values the kernels' attention must also be, bit for bit, their attention over
// F32 keys and values holding the rounded ones.
func (o *op) attention(c attentionCase, hd, heads, kvHeads int, withSinks bool, kv kernels.KV) {
	spec := compute.KVSpec{Layers: 1, KVHeads: kvHeads, HeadDim: hd, Slots: c.slots, DType: kvDType(kv)}
	size := spec.Elem().Size()
	st := kvHeads * hd
	sessions, lengths := c.sessions, c.lengths
	var bases, positions []int32
	for s, n := range lengths {
		for p := range n {
			bases, positions = append(bases, sessions[s]), append(positions, int32(p))
		}
	}
	rows := len(bases)
	ks, vs := computetest.Randn(13, rows*st), computetest.Randn(14, rows*st)
	pool, err := o.cpu.NewKV(spec)
	if err != nil {
		o.t.Fatal(err)
	}
	o.cpu.KVWrite(pool, 0, o.upload(compute.F32, computetest.F32Bytes(ks), rows, st), o.upload(compute.F32, computetest.F32Bytes(vs), rows, st),
		o.upload(compute.I32, computetest.I32Bytes(bases), rows), o.upload(compute.I32, computetest.I32Bytes(positions), rows), rows)

	kd, vd, errWord := &mbuf{make([]byte, size*spec.Slots*st)}, &mbuf{make([]byte, size*spec.Slots*st)}, &mbuf{make([]byte, 16)}
	o.launch(kernels.KVWriteLaunch(rows, st, kv), kd, vd, &mbuf{computetest.F32Bytes(ks)}, &mbuf{computetest.F32Bytes(vs)}, &mbuf{computetest.I32Bytes(bases)}, &mbuf{computetest.I32Bytes(positions)},
		int32(spec.Slots), int32(st), errWord)
	o.checkError(errWord, o.cpu.Sync(), false, 0, 0, 0)
	wantK, wantV := make([]float32, spec.Slots*st), make([]float32, spec.Slots*st)
	for r := range rows {
		s := int(bases[r]+positions[r]) * st
		copy(wantK[s:s+st], ks[r*st:(r+1)*st])
		copy(wantV[s:s+st], vs[r*st:(r+1)*st])
	}
	sameBytes(o.t, "keys", kd.b, kvBytes(kv, wantK))
	sameBytes(o.t, "values", vd.b, kvBytes(kv, wantV))

	// Rows of every session at several positions, in a mixed order.
	bases, positions = nil, nil
	for _, p := range c.positions {
		for s := range sessions {
			if p < lengths[s] {
				bases, positions = append(bases, sessions[s]), append(positions, int32(p))
			}
		}
	}
	rows, qw := len(bases), heads*hd
	qs := computetest.Randn(20, rows*qw)
	scale := float32(1 / math.Sqrt(float64(hd)))
	dst := o.upload(compute.F32, make([]byte, 4*rows*qw), rows, qw)
	var sinks compute.Tensor
	var ms *mbuf
	if withSinks {
		ss := computetest.Randn(21, heads)
		for h := range ss {
			ss[h] *= 4 // some above a head's scores, some below
		}
		sinks, ms = o.upload(compute.F32, computetest.F32Bytes(ss), heads), &mbuf{computetest.F32Bytes(ss)}
	}
	o.cpu.Attention(dst, o.upload(compute.F32, computetest.F32Bytes(qs), rows, qw), pool, 0,
		o.upload(compute.I32, computetest.I32Bytes(bases), rows), o.upload(compute.I32, computetest.I32Bytes(positions), rows), sinks, rows, heads, scale)
	want := o.read(dst, rows*qw)

	md := &mbuf{make([]byte, 4*rows*qw)}
	o.attend(rows, heads, kvHeads, hd, spec.Slots, md, &mbuf{computetest.F32Bytes(qs)}, kd, vd, &mbuf{computetest.I32Bytes(bases)}, &mbuf{computetest.I32Bytes(positions)}, ms, scale, errWord, kv)
	// The output is a convex combination of values of magnitude about 1.
	computetest.Near(o.t, "attention", floats(md), want, 1e-5, 1)
	o.checkError(errWord, nil, false, 0, 0, 0)
	if kv == kernels.KVF16 {
		rounded := &mbuf{make([]byte, 4*rows*qw)}
		o.attend(rows, heads, kvHeads, hd, spec.Slots, rounded, &mbuf{computetest.F32Bytes(qs)}, widened(kd), widened(vd), &mbuf{computetest.I32Bytes(bases)}, &mbuf{computetest.I32Bytes(positions)}, ms, scale, errWord, kernels.KVF32)
		computetest.SameBits(o.t, "attention over F16 keys and values against F32 ones holding them", floats(md), floats(rounded))
	}
}

// kvDType is the compute dtype of a kv variant.
func kvDType(kv kernels.KV) compute.DType {
	if kv == kernels.KVF16 {
		return compute.F16
	}
	return compute.F32
}

// kvBytes returns v as a pool of kv's dtype holds it: F32 bits, or quant.F32ToF16's.
func kvBytes(kv kernels.KV, v []float32) []byte {
	if kv == kernels.KVF32 {
		return computetest.F32Bytes(v)
	}
	b := make([]byte, 2*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint16(b[2*i:], quant.F32ToF16(f))
	}
	return b
}

// widened returns a buffer of F16 values as F32 ones, exactly.
func widened(m *mbuf) *mbuf {
	v := make([]float32, len(m.b)/2)
	for i := range v {
		v[i] = quant.F16ToF32(binary.LittleEndian.Uint16(m.b[2*i:]))
	}
	return &mbuf{computetest.F32Bytes(v)}
}

// sameBytes reports the first byte of got that differs from want.
func sameBytes(t testing.TB, what string, got, want []byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d bytes, want %d", what, len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: byte %d is %#02x, want %#02x (% x around it, want % x)", what, i, got[i], want[i],
				got[i&^3:min(i&^3+4, len(got))], want[i&^3:min(i&^3+4, len(want))])
		}
	}
}

// attentionOutside writes and reads a slot past the pool: kv_write skips the row, attention gives
// it zeros, and each reports (row, slot), as the cpu backend reports at Sync.
func (o *op) attentionOutside() {
	spec := compute.KVSpec{Layers: 1, KVHeads: 1, HeadDim: 8, Slots: 4}
	kv, err := o.cpu.NewKV(spec)
	if err != nil {
		o.t.Fatal(err)
	}
	k := computetest.Randn(15, 2*8)
	bases, positions := []int32{0, 2}, []int32{1, 2} // row 1: slot 4 of 4
	o.cpu.KVWrite(kv, 0, o.upload(compute.F32, computetest.F32Bytes(k), 2, 8), o.upload(compute.F32, computetest.F32Bytes(k), 2, 8),
		o.upload(compute.I32, computetest.I32Bytes(bases), 2), o.upload(compute.I32, computetest.I32Bytes(positions), 2), 2)
	cpuErr := o.cpu.Sync()
	kd, vd, errWord := &mbuf{make([]byte, 4*4*8)}, &mbuf{make([]byte, 4*4*8)}, &mbuf{make([]byte, 16)}
	o.launch(kernels.KVWriteLaunch(2, 8, kernels.KVF32), kd, vd, &mbuf{computetest.F32Bytes(k)}, &mbuf{computetest.F32Bytes(k)}, &mbuf{computetest.I32Bytes(bases)}, &mbuf{computetest.I32Bytes(positions)},
		int32(4), int32(8), errWord)
	o.checkError(errWord, cpuErr, true, 3, 1, 4) // ERR_KVWRITE
	wantK := make([]float32, 4*8)
	copy(wantK[8:16], k[:8])
	computetest.SameBits(o.t, "keys", floats(kd), wantK)

	dst := o.upload(compute.F32, make([]byte, 4*2*8), 2, 8)
	q := computetest.Randn(16, 2*8)
	o.cpu.Attention(dst, o.upload(compute.F32, computetest.F32Bytes(q), 2, 8), kv, 0,
		o.upload(compute.I32, computetest.I32Bytes(bases), 2), o.upload(compute.I32, computetest.I32Bytes(positions), 2), nil, 2, 1, 0.5)
	cpuErr = o.cpu.Sync()
	want := o.read(dst, 2*8)
	md, errWord := &mbuf{make([]byte, 4*2*8)}, &mbuf{make([]byte, 16)}
	o.attend(2, 1, 1, 8, 4, md, &mbuf{computetest.F32Bytes(q)}, kd, vd, &mbuf{computetest.I32Bytes(bases)}, &mbuf{computetest.I32Bytes(positions)}, nil, 0.5, errWord, kernels.KVF32)
	computetest.Near(o.t, "attention", floats(md), want, 1e-5, 1)
	computetest.SameBits(o.t, "the row outside", floats(md)[8:], make([]float32, 8))
	o.checkError(errWord, cpuErr, true, 4, 1, 4) // ERR_ATTENTION
}

// attend launches attention as a backend does (kernels.AttentionLaunch): the split kernel, then
// the combine, with a scratch buffer of the size the launch asks for; sinks nil: none (an empty
// buffer is bound in their place, as a backend binds one).
func (o *op) attend(rows, heads, kvHeads, hd, slots int, dst, q, k, v, bases, positions, sinks *mbuf, scale float32, errWord *mbuf, kv kernels.KV) {
	o.t.Helper()
	o.attendWith(kernels.AttentionLaunch(rows, heads, heads/kvHeads, hd, kv), rows, heads, kvHeads, hd, slots, dst, q, k, v, bases, positions, sinks, scale, errWord)
}

// attendWith is attend with the given launches; it returns the scratch of partial results.
func (o *op) attendWith(l kernels.AttentionLaunches, rows, heads, kvHeads, hd, slots int, dst, q, k, v, bases, positions, sinks *mbuf, scale float32, errWord *mbuf) *mbuf {
	o.t.Helper()
	part := &mbuf{make([]byte, 4*l.Scratch)}
	hasSinks := int32(1)
	if sinks == nil {
		sinks, hasSinks = &mbuf{}, 0
	}
	args := []any{dst, part, q, k, v, bases, positions, sinks, hasSinks,
		int32(rows), int32(heads), int32(heads / kvHeads), int32(hd), int32(kvHeads * hd), int32(slots), scale, int32(l.Blocks)}
	if l.Tile > 0 {
		args = append(args, int32(l.Tile))
	}
	o.launch(l.Split, append(args, errWord)...)
	if l.Combine.Kernel != "" {
		o.launch(l.Combine, dst, part, bases, positions, sinks, hasSinks, int32(heads), int32(hd), int32(slots))
	}
	return part
}

// tileRows are the rows attentionTiles and attentionMerged attend from: positions 1015 … 1040
// of a session of 1,041 keys, with rows of another session and a row outside the pool among them
// (row 9, slot 1200+5000), over a pool of random keys and values of kv's dtype, with a sink per
// head when withSinks is set. run attends them with the given launches.
func (o *op) tileRows(hd, heads, kvHeads int, withSinks bool, kv kernels.KV) (rows int, run func(kernels.AttentionLaunches) (dst, part, errWord *mbuf)) {
	const slots = 1600
	st := kvHeads * hd
	var bases, positions []int32
	for p := int32(1015); p <= 1040; p++ {
		bases, positions = append(bases, 0), append(positions, p)
		if p == 1020 {
			bases, positions = append(bases, 1200, 1200, 1200, 1200), append(positions, 5, 70, 300, 5000) // 5000: outside
		}
	}
	rows = len(bases)
	k, v := &mbuf{kvBytes(kv, computetest.Randn(30, slots*st))}, &mbuf{kvBytes(kv, computetest.Randn(31, slots*st))}
	q := &mbuf{computetest.F32Bytes(computetest.Randn(32, rows*heads*hd))}
	var sinks *mbuf
	if withSinks {
		ss := computetest.Randn(33, heads)
		for h := range ss {
			ss[h] *= 4
		}
		sinks = &mbuf{computetest.F32Bytes(ss)}
	}
	scale := float32(1 / math.Sqrt(float64(hd)))
	b, p := &mbuf{computetest.I32Bytes(bases)}, &mbuf{computetest.I32Bytes(positions)}
	return rows, func(l kernels.AttentionLaunches) (dst, part, errWord *mbuf) {
		dst, errWord = &mbuf{make([]byte, 4*rows*heads*hd)}, &mbuf{make([]byte, 16)}
		part = o.attendWith(l, rows, heads, kvHeads, hd, slots, dst, q, k, v, b, p, sinks, scale, errWord)
		return dst, part, errWord
	}
}

// attentionTiles attends from tileRows once with attention_tile_H (kernels.AttentionTileLaunch)
// and once with attention_split (kernels.AttentionSplitLaunch), and checks that the outputs,
// every partial record and the error word are the same bits. The prompt's rows cross a chunk (at
// position 1024) and with it the change from one chunk a split to two (16, then 17 chunks: 9
// splits of 2), inside a tile; the tile holding the other session's rows makes a pass for each
// base.
func (o *op) attentionTiles(hd, heads, kvHeads int, withSinks bool, kv kernels.KV) {
	rows, run := o.tileRows(hd, heads, kvHeads, withSinks, kv)
	l, ok := kernels.AttentionTileLaunch(rows, heads, heads/kvHeads, hd, kv)
	if !ok {
		o.t.Fatalf("no attention_tile_H for %d heads (%d kv) of %d", heads, kvHeads, hd)
	}
	tiled, tiledPart, tiledErr := run(l)
	split, splitPart, splitErr := run(kernels.AttentionSplitLaunch(rows, heads, hd, kv))
	computetest.SameBits(o.t, l.Split.Kernel+" against attention_split", floats(tiled), floats(split))
	computetest.SameBits(o.t, l.Split.Kernel+"'s partial records", floats(tiledPart), floats(splitPart))
	o.checkError(tiledErr, errors.New("outside"), true, 4, 9, 6200) // ERR_ATTENTION, row 9, slot 1200+5000
	o.checkError(splitErr, errors.New("outside"), true, 4, 9, 6200)
}

// attentionMerged attends from tileRows with attention_split on one group a (row, head), which
// merges the row's splits itself (no attention_combine), and checks the outputs, the partial
// records and the error word against attention_split on several groups a (row, head) and
// attention_combine, bit for bit.
func (o *op) attentionMerged(hd, heads, kvHeads int, withSinks bool, kv kernels.KV) {
	rows, run := o.tileRows(hd, heads, kvHeads, withSinks, kv)
	apart := kernels.AttentionSplitLaunch(rows, heads, hd, kv)
	if apart.Blocks == 1 || apart.Combine.Kernel == "" {
		o.t.Fatalf("%d rows of %d heads: %d blocks, want several and a combine", rows, heads, apart.Blocks)
	}
	merged := apart
	merged.Blocks, merged.Split.Groups[0], merged.Combine = 1, heads, kernels.Launch{}
	got, gotPart, gotErr := run(merged)
	want, wantPart, wantErr := run(apart)
	computetest.SameBits(o.t, "attention_split merging its splits against attention_combine", floats(got), floats(want))
	computetest.SameBits(o.t, "the partial records, written either way", floats(gotPart), floats(wantPart))
	o.checkError(gotErr, errors.New("outside"), true, 4, 9, 6200) // ERR_ATTENTION, row 9, slot 1200+5000
	o.checkError(wantErr, errors.New("outside"), true, 4, 9, 6200)
}

// attentionWarp attends from tileRows with attention_warp, on one group a (row, four heads),
// which merges the row's splits itself, and on several with attention_combine, and checks the
// outputs, the partial records and the error word against attention_split, bit for bit.
func (o *op) attentionWarp(hd, heads, kvHeads int, withSinks bool, kv kernels.KV) {
	rows, run := o.tileRows(hd, heads, kvHeads, withSinks, kv)
	want, wantPart, wantErr := run(kernels.AttentionSplitLaunch(rows, heads, hd, kv))
	o.checkError(wantErr, errors.New("outside"), true, 4, 9, 6200) // ERR_ATTENTION, row 9, slot 1200+5000
	apart := kernels.AttentionWarpLaunch(rows, heads, hd, kv)
	merged := apart
	merged.Blocks, merged.Split.Groups[0], merged.Combine = 1, (heads+3)/4, kernels.Launch{}
	if apart.Blocks == 1 || apart.Combine.Kernel == "" {
		o.t.Fatalf("%d rows of %d heads: %d blocks, want several and a combine", rows, heads, apart.Blocks)
	}
	for _, l := range []kernels.AttentionLaunches{merged, apart} {
		got, gotPart, gotErr := run(l)
		what := fmt.Sprintf("attention_warp on %d blocks against attention_split", l.Blocks)
		computetest.SameBits(o.t, what, floats(got), floats(want))
		computetest.SameBits(o.t, what+": the partial records", floats(gotPart), floats(wantPart))
		o.checkError(gotErr, errors.New("outside"), true, 4, 9, 6200)
	}
}

// attentionMMA attends from tileRows with attention_mma a row a tile (as a round of decoding rows
// runs it) and in tiles of 32/group rows on every split's group (as a prompt's rows run), and
// checks that the outputs, the partial records and the error word are the same bits either way,
// and the outputs within attention's tolerance (1e-5) of attention_split's. The tiled launch is
// built here: tileRows' 30 rows are fewer than AttentionMMALaunch tiles (AttentionTileFrom).
func (o *op) attentionMMA(hd, heads, kvHeads int, withSinks bool, kv kernels.KV) {
	rows, run := o.tileRows(hd, heads, kvHeads, withSinks, kv)
	group := heads / kvHeads
	if !kernels.AttentionMMA(group, hd) {
		o.t.Fatalf("no attention_mma for %d heads (%d kv) of %d", heads, kvHeads, hd)
	}
	alone := kernels.AttentionMMALaunch(rows, rows, heads, group, hd, kv)
	if alone.Tile != 1 {
		o.t.Fatalf("%d rows of as many sessions: tiles of %d rows, want 1", rows, alone.Tile)
	}
	tiled := alone
	tiled.Tile, tiled.Blocks = 32/group, kernels.AttentionSplits
	tiled.Split.Groups = [2]int{kvHeads * kernels.AttentionSplits, (rows + tiled.Tile - 1) / tiled.Tile}
	want, _, wantErr := run(kernels.AttentionSplitLaunch(rows, heads, hd, kv))
	got, gotPart, gotErr := run(alone)
	computetest.Near(o.t, "attention_mma against attention_split", floats(got), floats(want), 1e-5, 1)
	o.checkError(gotErr, errors.New("outside"), true, 4, 9, 6200) // ERR_ATTENTION, row 9, slot 1200+5000
	o.checkError(wantErr, errors.New("outside"), true, 4, 9, 6200)
	tgot, tgotPart, tgotErr := run(tiled)
	computetest.SameBits(o.t, fmt.Sprintf("attention_mma in tiles of %d rows against a row a tile", tiled.Tile), floats(tgot), floats(got))
	computetest.SameBits(o.t, "attention_mma's partial records, either way", floats(tgotPart), floats(gotPart))
	o.checkError(tgotErr, errors.New("outside"), true, 4, 9, 6200)
}

// Data helpers.

// floats reads a buffer of F32.
func floats(m *mbuf) []float32 {
	v := make([]float32, len(m.b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(m.b[4*i:]))
	}
	return v
}

// ints reads a buffer of I32.
func ints(m *mbuf) []int32 {
	v := make([]int32, len(m.b)/4)
	for i := range v {
		v[i] = int32(binary.LittleEndian.Uint32(m.b[4*i:]))
	}
	return v
}

// pad returns v zero-extended to n elements.
func pad(v []float32, n int) []float32 {
	out := make([]float32, n)
	copy(out, v)
	return out
}

// kvWriteRounding writes values whose rounding to F16 is a case of its own (ties, the edges of
// the subnormals and of the largest binade, overflow, infinities, NaNs, −0) with kv_write_f16 and
// checks each stored half against quant.F32ToF16.
func (o *op) kvWriteRounding() {
	specials := []float32{0, float32(math.Copysign(0, -1)), 1, 65504, 65519.996, 65520, 70000, float32(math.Inf(1)),
		float32(math.NaN()), 1 + 1.0/2048, 1 + 3.0/2048, 0x1p-14, 0x1p-15, 0x1p-24, 0x1p-25, 0x1.8p-25,
		0x1.000002p-25, 0x1p-26, 1e-30, 0x1.ffcp-15, 0x1.ffep-15, 0x1.ffap-15, 3e-8, 1e-45}
	var ks []float32
	for _, f := range specials {
		ks = append(ks, f, -f)
	}
	st := len(ks)
	kd, vd, errWord := &mbuf{make([]byte, 2*st)}, &mbuf{make([]byte, 2*st)}, &mbuf{make([]byte, 16)}
	zero := []int32{0}
	o.launch(kernels.KVWriteLaunch(1, st, kernels.KVF16), kd, vd, &mbuf{computetest.F32Bytes(ks)}, &mbuf{computetest.F32Bytes(ks)},
		&mbuf{computetest.I32Bytes(zero)}, &mbuf{computetest.I32Bytes(zero)}, int32(1), int32(st), errWord)
	o.checkError(errWord, nil, false, 0, 0, 0)
	sameBytes(o.t, "keys", kd.b, kvBytes(kernels.KVF16, ks))
	sameBytes(o.t, "values", vd.b, kvBytes(kernels.KVF16, ks))
}
