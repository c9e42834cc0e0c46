package batch

import (
	"math"
	"math/rand/v2"
	"testing"
)

// argmaxLoop is Argmax's definition: move to i where logits[i] > logits[best], from best = 0.
func argmaxLoop(logits []float32) int32 {
	best := 0
	for i, l := range logits {
		if l > logits[best] {
			best = i
		}
	}
	return int32(best)
}

// TestArgmaxIsTheLoop checks Argmax against its defining loop on lengths around its four lanes,
// with ties, signed zeros, infinities and NaNs drawn often enough to land on every lane and on
// index 0.
func TestArgmaxIsTheLoop(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	special := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 1, 1, -1}
	for trial := range 20000 {
		n := r.IntN(13)
		if trial%10 == 0 {
			n = r.IntN(300)
		}
		x := make([]float32, n)
		for i := range x {
			if r.IntN(3) == 0 {
				x[i] = special[r.IntN(len(special))]
			} else {
				x[i] = float32(r.IntN(5)) - 2 // small integers: many ties
			}
		}
		if got, want := Argmax(x), argmaxLoop(x); got != want {
			t.Fatalf("Argmax(%v) = %d, the loop gives %d", x, got, want)
		}
	}
}

// BenchmarkArgmax picks from a vocabulary of 151,936 (Qwen3's), Argmax against its defining loop.
func BenchmarkArgmax(b *testing.B) {
	x := make([]float32, 151936)
	r := rand.New(rand.NewPCG(3, 4))
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	b.Run("lanes", func(b *testing.B) {
		for b.Loop() {
			Argmax(x)
		}
	})
	b.Run("loop", func(b *testing.B) {
		for b.Loop() {
			argmaxLoop(x)
		}
	})
}
