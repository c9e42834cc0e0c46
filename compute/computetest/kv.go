package computetest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"tfd/compute"
)

// The moves of whole KV slots (CopyKV, ReadKV, WriteKV), checked on one backend: they move bits
// unchanged, so every check is exact, and each holds the pools' whole contents against a copy
// kept on the host. Random bits include NaNs of every kind (about one value in 256), which a move
// through float arithmetic would quieten or drop. The cpu backend's tests run these checks too.

// kvShape is the slot shape of the pools these checks make, in dtype dt: the GPU kernels take
// head sizes in multiples of 4.
func kvShape(dt compute.DType) compute.KVSpec {
	return compute.KVSpec{Layers: 3, KVHeads: 2, HeadDim: 12, DType: dt}
}

// kvDTypes are the dtypes a pool may store; every check runs for each.
var kvDTypes = []compute.DType{compute.F32, compute.F16}

// eachKVDType runs check as a subtest for each of kvDTypes.
func eachKVDType(t *testing.T, check func(t *testing.T, shape compute.KVSpec)) {
	for _, dt := range kvDTypes {
		t.Run(dt.String(), func(t *testing.T) { check(t, kvShape(dt)) })
	}
}

// newPool returns a zeroed pool of shape with the given slots.
func newPool(t testing.TB, b compute.Backend, shape compute.KVSpec, slots int) compute.KV {
	t.Helper()
	spec := shape
	spec.Slots = slots
	kv, err := b.NewKV(spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.FreeKV(kv) })
	return kv
}

// kvBytes returns the bytes n slots of shape take in ReadKV's layout.
func kvBytes(shape compute.KVSpec, n int) int {
	spec := shape
	spec.Slots = n
	return int(spec.Bytes())
}

// randomBits returns n random bytes (n a multiple of 4) from a generator seeded with seed, with a
// signalling NaN of either sign every 16 values: a move through float arithmetic quietens them.
func randomBits(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 0xb175))
	b := make([]byte, n)
	for i := 0; i < n; i += 4 {
		w := r.Uint32()
		if i%64 == 0 {
			w = w&0x8000_0000 | 0x7f80_0000 | (w&0x3f_ffff | 1) // exponent all ones, quiet bit clear
		}
		binary.LittleEndian.PutUint32(b[i:], w)
	}
	return b
}

// readAll returns the whole pool in ReadKV's layout, after checking the read's error.
func readAll(t testing.TB, b compute.Backend, shape compute.KVSpec, kv compute.KV) []byte {
	t.Helper()
	dst := make([]byte, kvBytes(shape, kv.Slots()))
	if err := b.ReadKV(kv, 0, kv.Slots(), dst); err != nil {
		t.Fatalf("ReadKV of the whole pool: %v", err)
	}
	return dst
}

// hostPool is what a pool should hold, in ReadKV's layout for all its slots.
type hostPool struct {
	shape compute.KVSpec
	slots int
	data  []byte
}

// region returns the bytes of n slots from slot in one layer's keys (values: 1) of h.
func (h *hostPool) region(layer, values, slot, n int) []byte {
	per := kvBytes(h.shape, 1) / h.shape.Layers / 2 // one slot of one layer's keys
	at := (2*layer+values)*h.slots*per + slot*per
	return h.data[at : at+n*per]
}

// copyFrom applies CopyKV(h, dst, src, srcSlot, n) to h; copy moves overlapping ranges as
// memmove does, which is what CopyKV within one pool promises.
func (h *hostPool) copyFrom(dst int, src *hostPool, srcSlot, n int) {
	for l := range h.shape.Layers {
		for v := range 2 {
			copy(h.region(l, v, dst, n), src.region(l, v, srcSlot, n))
		}
	}
}

// samePool reports the first slot of kv whose bits differ from want's.
func samePool(t testing.TB, what string, b compute.Backend, kv compute.KV, want *hostPool) {
	t.Helper()
	got := readAll(t, b, want.shape, kv)
	if bytes.Equal(got, want.data) {
		return
	}
	for l := range want.shape.Layers {
		for v, name := range []string{"keys", "values"} {
			for s := range want.slots {
				g := (&hostPool{want.shape, want.slots, got}).region(l, v, s, 1)
				w := want.region(l, v, s, 1)
				if !bytes.Equal(g, w) {
					t.Fatalf("%s: layer %d %s of slot %d: % x, want % x", what, l, name, s, g, w)
				}
			}
		}
	}
}

// CheckKVReadWrite: random bits written with WriteKV read back identical with ReadKV, and the
// slots around them stay zero; a range outside the pool is an error of ReadKV and is reported by
// the Sync after WriteKV (which writes nothing); wrong lengths panic.
func CheckKVReadWrite(t *testing.T, b compute.Backend) {
	eachKVDType(t, func(t *testing.T, shape compute.KVSpec) { checkKVReadWrite(t, b, shape) })
}

func checkKVReadWrite(t *testing.T, b compute.Backend, shape compute.KVSpec) {
	const slots, at, n = 40, 11, 7
	kv := newPool(t, b, shape, slots)
	kvBytes := func(n int) int { return kvBytes(shape, n) }
	want := &hostPool{shape, slots, make([]byte, kvBytes(slots))}
	src := randomBits(1, kvBytes(n))
	sent := &hostPool{shape, n, bytes.Clone(src)}
	b.WriteKV(kv, at, src)
	clear(src) // the backend copied src before returning: this must not reach the pool
	want.copyFrom(at, sent, 0, n)
	samePool(t, "after WriteKV", b, kv, want)
	got := make([]byte, kvBytes(n))
	if err := b.ReadKV(kv, at, n, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, sent.data) {
		t.Fatal("ReadKV of the slots WriteKV wrote differs from what it wrote")
	}

	b.WriteKV(kv, slots-2, randomBits(2, kvBytes(3)))
	if err := b.Sync(); err == nil || !strings.Contains(err.Error(), "WriteKV") {
		t.Errorf("WriteKV of 3 slots at %d of %d: Sync = %v, want a WriteKV error", slots-2, slots, err)
	}
	samePool(t, "after a WriteKV past the pool", b, kv, want)
	if err := b.ReadKV(kv, slots-2, 3, make([]byte, kvBytes(3))); err == nil || !strings.Contains(err.Error(), "ReadKV") {
		t.Errorf("ReadKV of 3 slots at %d of %d = %v, want a ReadKV error", slots-2, slots, err)
	}
	if err := b.Sync(); err != nil {
		t.Errorf("Sync after the errors were reported: %v", err)
	}
	mustPanic(t, "ReadKV into a buffer one byte short", func() { b.ReadKV(kv, 0, 2, make([]byte, kvBytes(2)-1)) })
	mustPanic(t, "WriteKV of a slot and a half", func() { b.WriteKV(kv, 0, make([]byte, kvBytes(1)*3/2)) })
}

// CheckKVLayout: ReadKV lays slots out as the contract says (for each layer, the keys of the
// slots, then their values, little-endian in the pool's dtype), checked against keys and values
// written with KVWrite (an F16 pool's rounded to nearest, ties to even: computetest's own F16Bits).
func CheckKVLayout(t *testing.T, b compute.Backend) {
	eachKVDType(t, func(t *testing.T, shape compute.KVSpec) { checkKVLayout(t, b, shape) })
}

func checkKVLayout(t *testing.T, b compute.Backend, shape compute.KVSpec) {
	const slots, at, n = 30, 5, 9
	kv := newPool(t, b, shape, slots)
	st := shape.KVHeads * shape.HeadDim
	bases := make([]int32, n)
	positions := make([]int32, n)
	for r := range n {
		bases[r], positions[r] = at, int32(r)
	}
	bt, pt := UploadI32(t, b, bases), UploadI32(t, b, positions)
	var want []byte
	for l := range shape.Layers {
		k, v := Randn(uint64(40+2*l), n*st), Randn(uint64(41+2*l), n*st)
		b.KVWrite(kv, l, UploadF32(t, b, k, n, st), UploadF32(t, b, v, n, st), bt, pt, n)
		want = append(append(want, Encode(shape.Elem(), k)...), Encode(shape.Elem(), v)...)
	}
	got := make([]byte, kvBytes(shape, n))
	if err := b.ReadKV(kv, at, n, got); err != nil {
		t.Fatal(err)
	}
	size := shape.Elem().Size()
	for i := 0; i < len(want); i += size {
		if g, w := got[i:i+size], want[i:i+size]; !bytes.Equal(g, w) {
			per := n * st * size
			part, in := i/per, i%per
			t.Fatalf("layer %d %s, slot %d, element %d: % x, want % x", part/2, []string{"keys", "values"}[part%2],
				at+in/(st*size), in%(st*size)/size, g, w)
		}
	}
}

// CheckCopyKV: CopyKV moves bits unchanged between two pools of different sizes, and within one
// pool disjoint and overlapping in both directions (by less than a slot range, so that a backend
// copying in pieces takes several); a range outside a pool is reported by the next Sync and
// copies nothing; pools of different shapes panic.
func CheckCopyKV(t *testing.T, b compute.Backend) {
	eachKVDType(t, func(t *testing.T, shape compute.KVSpec) { checkCopyKV(t, b, shape) })
}

func checkCopyKV(t *testing.T, b compute.Backend, shape compute.KVSpec) {
	pools := []compute.KV{newPool(t, b, shape, 300), newPool(t, b, shape, 120)}
	want := []*hostPool{{shape, 300, randomBits(3, kvBytes(shape, 300))}, {shape, 120, randomBits(4, kvBytes(shape, 120))}}
	for i, kv := range pools {
		b.WriteKV(kv, 0, want[i].data)
	}
	for _, mv := range []struct{ dst, dstSlot, src, srcSlot, n int }{
		{1, 10, 0, 200, 100}, // across, one way
		{0, 0, 1, 70, 50},    // and the other
		{0, 150, 0, 20, 60},  // within, disjoint
		{0, 27, 0, 20, 60},   // overlapping, to a later slot
		{0, 13, 0, 27, 60},   // overlapping, to an earlier slot
		{1, 3, 1, 0, 117},    // the whole pool but three, one slot on
		{1, 0, 1, 3, 117},    // and back
		{0, 40, 0, 40, 30},   // onto itself
		{1, 119, 0, 299, 1},  // last slots
		{0, 299, 0, 299, 0},  // nothing
	} {
		b.CopyKV(pools[mv.dst], mv.dstSlot, pools[mv.src], mv.srcSlot, mv.n)
		want[mv.dst].copyFrom(mv.dstSlot, want[mv.src], mv.srcSlot, mv.n)
		what := fmt.Sprintf("after CopyKV of %d slots from pool %d slot %d to pool %d slot %d", mv.n, mv.src, mv.srcSlot, mv.dst, mv.dstSlot)
		for i, kv := range pools {
			samePool(t, fmt.Sprintf("%s: pool %d", what, i), b, kv, want[i])
		}
	}
	b.CopyKV(pools[1], 100, pools[0], 0, 30) // past the end of the destination
	if err := b.Sync(); err == nil || !strings.Contains(err.Error(), "CopyKV") {
		t.Errorf("CopyKV past the pool: Sync = %v, want a CopyKV error", err)
	}
	b.CopyKV(pools[0], 0, pools[1], -1, 5)
	if err := b.Sync(); err == nil || !strings.Contains(err.Error(), "CopyKV") {
		t.Errorf("CopyKV from slot -1: Sync = %v, want a CopyKV error", err)
	}
	for i, kv := range pools {
		samePool(t, fmt.Sprintf("after the CopyKVs outside: pool %d", i), b, kv, want[i])
	}
	other := shape
	other.Slots, other.KVHeads = 10, 1
	kv, err := b.NewKV(other)
	if err != nil {
		t.Fatal(err)
	}
	defer b.FreeKV(kv)
	mustPanic(t, "CopyKV between pools of 2 and 1 KV heads", func() { b.CopyKV(kv, 0, pools[0], 0, 1) })
	other = shape
	other.Slots, other.DType = 10, compute.F32
	if shape.Elem() == compute.F32 {
		other.DType = compute.F16
	}
	kv, err = b.NewKV(other)
	if err != nil {
		t.Fatal(err)
	}
	defer b.FreeKV(kv)
	mustPanic(t, fmt.Sprintf("CopyKV between pools of %v and %v", other.DType, shape.Elem()), func() { b.CopyKV(kv, 0, pools[0], 0, 1) })
}

// mustPanic reports an error unless f panics.
func mustPanic(t testing.TB, what string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Errorf("%s: no panic", what)
		}
	}()
	f()
}
