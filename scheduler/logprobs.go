package scheduler

import (
	"math"
	"sync"

	"tfd/batch"
)

// logprobs returns the natural log of token's softmax probability over the raw logits and the n
// likeliest tokens with theirs, likeliest first, ties to the lower id.
//
// The softmax's total is summed one term after another in id order. Over a large vocabulary its
// exponentials, one a token, cost about 1.5 ms a row of 151,936 on one core of the development
// machine (BenchmarkLogprobs), more than the rest of a lone stream's pick: the best logit, the
// exponentials and each chunk's likeliest are taken in chunks on the cores the sampler may use
// (spread), the terms kept in the sampler and still summed in id order, so every bit is the
// one-goroutine answer's (TestLogprobsWideAreLogprobs).
func (s *sampler) logprobs(logits []float32, token int32, n int) (float32, []TokenLogprob) {
	return s.logprobsIn(logits, token, n, drawParts(len(logits), s.spread()))
}

// logprobsIn is logprobs in parts chunks side by side.
func (s *sampler) logprobsIn(logits []float32, token int32, n, parts int) (float32, []TokenLogprob) {
	n = min(n, MaxTopLogprobs, len(logits))
	var peak, total float64
	var best []int32
	if parts <= 1 {
		peak = float64(logits[batch.Argmax(logits)])
		for _, l := range logits {
			total += math.Exp(float64(l) - peak)
		}
		best = likeliest(make([]int32, 0, n+1), logits, 0, len(logits), n)
	} else {
		peak, total, best = s.logprobsWide(logits, n, parts)
	}
	norm := peak + math.Log(total)
	if n <= 0 {
		return float32(float64(logits[token]) - norm), nil
	}
	top := make([]TokenLogprob, len(best))
	for i, id := range best {
		top[i] = TokenLogprob{Token: id, Logprob: float32(float64(logits[id]) - norm)}
	}
	return float32(float64(logits[token]) - norm), top
}

// likeliest inserts the ids lo … hi−1 of logits, in that order, into best, a list of at most n
// ids sorted likeliest first, and returns it: an id goes after every id whose logit is not
// strictly below its own, so equal logits keep the order the ids came in.
func likeliest(best []int32, logits []float32, lo, hi, n int) []int32 {
	if n <= 0 {
		return best
	}
	for id := lo; id < hi; id++ {
		best = insertLikely(best, logits, int32(id), n)
	}
	return best
}

// insertLikely is likeliest's step for one id; best has room for n+1.
func insertLikely(best []int32, logits []float32, id int32, n int) []int32 {
	at := len(best)
	for at > 0 && logits[best[at-1]] < logits[id] { // strict: an equal logit keeps the earlier id first
		at--
	}
	if at == n {
		return best
	}
	best = append(best, 0)
	copy(best[at+1:], best[at:])
	best[at] = id
	if len(best) > n {
		best = best[:n]
	}
	return best
}

// logprobsWide is logprobsIn's peak, total and likeliest ids, in parts chunks side by side.
//
// The peak is batch.Argmax's logit: logits[0] where that is NaN, else the largest of the numbers.
// The likeliest are each chunk's, inserted chunk after chunk: every chunk's ids are above the
// last's and its list holds equal logits in id order, so the merged list is the one-goroutine
// insertion's whenever logits holds no NaN (a NaN is never moved past, so it makes the answer
// depend on where it stands): then the ids are inserted one by one, as there.
func (s *sampler) logprobsWide(logits []float32, n, parts int) (peak, total float64, best []int32) {
	if cap(s.terms) < len(logits) {
		s.terms = make([]float64, len(logits))
	}
	if len(s.lpParts) < parts {
		s.lpParts = make([]lpPart, parts)
	}
	terms, chunks := s.terms[:len(logits)], s.lpParts[:parts]
	each := func(f func(c *lpPart, lo, hi int)) {
		var wg sync.WaitGroup
		for p := range chunks {
			wg.Go(func() { f(&chunks[p], p*len(logits)/parts, (p+1)*len(logits)/parts) })
		}
		wg.Wait()
	}
	each(func(c *lpPart, lo, hi int) {
		c.top, c.nan = float32(math.Inf(-1)), false
		for _, l := range logits[lo:hi] {
			if l > c.top { // as batch.Argmax compares: a NaN is passed over, −0 does not replace +0
				c.top = l
			}
			c.nan = c.nan || l != l
		}
		c.best = likeliest(c.best[:0], logits, lo, hi, n)
	})
	top, nan := logits[0], false
	for _, c := range chunks {
		if c.top > top {
			top = c.top
		}
		nan = nan || c.nan
	}
	peak = float64(top)
	each(func(c *lpPart, lo, hi int) {
		for i, l := range logits[lo:hi] {
			terms[lo+i] = math.Exp(float64(l) - peak)
		}
	})
	for _, e := range terms {
		total += e
	}
	best = make([]int32, 0, n+1)
	if nan {
		return peak, total, likeliest(best, logits, 0, len(logits), n)
	}
	for _, c := range chunks {
		for _, id := range c.best {
			best = insertLikely(best, logits, id, n)
		}
	}
	return peak, total, best
}

// lpPart is one chunk's share of logprobsWide: its largest number, whether it holds a NaN, and
// its likeliest ids.
type lpPart struct {
	top  float32
	nan  bool
	best []int32
}
