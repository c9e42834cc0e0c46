package scheduler

import (
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestMassIsExact: massOf truncates a share to a multiple of 2⁻¹²⁰, as math/big says, and sums of
// masses are the same whatever the order of their terms (for shares from 1 down past the
// fixed point's last bit, subnormals, zeros, NaNs and values past 1); a float64 sum of the same
// shares is not, which is why top_p adds masses.
func TestMassIsExact(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	asBig := func(m mass) *big.Int {
		x := new(big.Int).SetUint64(m.hi)
		return x.Lsh(x, 64).Or(x, new(big.Int).SetUint64(m.lo))
	}
	truncated := func(v float64) *big.Int {
		x, _ := new(big.Float).SetMantExp(new(big.Float).SetFloat64(v), massBits).Int(nil)
		return x
	}
	shares := []float64{1, 0.5, 1.0 / 3, 0x1p-60, 0x1p-119, 0x1p-120, 0x1p-121, 0x1.8p-119, 5e-324, 0, math.NaN(), -1, 2, 255.5}
	for range 2000 {
		shares = append(shares, math.Exp(-40*r.Float64())/(1+1e5*r.Float64()))
	}
	for _, v := range shares {
		want := big.NewInt(0)
		if v > 0 {
			want = truncated(v)
		}
		if got := asBig(massOf(v)); got.Cmp(want) != 0 {
			t.Fatalf("massOf(%g) = %v, want %v", v, got, want)
		}
	}
	floatSumsDiffer := false
	for trial := range 200 {
		terms := slices.Clone(shares[14+10*trial : 14+10*trial+10])
		var first mass
		var firstFloat float64
		for _, v := range terms {
			first, firstFloat = first.plus(massOf(v)), firstFloat+v
		}
		r.Shuffle(len(terms), func(i, j int) { terms[i], terms[j] = terms[j], terms[i] })
		var again mass
		var againFloat float64
		for _, v := range terms {
			again, againFloat = again.plus(massOf(v)), againFloat+v
		}
		if again != first || !again.reaches(first) || !first.reaches(again) {
			t.Fatalf("trial %d: %v summed in another order is %v", trial, first, again)
		}
		floatSumsDiffer = floatSumsDiffer || againFloat != firstFloat
	}
	if !floatSumsDiffer {
		t.Fatal("no float64 sum of 200 depended on the order of its terms: the check cannot tell")
	}
	if a, b := massOf(0.5), massOf(0.25); !a.reaches(b) || b.reaches(a) || !a.reaches(a) {
		t.Fatal("reaches does not order 0.5 above 0.25")
	}
}
