package scheduler

import (
	"math"
	"sync"
)

// The keyed draw of a sampled pick: the candidate whose scaled score plus Gumbel noise is the
// largest, ties to the lower token id. With temperature alone every token of the vocabulary is a
// candidate, and the noise (a hash and two logarithms a token) cost about 9 ms a row for 151,936
// of them on the development machine: a round of many sampled streams would wait on the host
// for far longer than on its forward. So a large draw is cut into chunks drawn in parallel, each
// keeping its best by the same rule, and the chunks' bests are merged in order; and a candidate
// that cannot win is passed over without its logarithms (drawPart). The rule (the largest key,
// the lowest id among equal keys) picks the same candidate however the candidates are cut, and
// every key is the same bits, so the draw does not depend on the chunking.

const (
	// drawChunk is the fewest candidates a parallel draw gives one goroutine.
	drawChunk = 8192
	// parallelDraw is the fewest candidates drawn in parallel: below it one goroutine is quicker
	// than starting others.
	parallelDraw = 4 * drawChunk
)

// draw is the best candidate of a part of a draw: ok says whether any key of the part was a
// number (a NaN key, from a NaN logit, never wins).
type draw struct {
	id  int32
	key float64
	ok  bool
}

// drawParts returns how many chunks a pass over n candidates is cut into on up to cores
// goroutines: one below parallelDraw, else as many as cores and drawChunk allow. The draw, top_p's
// softmax and the log-probabilities are cut so.
func drawParts(n, cores int) int {
	if n < parallelDraw {
		return 1
	}
	return max(1, min(cores, n/drawChunk))
}

// gumbelArgmax returns pick's token among n candidates (at least one), candidate i's id and
// scaled score being at(i), at position pos under seed: the largest score plus its Gumbel noise,
// ties to the lower id, and candidate 0's id where no key is a number. It runs on up to cores
// goroutines.
func gumbelArgmax(n int, at func(i int) (int32, float64), seed uint64, pos, cores int) int32 {
	key := noiseKey(seed, pos)
	parts := drawParts(n, cores)
	first, _ := at(0)
	best := draw{id: first, key: math.Inf(-1)}
	if parts <= 1 {
		return best.merge(drawPart(0, n, at, key)).id
	}
	bests := make([]draw, parts)
	var wg sync.WaitGroup
	for p := range parts {
		wg.Go(func() { bests[p] = drawPart(p*n/parts, (p+1)*n/parts, at, key) })
	}
	wg.Wait()
	for _, d := range bests {
		best = best.merge(d)
	}
	return best.id
}

// drawPart returns the best of candidates lo … hi-1 by the draw's rule for the row whose
// noiseKey is key.
//
// Most candidates cannot win, and drawPart tells which without the noise's two logarithms: with
// B the best key so far, candidate i, of score s and uniform u, wins only if its noise
// −ln(−ln u) reaches d = B − s, that is only if −ln u ≤ e^−d; and −ln u ≥ 1 − u, so 1 − u >
// e^−⌊d⌋·(1 + 10⁻⁶) rules it out for d ≥ 1 (noiseBound; past d = 39, e^−39's bound, below any
// 1 − u but u = 1's, whose noise is +∞). The margin is far wider than the rounding of the keys,
// so a candidate ruled out has a key below B, never equal: the part's best is the same
// candidate, and the same bits, as when every key is computed; a NaN d (a NaN or infinite
// score) is never ruled out. B rises quickly as the part is read: a first pass for the
// best-scoring candidate's key, to start from it, cost more than it saved (BenchmarkDraw).
func drawPart(lo, hi int, at func(i int) (int32, float64), key uint64) draw {
	best := draw{key: math.Inf(-1)}
	for i := lo; i < hi; i++ {
		id, score := at(i)
		u := unitAt(key, id)
		if losesTo(best.key, score, u) {
			continue
		}
		if k := score + gumbel(u); k > best.key || k == best.key && (!best.ok || id < best.id) {
			best = draw{id: id, key: k, ok: true}
		}
	}
	return best
}

// losesTo reports whether a candidate of this score and uniform u surely has a key below b
// (drawPart says how it knows without the noise's logarithms).
func losesTo(b, score, u float64) bool {
	d := b - score
	if !(d >= 1) {
		return false
	}
	n := len(noiseBound) - 1
	if d < float64(n) {
		n = int(d)
	}
	return 1-u > noiseBound[n]
}

// noiseBound[n] is e^−n·(1 + 10⁻⁶), rounded up: drawPart's bound on e^−d for d ≥ n.
var noiseBound = func() (b [40]float64) {
	for n := range b {
		b[n] = math.Nextafter(math.Exp(-float64(n))*(1+1e-6), math.Inf(1))
	}
	return b
}()

// merge returns the better of b and d by the draw's rule; d counts only if ok.
func (b draw) merge(d draw) draw {
	if d.ok && (d.key > b.key || d.key == b.key && d.id < b.id) {
		return d
	}
	return b
}
