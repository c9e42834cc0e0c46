package scheduler

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
)

// drawOneByOne is the draw as one loop over the candidates, its noise hashed from scratch for
// each: the reference gumbelArgmax must equal whatever its chunking.
func drawOneByOne(cands []candidate, seed uint64, pos int) int32 {
	best, bestKey := cands[0].id, math.Inf(-1)
	for _, c := range cands {
		h := mix(mix(mix(seed)^uint64(pos)) ^ uint64(uint32(c.id)))
		u := (float64(h>>11) + 0.5) / (1 << 53)
		key := c.score - math.Log(-math.Log(u))
		if key > bestKey || (key == bestKey && c.id < best) {
			best, bestKey = c.id, key
		}
	}
	return best
}

// TestDrawIsTheOneByOneDraw: gumbelArgmax, one goroutine or many, picks the reference's token:
// random scores, candidates out of id order (as a filter leaves them), ties of +∞ scores (the
// lower id), rows of −∞ and NaN scores (cands[0] where no key is a number).
func TestDrawIsTheOneByOneDraw(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{1, 7, 1000, parallelDraw - 1, parallelDraw, 151936} {
		for _, shape := range []string{"random", "shuffled", "+inf ties", "-inf", "nan", "nan and -inf", "flat", "peaked", "spread", "ties"} {
			cands := make([]candidate, n)
			for i := range cands {
				cands[i] = candidate{id: int32(i), score: r.NormFloat64() * 3}
			}
			switch shape {
			case "flat": // every key within a few of the best: few candidates ruled out
				for i := range cands {
					cands[i].score = r.NormFloat64() * 0.01
				}
			case "peaked": // a language model's: a few tokens far above the rest
				for i := range cands {
					if r.IntN(1000) == 0 {
						cands[i].score += 25 + 3*r.NormFloat64()
					}
				}
			case "spread": // nearly every candidate ruled out by d ≥ 40
				for i := range cands {
					cands[i].score *= 20
				}
			case "ties": // equal scores: the lower id among equal keys
				for i := range cands {
					cands[i].score = float64(r.IntN(4))
				}
			case "shuffled":
				r.Shuffle(n, func(a, b int) { cands[a], cands[b] = cands[b], cands[a] })
			case "+inf ties":
				r.Shuffle(n, func(a, b int) { cands[a], cands[b] = cands[b], cands[a] })
				cands[n-1].score, cands[n/2].score = math.Inf(1), math.Inf(1)
			case "-inf", "nan", "nan and -inf":
				for i := range cands {
					switch {
					case shape == "-inf", shape == "nan and -inf" && i%3 == 1:
						cands[i].score = math.Inf(-1)
					default:
						cands[i].score = math.NaN()
					}
				}
				r.Shuffle(n, func(a, b int) { cands[a], cands[b] = cands[b], cands[a] })
			}
			for _, pos := range []int{0, 9, 1 << 20} {
				if got, want := gumbelArgmax(len(cands), func(i int) (int32, float64) { return cands[i].id, cands[i].score }, 42, pos, runtime.GOMAXPROCS(0)), drawOneByOne(cands, 42, pos); got != want {
					t.Errorf("%d candidates, %s, position %d: drew %d, one by one %d", n, shape, pos, got, want)
				}
			}
		}
	}
}

// TestLosesToRulesOutOnlyLosers: a candidate whose key equals the best so far, or is above it
// by the least step, is never ruled out, for noise from the smallest u to the largest and scores
// from tiny to huge; and one far below is.
func TestLosesToRulesOutOnlyLosers(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	// The smallest and largest u unitAt makes (the largest rounds to 1), 1 − 2⁻⁵³ below it, and
	// the rest.
	us := []float64{0.5 / (1 << 53), 1, 1 - 1.0/(1<<53), 0.5, 1 - 1e-9, 1e-300}
	for range 200000 {
		us = append(us[:6], unitAt(r.Uint64(), int32(r.Uint32())))
		for _, u := range us {
			score := r.NormFloat64() * math.Pow(10, float64(r.IntN(8)-3))
			k := score + gumbel(u)
			for _, b := range []float64{k, math.Nextafter(k, math.Inf(-1))} {
				if losesTo(b, score, u) {
					t.Fatalf("score %v, u %v (key %v): ruled out against %v", score, u, k, b)
				}
			}
			if u < 0.99 && !losesTo(k+45, score, u) {
				t.Fatalf("score %v, u %v (key %v): not ruled out against %v", score, u, k, k+45)
			}
		}
	}
}

// BenchmarkDraw is the draw over a vocabulary of Qwen's size, the temperature's path.
func BenchmarkDraw(b *testing.B) {
	r := rand.New(rand.NewPCG(7, 8))
	cands := make([]candidate, 151936)
	for i := range cands {
		cands[i] = candidate{id: int32(i), score: r.NormFloat64() * 3}
	}
	b.Run("one by one", func(b *testing.B) {
		for i := range b.N {
			drawOneByOne(cands, 1, i)
		}
	})
	b.Run(fmt.Sprintf("chunked, %d procs", min(len(cands)/drawChunk, runtime.GOMAXPROCS(0))), func(b *testing.B) {
		for i := range b.N {
			gumbelArgmax(len(cands), func(i int) (int32, float64) { return cands[i].id, cands[i].score }, 1, i, runtime.GOMAXPROCS(0))
		}
	})
}

// TestUnfilteredPickReadsTheLogits: a pick that filters nothing (temperature alone, or a top_k of
// the whole vocabulary) draws straight from the logits, and gets filter's candidates' token.
func TestUnfilteredPickReadsTheLogits(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{5, parallelDraw + 3} {
		logits := make([]float32, n)
		for i := range logits {
			logits[i] = float32(r.NormFloat64() * 4)
		}
		logits[1], logits[n-2] = float32(math.Inf(-1)), float32(math.NaN())
		for _, set := range []Sampling{{Temperature: 0.7, Seed: 5}, {Temperature: 1.3, TopK: n, TopP: 1, Seed: 6}} {
			if set.filters(n) {
				t.Fatalf("%+v filters %d tokens", set, n)
			}
			var s sampler
			for pos := range 3 {
				want := drawOneByOne(s.filter(logits, set), set.Seed, pos)
				if got := s.pick(logits, set, pos); got != want {
					t.Errorf("%d tokens, %+v, position %d: picked %d, from filter's candidates %d", n, set, pos, got, want)
				}
			}
		}
	}
}
