package cpu

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"tfd/compute"
	"tfd/compute/computetest"
)

// Ops reading F16 and BF16 weights must give the bits they give with the same weights widened to
// F32 beforehand, with every kind of kernel.

var halfTypes = []compute.DType{compute.BF16, compute.F16}

// forWeightKernels is forKernels for ops that read 16-bit weights, plus, where the CPU has F16C,
// the assembly kernels as they run on a CPU without it (F16 weights widened into scratch).
func forWeightKernels(t *testing.T, f func(t *testing.T)) {
	forKernels(t, f)
	if asmSupported && hasF16C {
		saved, savedF16C := useAsm, useF16C
		defer func() { useAsm, useF16C = saved, savedF16C }()
		useAsm, useF16C = true, false
		t.Run("asm-noF16C", f)
	}
}

// halfWeights returns n random finite values of dtype (F16 or BF16): random signs and mantissas,
// exponents spread around 1, and one in sixteen a subnormal or zero.
func halfWeights(seed uint64, n int, dtype compute.DType) []uint16 {
	ebits, mbits := 5, 10
	if dtype == compute.BF16 {
		ebits, mbits = 8, 7
	}
	bias := 1<<(ebits-1) - 1
	r := rand.New(rand.NewPCG(seed, 0x16))
	h := make([]uint16, n)
	for i := range h {
		e := min(max(bias+int(math.Round(3*r.NormFloat64())), 1), 1<<ebits-2)
		if r.IntN(16) == 0 {
			e = 0
		}
		h[i] = uint16(r.IntN(2))<<15 | uint16(e)<<mbits | uint16(r.IntN(1<<mbits))
	}
	return h
}

// truncated returns f truncated to dtype (F16 or BF16), as a checkpoint might hold it: no
// subnormals (values too small for F16's normals become zero), unlike halfWeights.
func truncated(f []float32, dtype compute.DType) []uint16 {
	h := make([]uint16, len(f))
	for i, v := range f {
		bits := math.Float32bits(v)
		if dtype == compute.BF16 {
			h[i] = uint16(bits >> 16)
			continue
		}
		sign, e := uint16(bits>>16)&0x8000, int(bits>>23&0xff)-127+15
		switch {
		case e <= 0:
			h[i] = sign
		case e >= 31:
			h[i] = sign | 0x7bff // the largest finite F16
		default:
			h[i] = sign | uint16(e)<<10 | uint16(bits>>13&0x3ff)
		}
	}
	return h
}

// widenedRef widens h with f16ToF32 or the BF16 shift, as Upload did before weights stayed 16-bit.
func widenedRef(h []uint16, dtype compute.DType) []float32 {
	f := make([]float32, len(h))
	for i, v := range h {
		if dtype == compute.BF16 {
			f[i] = math.Float32frombits(uint32(v) << 16)
		} else {
			f[i] = compute.F16ToF32(v)
		}
	}
	return f
}

// hten uploads h as a dtype tensor of the given shape.
func hten(t testing.TB, b *backend, dtype compute.DType, h []uint16, shape ...int) *tensor {
	t.Helper()
	data := make([]byte, 2*len(h))
	for i, v := range h {
		binary.LittleEndian.PutUint16(data[2*i:], v)
	}
	tt, err := b.Upload(dtype, shape, data)
	if err != nil {
		t.Fatal(err)
	}
	return tt.(*tensor)
}

// weightTensor returns an [out, in] weight matrix of dtype with random values, and the same
// values as F32.
func weightTensor(t testing.TB, b *backend, dtype compute.DType, seed uint64, out, in int) (w, w32 *tensor) {
	t.Helper()
	if dtype == compute.F32 {
		w = ften(t, b, computetest.Randn(seed, out*in), out, in)
		return w, w
	}
	h := halfWeights(seed, out*in, dtype)
	return hten(t, b, dtype, h, out, in), ften(t, b, widenedRef(h, dtype), out, in)
}

func TestMatMulHalf(t *testing.T) {
	forWeightKernels(t, func(t *testing.T) {
		for _, dtype := range halfTypes {
			t.Run(dtype.String(), func(t *testing.T) {
				b := newTest(t)
				for _, in := range []int{1, 7, 8, 13, 37, 389, 1100} { // 1100: K-blocked
					for _, out := range []int{1, 3, 17, 45, 64} {
						w, w32 := weightTensor(t, b, dtype, uint64(in*100+out), out, in)
						bias := ften(t, b, computetest.Randn(3, out), out)
						for _, rows := range []int{1, 3, 17, 64} {
							x := ften(t, b, computetest.Randn(uint64(rows), rows*in), rows, in)
							got, want := ften(t, b, nil, rows, out), ften(t, b, nil, rows, out)
							for _, bs := range []*tensor{nil, bias} {
								if bs == nil {
									b.MatMul(got, x, w, nil, rows)
									b.MatMul(want, x, w32, nil, rows)
								} else {
									b.MatMul(got, x, w, bs, rows)
									b.MatMul(want, x, w32, bs, rows)
								}
								computetest.SameBits(t, name(in, out, rows, bs != nil), got.f, want.f)
							}
						}
					}
				}
			})
		}
	})
}

func TestEmbedHalf(t *testing.T) {
	for _, dtype := range halfTypes {
		t.Run(dtype.String(), func(t *testing.T) {
			b := newTest(t)
			const vocab, dim = 11, 37
			table, table32 := weightTensor(t, b, dtype, 1, vocab, dim)
			if table.DType() != dtype {
				t.Fatalf("DType() = %v, want %v", table.DType(), dtype)
			}
			ids := iten(t, b, []int32{3, 0, 10, 3}, 4)
			got, want := ften(t, b, nil, 4, dim), ften(t, b, nil, 4, dim)
			b.Embed(got, table, ids, 4)
			b.Embed(want, table32, ids, 4)
			computetest.SameBits(t, "Embed", got.f, want.f)
			if err := b.Sync(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestWSumHalfIsWSumOfWidened: the weighted sum over F16 values read as they are stored gives the
// bits of the weighted sum over the same values widened beforehand, for row lengths with and
// without a tail and with every block of eight, starting from zero and accumulating.
func TestWSumHalfIsWSumOfWidened(t *testing.T) {
	forKernels(t, func(t *testing.T) {
		if !halfDirect(compute.F16) {
			t.Skip("no kernels that read F16 directly")
		}
		for _, n := range []int{1, 7, 8, 9, 24, 33, 64, 65, 128, 136, 256} {
			for _, keys := range []int{1, 3, 17} {
				stride := n + 5
				v := halfWeights(uint64(n*100+keys), (keys-1)*stride+n, compute.F16)
				wide := make([]float32, len(v))
				widen(wide, v, compute.F16)
				p := computetest.Randn(uint64(keys), keys)
				for _, accumulate := range []bool{false, true} {
					got, want := computetest.Randn(9, n), computetest.Randn(9, n)
					wsumHalf(got, p, v, stride, accumulate)
					wsum(want, p, wide, stride, accumulate)
					for d := range got {
						if math.Float32bits(got[d]) != math.Float32bits(want[d]) {
							t.Fatalf("n %d, %d keys, accumulate %v: element %d is %v, widened first %v", n, keys, accumulate, d, got[d], want[d])
						}
					}
				}
			}
		}
	})
}
