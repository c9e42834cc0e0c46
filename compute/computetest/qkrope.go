package computetest

import (
	"bytes"
	"fmt"
	"math"
	"testing"

	"tfd/compute"
)

// CheckQKRoPEWrite checks a backend's QKRoPEWrite against the five ops it stands for (the
// per-head norms, RoPE of q and of k, KVWrite) on the same backend, bit for bit: q and k as left
// in place and the whole pool, with and without the norms, for heads of 64, 128 and 256, at slots
// of several sessions; a row whose slot falls outside the pool is reported by Sync, as KVWrite's
// is. Heads of 16, which no backend fuses, are declined.
func CheckQKRoPEWrite(t *testing.T, b compute.Backend) {
	w, ok := b.(compute.QKRoPEWriter)
	if !ok {
		t.Fatalf("%s has no QKRoPEWrite", b.Name())
	}
	const rows, slots, eps = 9, 96, 1e-6
	for _, c := range []struct {
		hd, heads, kvHeads int
		norm, bad          bool
	}{{64, 6, 2, true, false}, {128, 32, 8, true, false}, {128, 4, 4, false, false}, {256, 8, 1, true, false}, {128, 4, 2, true, true}} {
		t.Run(fmt.Sprintf("%+v", c), func(t *testing.T) {
			st := c.kvHeads * c.hd
			spec := compute.KVSpec{Layers: 2, KVHeads: c.kvHeads, HeadDim: c.hd, Slots: slots}
			qs, ks, vs := Randn(31, rows*c.heads*c.hd), Randn(32, rows*st), Randn(33, rows*st)
			freqs := make([]float32, c.hd/2)
			for j := range freqs {
				freqs[j] = float32(1 / math.Pow(1e6, float64(2*j)/float64(c.hd)))
			}
			ropePos := []int32{0, 1, 2, 3, 50, 51, 700, 4095, 40000}
			bases := []int32{0, 0, 0, 0, 32, 32, 64, 64, 64}
			positions := []int32{0, 1, 2, 3, 0, 1, 5, 6, 7}
			if c.bad {
				positions[6] = slots
			}
			run := func(fused bool) (q, k []float32, pool []byte, err error) {
				qt := UploadF32(t, b, qs, rows, c.heads*c.hd)
				kt := UploadF32(t, b, ks, rows, st)
				vt := UploadF32(t, b, vs, rows, st)
				ft := UploadF32(t, b, freqs, len(freqs))
				rp, bt, pt := UploadI32(t, b, ropePos), UploadI32(t, b, bases), UploadI32(t, b, positions)
				var qn, kn compute.Tensor
				if c.norm {
					qn = UploadF32(t, b, Randn(34, c.hd), c.hd)
					kn = UploadF32(t, b, Randn(35, c.hd), c.hd)
				}
				kv, err := b.NewKV(spec)
				if err != nil {
					t.Fatal(err)
				}
				defer b.FreeKV(kv)
				if fused {
					if !w.QKRoPEWrite(qt, kt, vt, qn, kn, rp, ft, kv, 1, bt, pt, rows, c.heads, eps) {
						t.Fatalf("QKRoPEWrite declined heads of %d", c.hd)
					}
				} else {
					if c.norm {
						b.RMSNorm(qt, qt, qn, rows*c.heads, eps)
						b.RMSNorm(kt, kt, kn, rows*c.kvHeads, eps)
					}
					b.RoPE(qt, rp, ft, rows, c.heads)
					b.RoPE(kt, rp, ft, rows, c.kvHeads)
					b.KVWrite(kv, 1, kt, vt, bt, pt, rows)
				}
				err = b.Sync()
				q, k = make([]float32, rows*c.heads*c.hd), make([]float32, rows*st)
				if e := b.ReadFloat32(qt, q); e != nil {
					t.Fatal(e)
				}
				if e := b.ReadFloat32(kt, k); e != nil {
					t.Fatal(e)
				}
				pool = make([]byte, spec.Bytes())
				if e := b.ReadKV(kv, 0, slots, pool); e != nil {
					t.Fatal(e)
				}
				return q, k, pool, err
			}
			q1, k1, pool1, err1 := run(false)
			q2, k2, pool2, err2 := run(true)
			if (err1 != nil) != c.bad || (err2 != nil) != c.bad {
				t.Fatalf("with a row outside the pool %v: the ops' Sync %v, the launch's %v", c.bad, err1, err2)
			}
			SameBits(t, "q", q2, q1)
			SameBits(t, "k", k2, k1)
			if !bytes.Equal(pool2, pool1) {
				t.Error("the pool's keys and values differ from KVWrite's")
			}
		})
	}
	kv, err := b.NewKV(compute.KVSpec{Layers: 1, KVHeads: 1, HeadDim: 16, Slots: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer b.FreeKV(kv)
	x := UploadF32(t, b, make([]float32, 16), 1, 16)
	i := UploadI32(t, b, []int32{0})
	if w.QKRoPEWrite(x, x, x, nil, nil, i, UploadF32(t, b, make([]float32, 8), 8), kv, 0, i, i, 1, 1, eps) {
		t.Error("QKRoPEWrite took heads of 16, which it has no kernel for")
	}
}
