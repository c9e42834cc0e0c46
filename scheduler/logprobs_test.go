package scheduler

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"tfd/compute/computetest"
)

func TestLogprob(t *testing.T) {
	logits := []float32{0, float32(math.Log(3))}
	if got, _ := new(sampler).logprobs(logits, 1, 0); math.Abs(float64(got)-math.Log(0.75)) > 1e-6 {
		t.Fatalf("logprob = %v, want ln 0.75 = %v", got, math.Log(0.75))
	}
}

func TestTopLogprobs(t *testing.T) {
	logits := []float32{1, 3, 2, 3, -1}
	lp, top := new(sampler).logprobs(logits, 2, 3)
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
	if _, top := new(sampler).logprobs(logits, 0, 0); top != nil {
		t.Errorf("no alternatives asked, got %v", top)
	}
}

// TestLogprobsWideAreLogprobs checks that the log-probabilities of a large vocabulary, their
// exponentials taken in chunks side by side, are the one-goroutine sum's to the bit, for every
// chunking, on rows with ties, a −∞ and a peak far above the rest.
func TestLogprobsWideAreLogprobs(t *testing.T) {
	const vocab = 151936
	rows := map[string][]float32{"spread": scaled(computetest.Randn(7, vocab), 4)}
	tied := scaled(computetest.Randn(8, vocab), 2)
	for i := 0; i < vocab; i += 97 {
		tied[i] = tied[0]
	}
	tied[5] = float32(math.Inf(-1))
	rows["tied"] = tied
	peaked := scaled(computetest.Randn(9, vocab), 1)
	peaked[123456] = 40
	rows["peaked"] = peaked
	// A broken model's NaNs: one inside a chunk, and one at id 0, which batch.Argmax's peak is.
	nan := slices.Clone(tied)
	nan[70000] = float32(math.NaN())
	rows["NaN"] = nan
	nan0 := slices.Clone(peaked)
	nan0[0] = float32(math.NaN())
	rows["NaN first"] = nan0
	same := func(a, b []TokenLogprob) bool {
		return slices.EqualFunc(a, b, func(x, y TokenLogprob) bool {
			return x.Token == y.Token && math.Float32bits(x.Logprob) == math.Float32bits(y.Logprob)
		})
	}
	var s sampler
	for name, row := range rows {
		for _, token := range []int32{0, 5, 123456} {
			for _, n := range []int{0, 1, 20} {
				wantLP, wantTop := s.logprobsIn(row, token, n, 1)
				for _, parts := range []int{2, 3, 16} {
					lp, top := s.logprobsIn(row, token, n, parts)
					if math.Float32bits(lp) != math.Float32bits(wantLP) || !same(top, wantTop) {
						t.Errorf("%s, token %d, top %d, %d chunks: %v %v, want %v %v", name, token, n, parts, lp, top, wantLP, wantTop)
					}
				}
			}
		}
	}
}

// scaled returns x times k.
func scaled(x []float32, k float32) []float32 {
	for i := range x {
		x[i] *= k
	}
	return x
}

// BenchmarkLogprobs measures a pick's log-probabilities with the five likeliest over Qwen's
// vocabulary, with the exponentials on one goroutine and on every core.
func BenchmarkLogprobs(b *testing.B) {
	row := scaled(computetest.Randn(7, 151936), 4)
	for _, parts := range []int{1, 0} {
		b.Run(fmt.Sprintf("chunks=%d", parts), func(b *testing.B) {
			var s sampler
			for b.Loop() {
				if parts == 0 {
					s.logprobs(row, 42, 5)
				} else {
					s.logprobsIn(row, 42, 5, parts)
				}
			}
		})
	}
}
