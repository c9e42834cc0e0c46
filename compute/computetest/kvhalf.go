package computetest

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"tfd/compute"
	"tfd/quant"
)

// CheckHalfKV checks an F16 pool on one backend against the definition in compute.KVSpec:
// KVWrite stores each key and value as quant.F32ToF16 rounds it (ties, subnormals, overflow to
// infinity, NaNs, −0 included), and Attention over an F16 pool gives the bits Attention over an
// F32 pool gives when that pool was written with the rounded values, with and without sinks, for
// head sizes with and without a tail of fewer than 8 elements, over short sessions and one long
// enough that a GPU splits its keys.
func CheckHalfKV(t *testing.T, b compute.Backend) {
	t.Run("rounding", func(t *testing.T) { checkHalfKVRounding(t, b) })
	for _, c := range []attentionCase{
		{16, 4, 2, 1200, []int32{0, 300, 700}, []int{40, 300, 129}, []int{0, 1, 39, 127, 128, 129, 299}},
		{20, 2, 1, 1200, []int32{0, 300, 700}, []int{40, 300, 129}, []int{0, 39, 128, 299}},
		{64, 6, 2, 1200, []int32{0, 300, 700}, []int{40, 300, 129}, []int{0, 1, 39, 127, 128, 129, 299}},
		{128, 8, 2, 2400, []int32{0, 2200}, []int{2100, 150}, []int{0, 63, 64, 1023, 1024, 1025, 2099}},
		{256, 4, 1, 1200, []int32{0, 300, 700}, []int{40, 300, 129}, []int{0, 129, 299}},
	} {
		for _, withSinks := range []bool{false, true} {
			t.Run(fmt.Sprint("attention ", c.hd, c.heads, c.kvHeads, c.slots, " sinks ", withSinks), func(t *testing.T) {
				checkHalfKVAttention(t, b, c, withSinks)
			})
		}
	}
}

// halfKVSpecials are values whose rounding to F16 is a case of its own.
var halfKVSpecials = []float32{
	0, float32(math.Copysign(0, -1)), 1, -1, 65504, 65519.996, 65520, -70000, float32(math.Inf(1)),
	float32(math.Inf(-1)), float32(math.NaN()), -float32(math.NaN()),
	1 + 1.0/2048, 1 + 3.0/2048, -(1 + 1.0/2048), // ties: to even, down and up
	0x1p-14, 0x1p-15, 0x1p-24, 0x1p-25, 0x1.8p-25, 0x1.000002p-25, 0x1p-26, 3e-8, 1e-30, // subnormals
	0x1.ffcp-15, 0x1.ffep-15, // the largest subnormal and the tie that carries into the normals
}

func checkHalfKVRounding(t *testing.T, b compute.Backend) {
	spec := compute.KVSpec{Layers: 2, KVHeads: 1, HeadDim: 8, Slots: 8, DType: compute.F16}
	kv, err := b.NewKV(spec)
	if err != nil {
		t.Fatal(err)
	}
	defer b.FreeKV(kv)
	st := spec.KVHeads * spec.HeadDim
	ks := make([]float32, spec.Slots*st)
	for i := range ks {
		ks[i] = halfKVSpecials[i%len(halfKVSpecials)]
		if i/len(halfKVSpecials)%2 == 1 {
			ks[i] = -ks[i]
		}
	}
	vs := Randn(7, len(ks))
	for i := range vs {
		vs[i] *= 1e4 // values past F16's range too
	}
	bases, positions := make([]int32, spec.Slots), make([]int32, spec.Slots)
	for r := range positions {
		positions[r] = int32(r)
	}
	n := spec.Slots
	b.KVWrite(kv, 1, UploadF32(t, b, ks, n, st), UploadF32(t, b, vs, n, st), UploadI32(t, b, bases), UploadI32(t, b, positions), n)
	got := make([]byte, spec.Bytes())
	if err := b.ReadKV(kv, 0, n, got); err != nil {
		t.Fatal(err)
	}
	got = got[len(got)/2:] // layer 1
	for i, f := range append(append([]float32{}, ks...), vs...) {
		if g, w := binary.LittleEndian.Uint16(got[2*i:]), quant.F32ToF16(f); g != w {
			t.Errorf("element %d, %g (%#08x): stored %#04x, want %#04x", i, f, math.Float32bits(f), g, w)
		}
	}
}

func checkHalfKVAttention(t *testing.T, b compute.Backend, c attentionCase, withSinks bool) {
	spec := compute.KVSpec{Layers: 2, KVHeads: c.kvHeads, HeadDim: c.hd, Slots: c.slots}
	var bases, positions []int32
	for s, n := range c.length {
		for pos := range n {
			bases, positions = append(bases, c.bases[s]), append(positions, int32(pos))
		}
	}
	rows, st := len(bases), spec.KVHeads*spec.HeadDim
	bt, pt := UploadI32(t, b, bases), UploadI32(t, b, positions)
	half, rounded := spec, spec
	half.DType, rounded.DType = compute.F16, compute.F32
	var pools [2]compute.KV
	for i, s := range []compute.KVSpec{half, rounded} {
		kv, err := b.NewKV(s)
		if err != nil {
			t.Fatal(err)
		}
		defer b.FreeKV(kv)
		pools[i] = kv
	}
	for l := range spec.Layers {
		k, v := Randn(uint64(50+2*l), rows*st), Randn(uint64(51+2*l), rows*st)
		b.KVWrite(pools[0], l, UploadF32(t, b, k, rows, st), UploadF32(t, b, v, rows, st), bt, pt, rows)
		for _, x := range [][]float32{k, v} {
			for i, f := range x {
				x[i] = quant.F16ToF32(quant.F32ToF16(f))
			}
		}
		b.KVWrite(pools[1], l, UploadF32(t, b, k, rows, st), UploadF32(t, b, v, rows, st), bt, pt, rows)
	}
	// Rows of every session at several positions, in a mixed order.
	bases, positions = bases[:0], positions[:0]
	for _, pos := range c.positions {
		for s := range c.bases {
			if pos < c.length[s] {
				bases, positions = append(bases, c.bases[s]), append(positions, int32(pos))
			}
		}
	}
	rows, qw := len(bases), c.heads*c.hd
	q := UploadF32(t, b, Randn(60, rows*qw), rows, qw)
	bt, pt = UploadI32(t, b, bases), UploadI32(t, b, positions)
	var sinks compute.Tensor
	if withSinks {
		sinks = UploadF32(t, b, Randn(61, c.heads), c.heads)
	}
	var out [2][]float32
	for i, kv := range pools {
		dst, err := b.Alloc(compute.F32, rows, qw)
		if err != nil {
			t.Fatal(err)
		}
		b.Attention(dst, q, kv, 1, bt, pt, sinks, rows, c.heads, float32(1/math.Sqrt(float64(c.hd))))
		out[i] = ReadOne(t, b, dst, rows*qw)
		b.Free(dst)
	}
	SameBits(t, "attention over the F16 pool against the F32 pool of the rounded values", out[0], out[1])
}
