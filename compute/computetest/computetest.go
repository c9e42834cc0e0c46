// Package computetest holds what the backends' tests share: random data, its encoding in each
// dtype, and the two ways results are compared, bit for bit (batch invariance, data moves) and
// within a tolerance (one backend against another, whose reductions run in other orders); and the
// checks every GPU backend's tests run, each op against the cpu backend (ops.go) and batch
// invariance (invariance.go), on a Pair of the backend and the cpu backend (pair.go), and the KV
// moves on the backend alone (kv.go), which the cpu backend's tests run too.
package computetest

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"tfd/compute"
)

// Randn returns n normally distributed floats from a generator seeded with seed.
func Randn(seed uint64, n int) []float32 {
	r := rand.New(rand.NewPCG(seed, 0xc0da))
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(r.NormFloat64())
	}
	return s
}

// F32Bytes returns v little-endian.
func F32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return b
}

// I32Bytes returns v little-endian.
func I32Bytes(v []int32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(x))
	}
	return b
}

// Encode rounds v to dtype (to nearest, ties to even) in place and returns its bytes, as a
// checkpoint would hold them.
func Encode(dtype compute.DType, v []float32) []byte {
	if dtype == compute.F32 {
		return F32Bytes(v)
	}
	b := make([]byte, 2*len(v))
	for i, f := range v {
		var h uint16
		switch dtype {
		case compute.BF16:
			u := math.Float32bits(f)
			u += 0x7fff + (u>>16)&1
			h = uint16(u >> 16)
			v[i] = compute.BF16ToF32(h)
		case compute.F16:
			h = F16Bits(f)
			v[i] = compute.F16ToF32(h)
		default:
			panic("computetest: Encode to " + dtype.String())
		}
		binary.LittleEndian.PutUint16(b[2*i:], h)
	}
	return b
}

// F16Bits rounds f to binary16, to nearest with ties to even; values below the normal range
// become zero (tests keep their data in the normal range).
func F16Bits(f float32) uint16 {
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

// SameBits reports, as test errors, the first elements whose bits differ, and how many do.
func SameBits(t testing.TB, what string, got, want []float32) {
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

// Near reports, as test errors, elements with |got−want| > tol·max(|want|, floor) (NaN is never
// near), at most a few, and returns the largest |got−want|/max(|want|, floor) seen.
func Near(t testing.TB, what string, got, want []float32, tol, floor float64) float64 {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d elements, want %d", what, len(got), len(want))
	}
	bad, worst := 0, 0.0
	for i := range want {
		scale := max(math.Abs(float64(want[i])), floor)
		d := math.Abs(float64(got[i]) - float64(want[i]))
		if math.IsNaN(d) {
			d = math.Inf(1)
		}
		worst = max(worst, d/scale)
		if !(d <= tol*scale) {
			if bad++; bad <= 5 {
				t.Errorf("%s[%d] = %v, want %v (±%.3g)", what, i, got[i], want[i], tol*scale)
			}
		}
	}
	if bad > 5 {
		t.Errorf("%s: %d of %d elements off", what, bad, len(want))
	}
	return worst
}
