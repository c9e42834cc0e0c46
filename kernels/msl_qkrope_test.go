package kernels_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"tfd/compute/computetest"
	"tfd/kernels"
)

// qkRopeWrite runs qk_rope_write_H against the ops it stands for, each run on the shim and each
// checked against the cpu backend by its own cases: rmsnorm over each head of q and of k (where
// norm is set), rope of both, kv_write of k and v. q and k in place, the keys and the values in
// the pool, and the error word must come out the same bits; with bad set one row's slot falls
// outside the pool and is reported as kv_write reports it. With hasBias ≥ 0, q, k and v come in
// quarters (a q, k and v matmul's, hasBias its biases' bits), which mma_sum_quarters adds for the
// ops and qk_rope_write adds itself, writing v's sums to v.
func (o *op) qkRopeWrite(hd, heads, kvHeads int, norm, bad bool, kv kernels.KV, hasBias int32) {
	const rows, slots, eps = 5, 64, 1e-6
	st := kvHeads * hd
	size := kvDType(kv).Size()
	qs, ks, vs := computetest.Randn(21, rows*heads*hd), computetest.Randn(22, rows*st), computetest.Randn(23, rows*st)
	quarters := hasBias >= 0
	part, qb, kb, vb := &mbuf{}, &mbuf{}, &mbuf{}, &mbuf{}
	if quarters {
		parts := computetest.Randn(26, 4*rows*(heads*hd+2*st))
		part = &mbuf{computetest.F32Bytes(parts)}
		qb, kb, vb = &mbuf{computetest.F32Bytes(computetest.Randn(27, heads*hd))}, &mbuf{computetest.F32Bytes(computetest.Randn(28, st))}, &mbuf{computetest.F32Bytes(computetest.Randn(29, st))}
		sq, sk, sv := &mbuf{make([]byte, 4*len(qs))}, &mbuf{make([]byte, 4*len(ks))}, &mbuf{make([]byte, 4*len(vs))}
		_, sum := kernels.MatMulsWGQuartersLaunch(rows, [3]int{heads * hd, st, st})
		o.launch(sum, sq, sk, sv, part, qb, kb, vb, int32(rows), int32(heads*hd), int32(st), int32(st), hasBias)
		qs, ks, vs = floats(sq), floats(sk), floats(sv)
	}
	qw, kw := computetest.Randn(24, hd), computetest.Randn(25, hd)
	freqs := make([]float32, hd/2)
	for j := range freqs {
		freqs[j] = float32(1 / math.Pow(1e6, float64(2*j)/float64(hd)))
	}
	ropePos := []int32{0, 3, 700, 4095, 40000}
	bases, positions := []int32{0, 8, 16, 16, 40}, []int32{0, 3, 5, 6, 2}
	if bad {
		positions[2] = slots
	}
	buf := func(b []byte) *mbuf { return &mbuf{slices.Clone(b)} }
	f32, i32 := computetest.F32Bytes, computetest.I32Bytes

	// The five ops.
	wantQ, wantK := buf(f32(qs)), buf(f32(ks))
	wantKd, wantVd, wantErr := &mbuf{make([]byte, size*slots*st)}, &mbuf{make([]byte, size*slots*st)}, &mbuf{make([]byte, 16)}
	if norm {
		o.launch(kernels.RMSNormLaunch(rows*heads, hd), wantQ, wantQ, wantQ, buf(f32(qw)), int32(rows*heads), int32(hd), float32(eps), int32(0))
		o.launch(kernels.RMSNormLaunch(rows*kvHeads, hd), wantK, wantK, wantK, buf(f32(kw)), int32(rows*kvHeads), int32(hd), float32(eps), int32(0))
	}
	o.launch(kernels.RoPELaunch(rows, heads, hd/2), wantQ, buf(i32(ropePos)), buf(f32(freqs)), int32(heads), int32(hd/2))
	o.launch(kernels.RoPELaunch(rows, kvHeads, hd/2), wantK, buf(i32(ropePos)), buf(f32(freqs)), int32(kvHeads), int32(hd/2))
	o.launch(kernels.KVWriteLaunch(rows, st, kv), wantKd, wantVd, wantK, buf(f32(vs)), buf(i32(bases)), buf(i32(positions)), int32(slots), int32(st), wantErr)

	// The one launch.
	l, ok := kernels.QKRopeWriteLaunch(rows, heads, kvHeads, hd, hd/2, kv)
	if !ok {
		o.t.Fatalf("no qk_rope_write for heads of %d", hd)
	}
	gotQ, gotK, gotV := buf(f32(qs)), buf(f32(ks)), buf(f32(vs))
	if quarters { // what the launch must make of the partials alone
		gotQ, gotK, gotV = &mbuf{make([]byte, 4*len(qs))}, &mbuf{make([]byte, 4*len(ks))}, &mbuf{make([]byte, 4*len(vs))}
	}
	gotKd, gotVd, gotErr := &mbuf{make([]byte, size*slots*st)}, &mbuf{make([]byte, size*slots*st)}, &mbuf{make([]byte, 16)}
	hasNorm, inQuarters := int32(0), int32(0)
	if norm {
		hasNorm = 1
	}
	if quarters {
		inQuarters = 1
	}
	o.launch(l, gotQ, gotK, gotKd, gotVd, gotV, buf(f32(qw)), buf(f32(kw)), buf(i32(ropePos)), buf(f32(freqs)),
		buf(i32(bases)), buf(i32(positions)), int32(heads), int32(kvHeads), float32(eps), hasNorm, int32(slots), gotErr,
		part, qb, kb, vb, int32(rows), inQuarters, max(hasBias, 0))

	computetest.SameBits(o.t, "q", floats(gotQ), floats(wantQ))
	computetest.SameBits(o.t, "k", floats(gotK), floats(wantK))
	computetest.SameBits(o.t, "v", floats(gotV), vs)
	sameBytes(o.t, "keys", gotKd.b, wantKd.b)
	sameBytes(o.t, "values", gotVd.b, wantVd.b)
	if code := binary.LittleEndian.Uint32(wantErr.b); (code != 0) != bad {
		o.t.Errorf("kv_write's error word %v with a row outside the pool %v", ints(wantErr), bad)
	}
	if fmt.Sprint(ints(gotErr)) != fmt.Sprint(ints(wantErr)) {
		o.t.Errorf("error word %v, kv_write's %v", ints(gotErr), ints(wantErr))
	}
}
