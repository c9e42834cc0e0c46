package scheduler

import (
	"math"
	"math/bits"
	"sync"
)

// topPWide is filter's top_p without top_k, temperature t applied, over a vocabulary large enough
// to split (parallelDraw tokens or more): topP's answer, every bit (TestTopPWideIsTopP).
func (s *sampler) topPWide(logits []float32, t, p float64) []candidate {
	cands, top, total, parts := s.softmaxWide(logits, t)
	return s.nucleus(cands, top, total, parts, p, s.terms[:len(logits)])
}

// softmaxWide returns what topP computes before it takes the nucleus: the candidates with their
// scores divided by t, the best score, the softmax's total and the chunks that made them, each
// with its histogram of how far below the best its scores are. The candidates, the scores, the
// terms of the total and each chunk's histogram are made in chunks on the sampler's cores
// (spread); the total is still summed one term after another in id order, and the best is a
// maximum, which no grouping changes, so every bit is topP's.
func (s *sampler) softmaxWide(logits []float32, t float64) (cands []candidate, top, total float64, wide []widePart) {
	n := len(logits)
	wide = s.partsOf(drawParts(n, s.spread()))
	if cap(s.cands) < n {
		s.cands = make([]candidate, n)
	}
	if cap(s.terms) < n {
		s.terms = make([]float64, n)
	}
	terms := s.terms[:n]
	cands = s.cands[:n]
	each(wide, n, func(w *widePart, lo, hi int) {
		top := float64(logits[lo]) / t
		for i := lo; i < hi; i++ {
			c := candidate{id: int32(i), score: float64(logits[i]) / t}
			cands[i] = c
			top = max(top, c.score)
		}
		w.top = top
	})
	top = wide[0].top
	for _, w := range wide[1:] {
		top = max(top, w.top)
	}
	each(wide, n, func(w *widePart, lo, hi int) {
		clear(w.bins[:])
		for i := lo; i < hi; i++ {
			x := cands[i].score - top
			terms[i] = math.Exp(x)
			if -x < topPBins/topPBinsPerNat { // false for NaN
				w.bins[int(-x*topPBinsPerNat)]++
			}
		}
	})
	for _, e := range terms {
		total += e
	}
	return cands, top, total, wide
}

// partsOf returns the sampler's first n chunks.
func (s *sampler) partsOf(n int) []widePart {
	if len(s.parts) < n {
		s.parts = make([]widePart, n)
	}
	return s.parts[:n]
}

// each runs f on the chunks of a pass over n candidates, chunk i on candidates i·n/len(parts) up
// to (i+1)·n/len(parts), side by side where there are several.
func each(parts []widePart, n int, f func(w *widePart, lo, hi int)) {
	if len(parts) == 1 {
		f(&parts[0], 0, n)
		return
	}
	var wg sync.WaitGroup
	for i := range parts {
		wg.Go(func() { f(&parts[i], i*n/len(parts), (i+1)*n/len(parts)) })
	}
	wg.Wait()
}

// widePart is one chunk of a pass of top_p's: its best score, its histogram, and in nucleus,
// where its next candidate of each bin goes and its sums of each bin's shares.
type widePart struct {
	top  float64
	bins [topPBins]int32
	next [topPBins]int32
	sums [topPBins]mass
}

// A mass is a sum of softmax shares (terms over the total) in fixed point, massBits bits after
// the point, each share truncated to it: top_p adds shares with integer additions, so that a sum,
// and the nucleus it decides, does not depend on the order in which the shares are added, and a
// nucleus can be summed bin by bin without sorting it (nucleus). A share's truncation, under
// 2⁻¹²⁰, moves a sum of 152K shares by under 2⁻¹⁰² where a float64's rounding moved it by up to
// 2⁻⁵³ of the sum a term.
type mass struct{ hi, lo uint64 }

const massBits = 120

// massOf is v in fixed point, truncated; a NaN (a broken row's share) or a negative is zero,
// and anything from 256 on is the largest share (no share of a softmax is above 1).
func massOf(v float64) mass {
	if !(v > 0) {
		return mass{}
	}
	if v >= 256 {
		return mass{hi: math.MaxUint64, lo: math.MaxUint64}
	}
	b := math.Float64bits(v)
	e, m := int(b>>52), b&(1<<52-1) // v = m·2^(e−1075), the leading bit added for a normal v
	if e == 0 {
		e = 1
	} else {
		m |= 1 << 52
	}
	switch shift := e - 1075 + massBits; {
	case shift <= -53:
		return mass{}
	case shift < 0:
		return mass{lo: m >> -shift}
	case shift < 64:
		return mass{hi: m >> (64 - shift), lo: m << shift}
	default:
		return mass{hi: m << (shift - 64)}
	}
}

// plus returns a + b.
func (a mass) plus(b mass) mass {
	lo, carry := bits.Add64(a.lo, b.lo, 0)
	hi, _ := bits.Add64(a.hi, b.hi, carry)
	return mass{hi, lo}
}

// reaches reports whether a ≥ b.
func (a mass) reaches(b mass) bool { return a.hi > b.hi || a.hi == b.hi && a.lo >= b.lo }
