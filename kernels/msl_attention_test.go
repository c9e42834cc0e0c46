package kernels_test

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"tfd/compute"
	"tfd/kernels"
)

// attention writes random keys and values for three sessions with kv_write, checks where they
// landed, and attends over them from rows of every session at several positions, in a mixed order;
// the cpu backend gets the same rows through KVWrite and Attention.
func (o *op) attention(hd, heads, kvHeads int) {
	spec := compute.KVSpec{Layers: 1, KVHeads: kvHeads, HeadDim: hd, Slots: 1200}
	st := kvHeads * hd
	sessions, lengths := []int32{0, 300, 700}, []int{40, 300, 129}
	var bases, positions []int32
	for s, n := range lengths {
		for p := range n {
			bases, positions = append(bases, sessions[s]), append(positions, int32(p))
		}
	}
	rows := len(bases)
	ks, vs := randn(13, rows*st), randn(14, rows*st)
	kv, err := o.cpu.NewKV(spec)
	if err != nil {
		o.t.Fatal(err)
	}
	o.cpu.KVWrite(kv, 0, o.upload(compute.F32, f32Bytes(ks), rows, st), o.upload(compute.F32, f32Bytes(vs), rows, st),
		o.upload(compute.I32, i32Bytes(bases), rows), o.upload(compute.I32, i32Bytes(positions), rows), rows)

	kd, vd, errWord := &mbuf{make([]byte, 4*spec.Slots*st)}, &mbuf{make([]byte, 4*spec.Slots*st)}, &mbuf{make([]byte, 16)}
	o.launch(kernels.KVWriteLaunch(rows), kd, vd, &mbuf{f32Bytes(ks)}, &mbuf{f32Bytes(vs)}, &mbuf{i32Bytes(bases)}, &mbuf{i32Bytes(positions)},
		int32(spec.Slots), int32(st), errWord)
	o.checkError(errWord, o.cpu.Sync(), false, 0, 0, 0)
	wantK, wantV := make([]float32, spec.Slots*st), make([]float32, spec.Slots*st)
	for r := range rows {
		s := int(bases[r]+positions[r]) * st
		copy(wantK[s:s+st], ks[r*st:(r+1)*st])
		copy(wantV[s:s+st], vs[r*st:(r+1)*st])
	}
	sameBits(o.t, "keys", floats(kd), wantK)
	sameBits(o.t, "values", floats(vd), wantV)

	// Rows of every session at several positions, in a mixed order.
	bases, positions = nil, nil
	for _, p := range []int{0, 1, 39, 127, 128, 129, 299} {
		for s := range sessions {
			if p < lengths[s] {
				bases, positions = append(bases, sessions[s]), append(positions, int32(p))
			}
		}
	}
	rows, qw := len(bases), heads*hd
	qs := randn(20, rows*qw)
	scale := float32(1 / math.Sqrt(float64(hd)))
	dst := o.upload(compute.F32, make([]byte, 4*rows*qw), rows, qw)
	o.cpu.Attention(dst, o.upload(compute.F32, f32Bytes(qs), rows, qw), kv, 0,
		o.upload(compute.I32, i32Bytes(bases), rows), o.upload(compute.I32, i32Bytes(positions), rows), rows, heads, scale)
	want := o.read(dst, rows*qw)

	md := &mbuf{make([]byte, 4*rows*qw)}
	o.launch(kernels.AttentionLaunch(rows, heads), md, &mbuf{f32Bytes(qs)}, kd, vd, &mbuf{i32Bytes(bases)}, &mbuf{i32Bytes(positions)},
		int32(heads), int32(heads/kvHeads), int32(hd), int32(st), int32(spec.Slots), scale, errWord)
	// The output is a convex combination of values of magnitude about 1.
	near(o.t, "attention", floats(md), want, 1e-5, 1)
	o.checkError(errWord, nil, false, 0, 0, 0)
}

// attentionOutside writes and reads a slot past the pool: kv_write skips the row, attention gives
// it zeros, and each reports (row, slot), as the cpu backend reports at Sync.
func (o *op) attentionOutside() {
	spec := compute.KVSpec{Layers: 1, KVHeads: 1, HeadDim: 8, Slots: 4}
	kv, err := o.cpu.NewKV(spec)
	if err != nil {
		o.t.Fatal(err)
	}
	k := randn(15, 2*8)
	bases, positions := []int32{0, 2}, []int32{1, 2} // row 1: slot 4 of 4
	o.cpu.KVWrite(kv, 0, o.upload(compute.F32, f32Bytes(k), 2, 8), o.upload(compute.F32, f32Bytes(k), 2, 8),
		o.upload(compute.I32, i32Bytes(bases), 2), o.upload(compute.I32, i32Bytes(positions), 2), 2)
	cpuErr := o.cpu.Sync()
	kd, vd, errWord := &mbuf{make([]byte, 4*4*8)}, &mbuf{make([]byte, 4*4*8)}, &mbuf{make([]byte, 16)}
	o.launch(kernels.KVWriteLaunch(2), kd, vd, &mbuf{f32Bytes(k)}, &mbuf{f32Bytes(k)}, &mbuf{i32Bytes(bases)}, &mbuf{i32Bytes(positions)},
		int32(4), int32(8), errWord)
	o.checkError(errWord, cpuErr, true, 3, 1, 4) // ERR_KVWRITE
	wantK := make([]float32, 4*8)
	copy(wantK[8:16], k[:8])
	sameBits(o.t, "keys", floats(kd), wantK)

	dst := o.upload(compute.F32, make([]byte, 4*2*8), 2, 8)
	q := randn(16, 2*8)
	o.cpu.Attention(dst, o.upload(compute.F32, f32Bytes(q), 2, 8), kv, 0,
		o.upload(compute.I32, i32Bytes(bases), 2), o.upload(compute.I32, i32Bytes(positions), 2), 2, 1, 0.5)
	cpuErr = o.cpu.Sync()
	want := o.read(dst, 2*8)
	md, errWord := &mbuf{make([]byte, 4*2*8)}, &mbuf{make([]byte, 16)}
	o.launch(kernels.AttentionLaunch(2, 1), md, &mbuf{f32Bytes(q)}, kd, vd, &mbuf{i32Bytes(bases)}, &mbuf{i32Bytes(positions)},
		int32(1), int32(1), int32(8), int32(8), int32(4), float32(0.5), errWord)
	near(o.t, "attention", floats(md), want, 1e-5, 1)
	sameBits(o.t, "the row outside", floats(md)[8:], make([]float32, 8))
	o.checkError(errWord, cpuErr, true, 4, 1, 4) // ERR_ATTENTION
}

// Data helpers.

func f32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return b
}

func i32Bytes(v []int32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(x))
	}
	return b
}

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

// randn returns n normally distributed floats from a generator seeded with seed.
func randn(seed uint64, n int) []float32 {
	r := rand.New(rand.NewPCG(seed, 0xc0da))
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(r.NormFloat64())
	}
	return s
}

// encode rounds v to dtype (to nearest, ties to even) in place and returns its bytes.
func encode(dtype compute.DType, v []float32) []byte {
	if dtype == compute.F32 {
		return f32Bytes(v)
	}
	b := make([]byte, 2*len(v))
	for i, f := range v {
		var h uint16
		if dtype == compute.BF16 {
			u := math.Float32bits(f)
			u += 0x7fff + (u>>16)&1
			h = uint16(u >> 16)
			v[i] = compute.BF16ToF32(h)
		} else {
			h = f16Bits(f)
			v[i] = compute.F16ToF32(h)
		}
		binary.LittleEndian.PutUint16(b[2*i:], h)
	}
	return b
}

// f16Bits rounds f to binary16; values below the normal range become zero (the tests' data stay
// in the normal range).
func f16Bits(f float32) uint16 {
	u := math.Float32bits(f)
	sign := uint16(u>>16) & 0x8000
	exp := int(u>>23&0xff) - 127 + 15
	man := u & 0x7fffff
	if exp <= 0 {
		return sign
	}
	m := man >> 13
	if rem := man & 0x1fff; rem > 0x1000 || (rem == 0x1000 && m&1 == 1) {
		if m++; m == 0x400 {
			m, exp = 0, exp+1
		}
	}
	return sign | uint16(exp)<<10 | uint16(m)
}

// near reports elements with |got−want| > tol·max(|want|, floor), at most a few (NaN is never
// near).
func near(t testing.TB, what string, got, want []float32, tol, floor float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d elements, want %d", what, len(got), len(want))
	}
	bad := 0
	for i := range want {
		scale := max(math.Abs(float64(want[i])), floor)
		if d := math.Abs(float64(got[i]) - float64(want[i])); !(d <= tol*scale) {
			if bad++; bad <= 5 {
				t.Errorf("%s[%d] = %v, want %v (±%.3g)", what, i, got[i], want[i], tol*scale)
			}
		}
	}
	if bad > 5 {
		t.Errorf("%s: %d of %d elements off", what, bad, len(want))
	}
}

// sameBits reports the elements whose bits differ.
func sameBits(t testing.TB, what string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d elements, want %d", what, len(got), len(want))
	}
	bad := 0
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			if bad++; bad <= 3 {
				t.Errorf("%s[%d] = %v (%#08x), want %v (%#08x)", what, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
			}
		}
	}
	if bad > 3 {
		t.Errorf("%s: %d of %d elements differ", what, bad, len(want))
	}
}
