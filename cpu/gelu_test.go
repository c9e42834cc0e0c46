package cpu

import (
	"math"
	"testing"
)

// geluTanh against PyTorch's formula in float64: within a few ulps of the result, or, where
// 1 + tanh cancels (large negative x), of 0.5·x, as PyTorch's own float32 tanh is.
func TestGELUTanhMatchesFormula(t *testing.T) {
	for _, x := range []float32{-12, -3.5, -1, -0.25, -1e-4, 0, 1e-4, 0.3, 1, 2.75, 9, 40} {
		xd := float64(x)
		want := 0.5 * xd * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(xd+0.044715*xd*xd*xd)))
		got := float64(geluTanh(x))
		if d := math.Abs(got - want); d > 4e-7*math.Abs(want)+2e-7*math.Abs(xd) {
			t.Errorf("geluTanh(%g) = %g, want %g (off by %g)", x, got, want, d)
		}
	}
}
