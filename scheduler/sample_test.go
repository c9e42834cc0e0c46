package scheduler

import (
	"math"
	"math/rand/v2"
	"testing"
)

func randomLogits(r *rand.Rand, n int) []float32 {
	l := make([]float32, n)
	for i := range l {
		l[i] = float32(r.NormFloat64() * 3)
	}
	return l
}

func TestGreedyTiesGoToLowestID(t *testing.T) {
	var s sampler
	logits := []float32{1, 5, 2, 5, 5}
	if got := s.pick(logits, Sampling{}, 0); got != 1 {
		t.Fatalf("greedy pick = %d, want 1 (first of the tied maxima)", got)
	}
}

func TestTopKOneIsGreedy(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var s sampler
	for pos := range 200 {
		logits := randomLogits(r, 50)
		set := Sampling{Temperature: 1.3, TopK: 1, Seed: uint64(pos)}
		if got, want := s.pick(logits, set, pos), argmax(logits); got != want {
			t.Fatalf("pos %d: top_k=1 picked %d, argmax is %d", pos, got, want)
		}
	}
}

func TestPickIsAFunctionOfSeedAndPosition(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	logits := randomLogits(r, 1000)
	set := Sampling{Temperature: 0.8, TopP: 0.9, TopK: 100, MinP: 0.01, Seed: 42}
	var a, b sampler
	for pos := range 100 {
		// A second sampler with other history must agree: no hidden state leaks into a pick.
		b.pick(randomLogits(r, 17), Sampling{Temperature: 1, Seed: 9}, pos)
		if x, y := a.pick(logits, set, pos), b.pick(logits, set, pos); x != y {
			t.Fatalf("pos %d: picks differ: %d vs %d", pos, x, y)
		}
	}
	differ := 0
	for pos := range 100 {
		other := set
		other.Seed = 43
		if a.pick(logits, set, pos) != a.pick(logits, other, pos) {
			differ++
		}
	}
	if differ == 0 {
		t.Fatal("changing the seed never changed a pick")
	}
}

// TestDrawsFollowSoftmax checks that keyed Gumbel draws over many positions reproduce the
// softmax distribution of the scaled logits.
func TestDrawsFollowSoftmax(t *testing.T) {
	logits := []float32{2, 1, 0.5, 0, -1}
	const temp, draws = 0.7, 200000
	var s sampler
	counts := make([]int, len(logits))
	for pos := range draws {
		counts[s.pick(logits, Sampling{Temperature: temp, Seed: 7}, pos)]++
	}
	var total float64
	for _, l := range logits {
		total += math.Exp(float64(l) / temp)
	}
	for i, l := range logits {
		p := math.Exp(float64(l)/temp) / total
		got := float64(counts[i]) / draws
		sigma := math.Sqrt(p * (1 - p) / draws)
		if math.Abs(got-p) > 5*sigma {
			t.Errorf("token %d drawn with frequency %.4f, softmax gives %.4f (±%.4f)", i, got, p, sigma)
		}
	}
}

func TestFilters(t *testing.T) {
	// Probabilities at temperature 1 are proportional to e^logit.
	logits := []float32{float32(math.Log(0.5)), float32(math.Log(0.3)), float32(math.Log(0.15)), float32(math.Log(0.05))}
	tests := []struct {
		name string
		set  Sampling
		want []int32
	}{
		{"all", Sampling{Temperature: 1}, []int32{0, 1, 2, 3}},
		{"top_k 2", Sampling{Temperature: 1, TopK: 2}, []int32{0, 1}},
		{"top_p 0.79 keeps the prefix reaching it", Sampling{Temperature: 1, TopP: 0.79}, []int32{0, 1}},
		{"top_p 0.81", Sampling{Temperature: 1, TopP: 0.81}, []int32{0, 1, 2}},
		{"min_p 0.25 keeps p ≥ 0.125", Sampling{Temperature: 1, MinP: 0.25}, []int32{0, 1, 2}},
		{"min_p 0.7", Sampling{Temperature: 1, MinP: 0.7}, []int32{0}},
		{"top_k then min_p", Sampling{Temperature: 1, TopK: 3, MinP: 0.05}, []int32{0, 1, 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s sampler
			got := s.filter(logits, tt.set)
			if len(got) != len(tt.want) {
				t.Fatalf("kept %d candidates %v, want %v", len(got), got, tt.want)
			}
			for i, c := range got {
				if c.id != tt.want[i] {
					t.Fatalf("kept %v, want %v", got, tt.want)
				}
			}
		})
	}
}

func TestLogprob(t *testing.T) {
	logits := []float32{0, float32(math.Log(3))}
	if got := logprob(logits, 1); math.Abs(float64(got)-math.Log(0.75)) > 1e-6 {
		t.Fatalf("logprob = %v, want ln 0.75 = %v", got, math.Log(0.75))
	}
}

func TestTopLogprobs(t *testing.T) {
	logits := []float32{1, 3, 2, 3, -1}
	lp, top := logprobs(logits, 2, 3)
	var total float64
	for _, l := range logits {
		total += math.Exp(float64(l))
	}
	want := func(id int) float32 { return float32(float64(logits[id]) - math.Log(total)) }
	if math.Abs(float64(lp-want(2))) > 1e-6 {
		t.Errorf("logprob of token 2 = %v, want %v", lp, want(2))
	}
	if len(top) != 3 || top[0].Token != 1 || top[1].Token != 3 || top[2].Token != 2 {
		t.Fatalf("top 3 = %+v, want tokens 1, 3 (the tie, lower id first), then 2", top)
	}
	for _, e := range top {
		if math.Abs(float64(e.Logprob-want(int(e.Token)))) > 1e-6 {
			t.Errorf("token %d: logprob %v, want %v", e.Token, e.Logprob, want(int(e.Token)))
		}
	}
	if _, top := logprobs(logits, 0, 0); top != nil {
		t.Errorf("no alternatives asked, got %v", top)
	}
}
