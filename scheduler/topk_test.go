package scheduler

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestTopKIsTheSortsPrefix: top_k by chunks keeps the first k of the whole vocabulary sorted by
// better, in that order, over several chunks: random logits with ties (within and across chunks),
// ±∞, NaN, and every k from 1 to the largest the chunks take.
func TestTopKIsTheSortsPrefix(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, n := range []int{2 * topKChunk, 151936} {
		logits := make([]float32, n)
		for i := range logits {
			logits[i] = float32(r.NormFloat64() * 3)
			switch r.IntN(200) {
			case 0:
				logits[i] = logits[r.IntN(i+1)] // a tie
			case 1:
				logits[i] = float32(math.Inf(1))
			case 2:
				logits[i] = float32(math.Inf(-1))
			case 3:
				logits[i] = float32(math.NaN())
			}
		}
		all := make([]candidate, n)
		for i, l := range logits {
			all[i] = candidate{id: int32(i), score: float64(l)}
		}
		slices.SortFunc(all, better)
		var s sampler
		for _, k := range []int{1, 20, 40, 1000, topKChunk / 4, topKChunk/4 + 1} {
			got := s.topK(logits, k)
			if !slices.Equal(got, all[:k]) {
				t.Errorf("%d tokens, k = %d: %v…, the sort's first %v…", n, k, head(got), head(all[:k]))
			}
		}
	}
}

func head(c []candidate) string { return fmt.Sprint(c[:min(len(c), 5)]) }

// TestNaNComesLast: better puts a NaN score after every number and orders NaNs by id.
func TestNaNComesLast(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(-1)
	for _, c := range []struct {
		a, b candidate
		want int
	}{
		{candidate{1, inf}, candidate{0, nan}, -1},
		{candidate{0, nan}, candidate{1, inf}, 1},
		{candidate{3, nan}, candidate{2, nan}, 1},
		{candidate{2, 1}, candidate{1, 1}, 1},
		{candidate{2, 2}, candidate{1, 1}, -1},
	} {
		if got := better(c.a, c.b); got != c.want {
			t.Errorf("better(%v, %v) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}
