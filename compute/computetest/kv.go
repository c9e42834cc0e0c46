package computetest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"tfd/compute"
)

// The moves of whole KV slots (CopyKV, ReadKV, WriteKV), checked on one backend: they move bits
// unchanged, so every check is exact, and each holds the pools' whole contents against a copy
// kept on the host. Random bits include NaNs of every kind (about one value in 256), which a move
// through float arithmetic would quieten or drop. The cpu backend's tests run these checks too.

// kvShape is the slot shape of the pools these checks make: the GPU kernels take head sizes in
// multiples of 4.
var kvShape = compute.KVSpec{Layers: 3, KVHeads: 2, HeadDim: 12}

// newPool returns a zeroed pool of kvShape with the given slots.
func newPool(t testing.TB, b compute.Backend, slots int) compute.KV {
	t.Helper()
	spec := kvShape
	spec.Slots = slots
	kv, err := b.NewKV(spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.FreeKV(kv) })
	return kv
}

// kvBytes returns the bytes n slots of kvShape take in ReadKV's layout.
func kvBytes(n int) int {
	spec := kvShape
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
func readAll(t testing.TB, b compute.Backend, kv compute.KV) []byte {
	t.Helper()
	dst := make([]byte, kvBytes(kv.Slots()))
	if err := b.ReadKV(kv, 0, kv.Slots(), dst); err != nil {
		t.Fatalf("ReadKV of the whole pool: %v", err)
	}
	return dst
}

// hostPool is what a pool should hold, in ReadKV's layout for all its slots.
type hostPool struct {
	slots int
	data  []byte
}

// region returns the bytes of n slots from slot in one layer's keys (values: 1) of h.
func (h *hostPool) region(layer, values, slot, n int) []byte {
	per := kvBytes(1) / kvShape.Layers / 2 // one slot of one layer's keys
	at := (2*layer+values)*h.slots*per + slot*per
	return h.data[at : at+n*per]
}

// copyFrom applies CopyKV(h, dst, src, srcSlot, n) to h; copy moves overlapping ranges as
// memmove does, which is what CopyKV within one pool promises.
func (h *hostPool) copyFrom(dst int, src *hostPool, srcSlot, n int) {
	for l := range kvShape.Layers {
		for v := range 2 {
			copy(h.region(l, v, dst, n), src.region(l, v, srcSlot, n))
		}
	}
}

// samePool reports the first slot of kv whose bits differ from want's.
func samePool(t testing.TB, what string, b compute.Backend, kv compute.KV, want *hostPool) {
	t.Helper()
	got := readAll(t, b, kv)
	if bytes.Equal(got, want.data) {
		return
	}
	for l := range kvShape.Layers {
		for v, name := range []string{"keys", "values"} {
			for s := range want.slots {
				g := (&hostPool{want.slots, got}).region(l, v, s, 1)
				w := want.region(l, v, s, 1)
				for e := 0; e < len(w); e += 4 {
					if gb, wb := binary.LittleEndian.Uint32(g[e:]), binary.LittleEndian.Uint32(w[e:]); gb != wb {
						t.Fatalf("%s: layer %d %s of slot %d, element %d: %#08x, want %#08x", what, l, name, s, e/4, gb, wb)
					}
				}
			}
		}
	}
}

// CheckKVReadWrite: random bits written with WriteKV read back identical with ReadKV, and the
// slots around them stay zero; a range outside the pool is an error of ReadKV and is reported by
// the Sync after WriteKV (which writes nothing); wrong lengths panic.
func CheckKVReadWrite(t *testing.T, b compute.Backend) {
	const slots, at, n = 40, 11, 7
	kv := newPool(t, b, slots)
	want := &hostPool{slots, make([]byte, kvBytes(slots))}
	src := randomBits(1, kvBytes(n))
	sent := &hostPool{n, bytes.Clone(src)}
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
// slots, then their values, F32 little-endian), checked against keys and values written with
// KVWrite.
func CheckKVLayout(t *testing.T, b compute.Backend) {
	const slots, at, n = 30, 5, 9
	kv := newPool(t, b, slots)
	st := kvShape.KVHeads * kvShape.HeadDim
	bases := make([]int32, n)
	positions := make([]int32, n)
	for r := range n {
		bases[r], positions[r] = at, int32(r)
	}
	bt, pt := UploadI32(t, b, bases), UploadI32(t, b, positions)
	var want []byte
	for l := range kvShape.Layers {
		k, v := Randn(uint64(40+2*l), n*st), Randn(uint64(41+2*l), n*st)
		b.KVWrite(kv, l, UploadF32(t, b, k, n, st), UploadF32(t, b, v, n, st), bt, pt, n)
		want = append(append(want, F32Bytes(k)...), F32Bytes(v)...)
	}
	got := make([]byte, kvBytes(n))
	if err := b.ReadKV(kv, at, n, got); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(want); i += 4 {
		if g, w := binary.LittleEndian.Uint32(got[i:]), binary.LittleEndian.Uint32(want[i:]); g != w {
			per := n * st * 4
			part, in := i/per, i%per
			t.Fatalf("layer %d %s, slot %d, element %d: %v, want %v", part/2, []string{"keys", "values"}[part%2],
				at+in/(st*4), in%(st*4)/4, math.Float32frombits(g), math.Float32frombits(w))
		}
	}
}

// CheckCopyKV: CopyKV moves bits unchanged between two pools of different sizes, and within one
// pool disjoint and overlapping in both directions (by less than a slot range, so that a backend
// copying in pieces takes several); a range outside a pool is reported by the next Sync and
// copies nothing; pools of different shapes panic.
func CheckCopyKV(t *testing.T, b compute.Backend) {
	pools := []compute.KV{newPool(t, b, 300), newPool(t, b, 120)}
	want := []*hostPool{{300, randomBits(3, kvBytes(300))}, {120, randomBits(4, kvBytes(120))}}
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
	other := kvShape
	other.Slots, other.KVHeads = 10, 1
	kv, err := b.NewKV(other)
	if err != nil {
		t.Fatal(err)
	}
	defer b.FreeKV(kv)
	mustPanic(t, "CopyKV between pools of 2 and 1 KV heads", func() { b.CopyKV(kv, 0, pools[0], 0, 1) })
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
