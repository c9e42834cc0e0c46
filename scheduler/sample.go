package scheduler

import (
	"cmp"
	"math"
	"runtime"
	"slices"

	"tfd/batch"
)

// A sampler picks one token from a row of logits. Its choice depends only on the logits, the
// settings and the token's absolute position (through the keyed noise), never on other rows or on
// drafting, so a reply can be replayed from its seed. A sampler reuses its buffers and is not safe
// for concurrent use.
type sampler struct {
	cands  []candidate
	sorted []candidate // the best candidates taken off the heap, best first
	terms  []float64   // softmaxWide's and logprobsWide's terms of the softmax's total, by id
	parts  []widePart  // softmax's and softmaxWide's chunks
	// lpParts are logprobsWide's chunks.
	lpParts []lpPart
	// penalised is a row as a stream's penalties leave it, for picks made ahead (pickJobs).
	penalised []float32
	// cores is how many goroutines one pick may spread over (0: GOMAXPROCS); pickJobs, which
	// runs picks side by side, gives each its share.
	cores int
	// guarded counts the nuclei taken off a heap of every candidate (nucleus's guard), which a
	// row of finite scores never needs: a test's window on the bins' sums.
	guarded int
}

// spread returns how many goroutines one of s's picks may spread over.
func (s *sampler) spread() int {
	if s.cores > 0 {
		return s.cores
	}
	return runtime.GOMAXPROCS(0)
}

type candidate struct {
	id    int32
	score float64 // logit, then logit/temperature
}

// better orders candidates by score, highest first, ties to the lower token id; a NaN score
// (a broken model's) comes after every number. It is a strict total order, so the best n
// candidates and their order do not depend on how they are searched.
func better(a, b candidate) int {
	switch {
	case a.score > b.score:
		return -1
	case a.score < b.score:
		return 1
	case a.score == b.score:
		return cmp.Compare(a.id, b.id)
	}
	// One of them or both are NaN.
	if an, bn := math.IsNaN(a.score), math.IsNaN(b.score); an != bn {
		if an {
			return 1
		}
		return -1
	}
	return cmp.Compare(a.id, b.id)
}

// pick returns the token chosen at absolute position pos from logits.
//
// Greedy settings take the argmax. Otherwise the filters run in a fixed order — top_k,
// temperature, top_p, min_p — and the token is the argmax, over those kept, of the scaled logit
// plus Gumbel noise keyed by (seed, pos, id): a draw from the filtered softmax that is a pure
// function of its inputs.
func (s *sampler) pick(logits []float32, set Sampling, pos int) int32 {
	if set.Greedy() {
		return batch.Argmax(logits)
	}
	if !set.filters(len(logits)) {
		// Every token is a candidate: the draw reads the logits, scaled as filter would, with no
		// candidates written first (a pass over a vocabulary that cost as much as a parallel draw).
		t := float64(set.Temperature)
		return gumbelArgmax(len(logits), func(i int) (int32, float64) { return int32(i), float64(logits[i]) / t }, set.Seed, pos, s.spread())
	}
	cands := s.filter(logits, set)
	return gumbelArgmax(len(cands), func(i int) (int32, float64) { return cands[i].id, cands[i].score }, set.Seed, pos, s.spread())
}

// filters reports whether top_k, top_p or min_p leave out any of a vocabulary of n tokens'
// candidates (filter's conditions).
func (s Sampling) filters(n int) bool {
	return s.TopK > 0 && s.TopK < n || s.TopP > 0 && s.TopP < 1 || s.MinP > 0
}

// filter returns the candidates left by top_k, temperature, top_p and min_p, with
// temperature-scaled scores, in no particular order (pick does not depend on it).
//
// Only top_k and top_p need candidates in order, and only the best few of them: those come off a
// heap one at a time (ties to the lower id, as better orders them) instead of from a sort of the
// whole vocabulary, which on a large vocabulary cost more than the rest of a sampled step.
func (s *sampler) filter(logits []float32, set Sampling) []candidate {
	var cands []candidate
	sorted, scaled := false, false // scaled: the scores are divided by the temperature already
	t := float64(set.Temperature)
	topP := set.TopP > 0 && set.TopP < 1
	switch {
	case set.TopK > 0 && set.TopK < len(logits): // filters' conditions, one by one
		cands, sorted = s.topK(logits, set.TopK), true
	case topP && len(logits) >= parallelDraw:
		// top_p alone over a large vocabulary: temperature and top_p in chunks on the sampler's cores (spread).
		cands, scaled, topP = s.topPWide(logits, t, float64(set.TopP)), true, false
	default:
		cands = s.all(logits)
	}
	if !scaled {
		for i := range cands {
			cands[i].score /= t
		}
	}
	if topP {
		cands = s.topP(cands, float64(set.TopP), sorted)
	}
	if set.MinP > 0 {
		// p_i ≥ min_p·p_max ⇔ score_i − score_max ≥ ln(min_p).
		top := cands[0].score
		if !sorted {
			for _, c := range cands {
				top = max(top, c.score)
			}
		}
		floor := top + math.Log(float64(set.MinP))
		cands = slices.DeleteFunc(cands, func(c candidate) bool { return c.score < floor })
	}
	return cands
}

// topP returns the smallest set of the best candidates whose softmax probability reaches p (at
// least one): best first when cands are sorted, else in no particular order. The softmax's total
// is summed over cands in their order (best first when sorted, else by token id); the best are
// taken until their shares, added exactly (mass), reach p.
func (s *sampler) topP(cands []candidate, p float64, sorted bool) []candidate {
	top := cands[0].score
	if sorted {
		var total float64
		for _, c := range cands {
			total += math.Exp(c.score - top)
		}
		return cands[:prefixReaching(cands, top, total, p, len(cands))]
	}
	for _, c := range cands {
		top = max(top, c.score)
	}
	one := s.partsOf(1)
	return s.nucleus(cands, top, s.softmax(cands, top, &one[0]), one, p, nil)
}

// softmax returns the softmax's total over unsorted candidates whose best score is top, summed
// in their order, and counts in w's bins how far below top each score is (topPBins).
func (s *sampler) softmax(cands []candidate, top float64, w *widePart) float64 {
	clear(w.bins[:])
	var total float64
	for _, c := range cands {
		x := c.score - top
		total += math.Exp(x)
		if -x < topPBins/topPBinsPerNat { // false for NaN
			w.bins[int(-x*topPBinsPerNat)]++
		}
	}
	return total
}

// nucleus returns topP's answer for unsorted candidates, in no particular order, given their
// best score top, the softmax's total, the chunks that counted how far below top each score is
// (in bins of 1/topPBinsPerNat nats; chunk i's of candidates i·n/len(parts) up to
// (i+1)·n/len(parts)), and, if the caller has them, each candidate's term of the total by id
// (terms[id] = e^(score − top); nil: computed here).
//
// Better's order puts every candidate of a bin ahead of the next bin's, and the shares add up
// exactly in any order (mass), so the answer is every candidate of the bins before the one
// where the running sum reaches p, and the best of that bin until it does: a pass, in the chunks
// side by side, that lays the candidates out bin after bin and sums each bin's shares, then a
// sort of that bin alone. On a flat row (a nucleus of tens of thousands of candidates) that is a
// pass where taking the nucleus off a heap, best first, was a pop a candidate. Only the bins down
// to the first whose least mass (a bin's terms are each at least e to its far edge), with the
// bins before it, reaches p·total are looked at: they hold the answer; where no bin's does (a p
// within the bins' 6.5% of 1), all of them. Only where the bins' sum falls short of p (the
// scores are NaN or infinite, so no bins, or p is within a few billionths of 1, where the
// scores past the bins count) do all the candidates go through a heap.
func (s *sampler) nucleus(cands []candidate, top, total float64, parts []widePart, p float64, terms []float64) []candidate {
	term := func(c candidate) float64 {
		if terms != nil {
			return terms[c.id]
		}
		return math.Exp(c.score - top)
	}
	want := massOf(p)
	need, least, last := p*total*(1+1e-9), 0.0, topPBins-1
	for b := range topPBins {
		n := int32(0)
		for i := range parts {
			n += parts[i].bins[b]
		}
		least += float64(n) * math.Exp(-float64(b+1)/topPBinsPerNat)
		if least >= need {
			last = b
			break
		}
	}
	// The candidates of bins 0 … last, bin after bin into s.sorted, a chunk's of a bin after
	// those of the chunks before it (so in id order, as one pass would lay them out; next[b]:
	// where the chunk's next one of bin b goes), and each chunk's sums of its bins' shares.
	k := int32(0)
	for b := range last + 1 {
		for i := range parts {
			parts[i].next[b] = k
			k += parts[i].bins[b]
		}
	}
	out := slices.Grow(s.sorted[:0], int(k))[:k]
	each(parts, len(cands), func(w *widePart, lo, hi int) {
		clear(w.sums[:last+1])
		for _, c := range cands[lo:hi] {
			if x := top - c.score; x < float64(last+1)/topPBinsPerNat { // false for NaN
				b := int(x * topPBinsPerNat)
				out[w.next[b]] = c
				w.next[b]++
				w.sums[b] = w.sums[b].plus(massOf(term(c) / total))
			}
		}
	})
	s.sorted = out
	var sum mass
	for b, from := 0, int32(0); b <= last; b++ {
		whole, to := sum, parts[len(parts)-1].next[b]
		for i := range parts {
			whole = whole.plus(parts[i].sums[b])
		}
		if !whole.reaches(want) {
			sum, from = whole, to
			continue
		}
		bin := out[from:to]
		slices.SortFunc(bin, better)
		for i, c := range bin {
			if sum = sum.plus(massOf(term(c) / total)); sum.reaches(want) {
				return out[:int(from)+i+1]
			}
		}
	}
	s.guarded++
	sum = mass{}
	return s.best(cands, len(cands), func(c candidate) bool {
		sum = sum.plus(massOf(term(c) / total))
		return sum.reaches(want)
	})
}

// The histogram topP keeps of how far below the best each candidate's score is: bins of a
// sixteenth of a nat, so a bin's least term is within 6.5% of its largest, reaching 32 nats down,
// past which a term weighs under 1.3e-14 of the best's.
const (
	topPBins       = 512
	topPBinsPerNat = 16
)

// prefixReaching returns how many of the sorted candidates, at most n, make the smallest prefix
// whose share of total reaches p (at least one).
func prefixReaching(cands []candidate, top, total, p float64, n int) int {
	var sum mass
	want := massOf(p)
	for i, c := range cands[:n] {
		if sum = sum.plus(massOf(math.Exp(c.score-top) / total)); sum.reaches(want) {
			return i + 1
		}
	}
	return n
}

// best returns the n best of cands, best first, in a buffer of the sampler's, stopping early
// after a candidate for which enough reports true. cands is reordered (it is a heap after).
func (s *sampler) best(cands []candidate, n int, enough func(candidate) bool) []candidate {
	// A heap with the best candidate at the root: each element better than its children.
	for i := len(cands)/2 - 1; i >= 0; i-- {
		siftDown(cands, i)
	}
	out := s.sorted[:0]
	for end := len(cands); len(out) < n && end > 0; {
		c := cands[0]
		out = append(out, c)
		end--
		cands[0] = cands[end]
		siftDown(cands[:end], 0)
		if enough != nil && enough(c) {
			break
		}
	}
	s.sorted = out
	return out
}

// siftDown restores the heap below i.
func siftDown(h []candidate, i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		c := l
		if r := l + 1; r < len(h) && better(h[r], h[l]) < 0 {
			c = r
		}
		if better(h[c], h[i]) >= 0 {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}

// noiseKey is the part of the draw's noise that (seed, pos) alone decide, taken once for a row.
func noiseKey(seed uint64, pos int) uint64 { return mix(mix(seed) ^ uint64(pos)) }

// unitAt returns the uniform number behind the Gumbel noise of token id in the row whose
// noiseKey is key, from a counter-based hash, so that the same (seed, position, id) always give
// the same noise: 53 random bits → u in (0, 1], never 0 (the largest rounds to 1, whose noise
// is +∞: one hash in 2⁵³).
func unitAt(key uint64, id int32) float64 {
	h := mix(key ^ uint64(uint32(id)))
	return (float64(h>>11) + 0.5) / (1 << 53)
}

// gumbel is the standard Gumbel noise of the uniform u.
func gumbel(u float64) float64 { return -math.Log(-math.Log(u)) }

// mix is splitmix64's finaliser: a bijection on 64 bits with good avalanche.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}
