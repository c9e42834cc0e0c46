package cpu

import (
	"math"
	"testing"
)

// clampedSwiGLU against GPT-OSS's formula in float64 from the float32 product alpha·g (which
// transformers rounds too, and whose rounding exp magnifies for large |g|), with gates and ups on
// both sides of the limit: within a few ulps of the result.
func TestClampedSwiGLUMatchesFormula(t *testing.T) {
	const alpha, limit = 1.702, 7
	gates := []float32{-30, -7.5, -1, -0.1, 0, 0.2, 1, 6.9, 7, 7.1, 40}
	ups := []float32{-9, -7, -0.5, 0, 0.5, 6.99, 12}
	for _, g := range gates {
		for _, u := range ups {
			dst := []float32{0}
			clampedSwiGLU(dst, []float32{g}, []float32{u}, alpha, limit)
			gd := min(float64(g), limit)
			ud := max(min(float64(u), limit), -limit)
			want := (ud + 1) * gd / (1 + math.Exp(-float64(float32(gd)*alpha)))
			if d := math.Abs(float64(dst[0]) - want); d > 1e-6*math.Abs(want)+1e-30 {
				t.Errorf("clampedSwiGLU(%g, %g) = %g, want %g (off by %g)", g, u, dst[0], want, d)
			}
		}
	}
}
