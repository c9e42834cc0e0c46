package cpu

import (
	"math"
	"testing"

	"tfd/compute/computetest"
)

// expOf returns the exponential the current kernels compute for each x, through softmaxExp with
// m = 0 (the sum is discarded).
func expOf(xs []float32) []float32 {
	e := append([]float32(nil), xs...)
	softmaxExp(e, 0)
	return e
}

func TestExp(t *testing.T) {
	forKernels(t, func(t *testing.T) {
		var xs []float32
		for x := -90.0; x < 90; x += 0.0137 {
			xs = append(xs, float32(x))
		}
		for _, x := range []float64{0, -1e-30, 1e-30, expLo, expLo + 1e-5, -89, 88.3, 88.37, 89, 1e9, -1e9} {
			xs = append(xs, float32(x))
		}
		got := expOf(xs)
		for i, x := range xs {
			want := math.Exp(float64(x))
			switch g := float64(got[i]); {
			case x < expLo:
				if g != 0 {
					t.Errorf("exp(%v) = %v, want 0 below expLo", x, g)
				}
			case x > 88.38:
				if !math.IsInf(g, 1) {
					t.Errorf("exp(%v) = %v, want +Inf past expOver", x, g)
				}
			case x > expOver && math.IsInf(g, 1):
			case math.Abs(g-want) > 2.5e-7*want && want >= 0x1p-126:
				t.Errorf("exp(%v) = %v, want %v (%.2g relative)", x, g, want, (g-want)/want)
			}
		}
		special := expOf([]float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))})
		if !math.IsNaN(float64(special[0])) || !math.IsInf(float64(special[1]), 1) || special[2] != 0 {
			t.Errorf("exp(NaN, +Inf, −Inf) = %v", special)
		}
	})
}

// An element's exponential, and its SiLU, have the same bits whether it sits in the vector part
// of a slice or in its tail.
func TestExpPositionInvariance(t *testing.T) {
	forKernels(t, func(t *testing.T) {
		xs, us := computetest.Randn(1, 37), computetest.Randn(2, 37)
		for i := range xs {
			xs[i] *= 6
		}
		all := expOf(xs)
		silu := make([]float32, len(xs))
		siluMul(silu, xs, us)
		for i := range xs {
			for _, start := range []int{0, i % 8, i} {
				e := expOf(xs[start : i+1])
				computetest.SameBits(t, name("exp", i, start), e[i-start:], all[i:i+1])
				s := make([]float32, i+1-start)
				siluMul(s, xs[start:i+1], us[start:i+1])
				computetest.SameBits(t, name("silu", i, start), s[i-start:], silu[i:i+1])
			}
		}
	})
}

// The softmax sum is the lane sum: element j into lane j%8, the lanes in the fixed tree.
func TestSoftmaxSumOrder(t *testing.T) {
	forKernels(t, func(t *testing.T) {
		for _, n := range []int{1, 7, 8, 9, 29} {
			e := computetest.Randn(uint64(n), n)
			sum := softmaxExp(e, 0.5)
			var lanes [8]float32
			for j, v := range e {
				lanes[j%8] += v
			}
			want := ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]))
			computetest.SameBits(t, name("sum", n), []float32{sum}, []float32{want})
		}
	})
}
