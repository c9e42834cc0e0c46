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
		for _, shape := range []string{"random", "shuffled", "+inf ties", "-inf", "nan", "nan and -inf"} {
			cands := make([]candidate, n)
			for i := range cands {
				cands[i] = candidate{id: int32(i), score: r.NormFloat64() * 3}
			}
			switch shape {
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
			for _, pos := range []int{0, 9} {
				if got, want := gumbelArgmax(len(cands), func(i int) (int32, float64) { return cands[i].id, cands[i].score }, 42, pos), drawOneByOne(cands, 42, pos); got != want {
					t.Errorf("%d candidates, %s, position %d: drew %d, one by one %d", n, shape, pos, got, want)
				}
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
			gumbelArgmax(len(cands), func(i int) (int32, float64) { return cands[i].id, cands[i].score }, 1, i)
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
