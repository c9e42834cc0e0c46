package scheduler

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"tfd/batch"
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
		if got, want := s.pick(logits, set, pos), batch.Argmax(logits); got != want {
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
			if got := ids(s.filter(logits, tt.set)); !slices.Equal(got, tt.want) {
				t.Fatalf("kept %v, want %v", got, tt.want)
			}
		})
	}
}

// ids returns the candidates' ids in order.
func ids(cands []candidate) []int32 {
	out := make([]int32, len(cands))
	for i, c := range cands {
		out[i] = c.id
	}
	slices.Sort(out)
	return out
}

// filterBySort is the filter written plainly: sort the whole vocabulary, then cut. top_p's total
// is summed over the candidates top_k left, in id order without top_k and best first with it, as
// filter sums it.
func filterBySort(logits []float32, set Sampling) []candidate {
	var cands []candidate
	for id, l := range logits {
		cands = append(cands, candidate{id: int32(id), score: float64(l)})
	}
	byID := slices.Clone(cands)
	slices.SortFunc(cands, better)
	topK := set.TopK > 0 && set.TopK < len(cands)
	if topK {
		cands = cands[:set.TopK]
	}
	t := float64(set.Temperature)
	for i := range cands {
		cands[i].score /= t
	}
	for i := range byID {
		byID[i].score /= t
	}
	if set.TopP > 0 && set.TopP < 1 {
		top, total := cands[0].score, 0.0
		sumOver := byID
		if topK {
			sumOver = cands
		}
		for _, c := range sumOver {
			total += math.Exp(c.score - top)
		}
		cands = cands[:prefixReaching(cands, top, total, float64(set.TopP), len(cands))]
	}
	if set.MinP > 0 {
		floor := cands[0].score + math.Log(float64(set.MinP))
		n := 1
		for n < len(cands) && cands[n].score >= floor {
			n++
		}
		cands = cands[:n]
	}
	return cands
}

// TestFilterKeepsWhatSortingKeeps: the heap's filter keeps exactly the candidates a sort of the
// whole vocabulary keeps, for random logits (ties included) and every combination of filters.
func TestFilterKeepsWhatSortingKeeps(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	var s sampler
	for trial := range 400 {
		logits := make([]float32, 1+r.IntN(3000))
		for i := range logits {
			logits[i] = float32(r.NormFloat64() * 3)
			if r.IntN(10) == 0 && i > 0 {
				logits[i] = logits[r.IntN(i)] // ties
			}
		}
		set := Sampling{Temperature: 0.2 + 1.5*r.Float32()}
		if r.IntN(2) == 0 {
			set.TopK = 1 + r.IntN(100)
		}
		if r.IntN(2) == 0 {
			set.TopP = 0.05 + 0.9*r.Float32()
		}
		if r.IntN(2) == 0 {
			set.MinP = 0.2 * r.Float32()
		}
		got, want := ids(s.filter(logits, set)), ids(filterBySort(logits, set))
		if !slices.Equal(got, want) {
			t.Fatalf("trial %d, %d logits, %+v: kept %d %v, sorting keeps %d %v", trial, len(logits), set, len(got), got, len(want), want)
		}
	}
}

// BenchmarkPick is one sampled pick on a vocabulary of Qwen's size (151,936), with the sampler's
// filter and with a sort of the whole vocabulary (the reference), for the usual settings, on a
// peaked row (logits of spread 3: a nucleus of hundreds at top_p 0.9) and for top_p on a flat one
// (spread 1.28, a random-init 8B's: a nucleus of about 45,000, a third of the vocabulary).
func BenchmarkPick(b *testing.B) {
	row := func(spread float64) []float32 {
		r := rand.New(rand.NewPCG(7, 8))
		logits := make([]float32, 151936)
		for i := range logits {
			logits[i] = float32(r.NormFloat64() * spread)
		}
		return logits
	}
	peaked, flat := row(3), row(1.28)
	for _, tc := range []struct {
		name   string
		set    Sampling
		logits []float32
	}{
		{"temperature", Sampling{Temperature: 0.7}, peaked},
		{"top_k 40", Sampling{Temperature: 0.7, TopK: 40}, peaked},
		{"top_p 0.9", Sampling{Temperature: 0.7, TopP: 0.9}, peaked},
		{"top_k 20 top_p 0.8", Sampling{Temperature: 0.7, TopK: 20, TopP: 0.8}, peaked},
		{"top_p 0.9 flat", Sampling{Temperature: 0.7, TopP: 0.9}, flat},
	} {
		b.Run(tc.name+"/sampler", func(b *testing.B) {
			var s sampler
			for i := range b.N {
				s.pick(tc.logits, tc.set, i)
			}
		})
		b.Run(tc.name+"/sort", func(b *testing.B) {
			for range b.N {
				filterBySort(tc.logits, tc.set)
			}
		})
	}
}

// TestTopPIsTheWholeHeaps: topP, which sums its histogram's bins whole and sorts only the bin
// where the sum reaches p, returns what a heap of every candidate returns (the best taken off one
// at a time until their shares reach p), the same candidates with the same scores, for peaked,
// spread and flat scores, ties, infinities and NaNs, and p from tiny to almost 1.
func TestTopPIsTheWholeHeaps(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	wholeHeap := func(s *sampler, cands []candidate, p float64) []candidate {
		top := cands[0].score
		for _, c := range cands {
			top = max(top, c.score)
		}
		var total float64
		for _, c := range cands {
			total += math.Exp(c.score - top)
		}
		var sum mass
		return s.best(cands, len(cands), func(c candidate) bool {
			sum = sum.plus(massOf(math.Exp(c.score-top) / total))
			return sum.reaches(massOf(p))
		})
	}
	var s, ref sampler
	for trial := range 300 {
		n := 1 + r.IntN(20000)
		scale := []float64{0.01, 0.5, 3, 10, 60}[trial%5]
		cands := make([]candidate, n)
		for i := range cands {
			cands[i] = candidate{id: int32(i), score: r.NormFloat64() * scale}
			switch k := r.IntN(200); {
			case k < 10 && i > 0:
				cands[i].score = cands[r.IntN(i)].score // ties
			case k == 10 && trial%7 == 0:
				cands[i].score = math.Inf(-1)
			case k == 11 && trial%11 == 0:
				cands[i].score = math.Inf(1)
			case k == 12 && trial%13 == 0:
				cands[i].score = math.NaN()
			}
		}
		p := []float64{1e-6, 0.1, 0.5, 0.9, 0.95, 0.999999}[r.IntN(6)]
		guarded := s.guarded
		got := slices.SortedFunc(slices.Values(s.topP(slices.Clone(cands), p, false)), better)
		if finite := !slices.ContainsFunc(cands, func(c candidate) bool { return math.IsNaN(c.score) || math.IsInf(c.score, 0) }); finite && s.guarded != guarded {
			t.Fatalf("trial %d, %d scores of scale %g, p %g: finite scores went through the guard's heap, not the bins", trial, n, scale, p)
		}
		want := wholeHeap(&ref, slices.Clone(cands), p)
		if len(got) != len(want) {
			t.Fatalf("trial %d, %d scores of scale %g, p %g: %d candidates, the whole heap gives %d", trial, n, scale, p, len(got), len(want))
		}
		for i := range got {
			if got[i].id != want[i].id || math.Float64bits(got[i].score) != math.Float64bits(want[i].score) {
				t.Fatalf("trial %d, %d scores of scale %g, p %g: candidate %d is %+v, the whole heap's %+v", trial, n, scale, p, i, got[i], want[i])
			}
		}
	}
}

// TestTopPWideIsTopP: top_p alone over a vocabulary large enough to split, made in chunks on
// every core (softmaxWide, then nucleus), is topP over the scaled candidates to the bit: the same
// candidates and scores, best score, softmax total and histogram, and the same answer, whatever
// the number of cores, for peaked, spread and flat scores, ties, infinities and NaNs.
func TestTopPWideIsTopP(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	var s, ref sampler
	for trial := range 40 {
		runtime.GOMAXPROCS(1 + trial%5)
		n := parallelDraw + r.IntN(160000)
		scale := []float64{0.01, 0.5, 3, 10}[trial%4]
		logits := make([]float32, n)
		for i := range logits {
			logits[i] = float32(r.NormFloat64() * scale)
			switch k := r.IntN(200); {
			case k < 10 && i > 0:
				logits[i] = logits[r.IntN(i)] // ties
			case k == 10 && trial%3 == 0:
				logits[i] = float32(math.Inf(-1))
			case k == 11 && trial%7 == 0:
				logits[i] = float32(math.Inf(1))
			case k == 12 && trial%9 == 0:
				logits[i] = float32(math.NaN())
			}
		}
		temp := 0.2 + 1.5*r.Float64()
		p := []float64{1e-6, 0.5, 0.9, 0.95, 0.999999}[r.IntN(5)]
		what := fmt.Sprintf("trial %d, %d logits of scale %g, %d cores, p %g", trial, n, scale, runtime.GOMAXPROCS(0), p)

		cands, top, total, parts := s.softmaxWide(logits, temp)
		var bins [topPBins]int32
		for _, w := range parts {
			for b, c := range w.bins {
				bins[b] += c
			}
		}
		want := ref.all(logits)
		wantTop := want[0].score / temp
		for i := range want {
			want[i].score /= temp
			wantTop = max(wantTop, want[i].score)
		}
		var wantPart widePart
		wantTotal := ref.softmax(want, wantTop, &wantPart)
		wantBins := wantPart.bins
		sameCandidates(t, what+": the candidates", cands, want)
		if math.Float64bits(top) != math.Float64bits(wantTop) || math.Float64bits(total) != math.Float64bits(wantTotal) || bins != wantBins {
			t.Fatalf("%s: best %v, total %v, bins differ %v; one by one: %v, %v", what, top, total, bins != wantBins, wantTop, wantTotal)
		}
		sameCandidates(t, what+": the nucleus", s.nucleus(cands, top, total, parts, p, s.terms[:n]), ref.topP(want, p, false))
	}
}

// sameCandidates fails unless got and want hold the same candidates in order, scores to the bit.
func sameCandidates(t *testing.T, what string, got, want []candidate) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d candidates, want %d", what, len(got), len(want))
	}
	for i := range got {
		if got[i].id != want[i].id || math.Float64bits(got[i].score) != math.Float64bits(want[i].score) {
			t.Fatalf("%s: candidate %d is %+v, want %+v", what, i, got[i], want[i])
		}
	}
}
