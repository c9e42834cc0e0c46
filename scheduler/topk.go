package scheduler

import (
	"slices"
	"sync"
)

// top_k over a large vocabulary: each chunk of topKChunk tokens keeps its k best in a heap whose
// root is the worst of them, the chunks in parallel, and the chunks' bests are sorted and cut to
// k. A token that cannot beat its chunk's k-th best costs one comparison, where a heap of the
// whole vocabulary cost each token several; and since better is a strict total order the k best
// and their order are the same however the vocabulary is cut.

// topKChunk is the tokens of one chunk of the parallel top_k.
const topKChunk = 16384

// all returns every token of logits as a candidate, in id order, in a buffer of the sampler's.
func (s *sampler) all(logits []float32) []candidate {
	cands := s.cands[:0]
	for id, l := range logits {
		cands = append(cands, candidate{id: int32(id), score: float64(l)})
	}
	s.cands = cands
	return cands
}

// topK returns the k best tokens of logits (0 < k < len(logits)) as candidates, best first, in a
// buffer of the sampler's.
func (s *sampler) topK(logits []float32, k int) []candidate {
	chunks := (len(logits) + topKChunk - 1) / topKChunk
	if chunks < 2 || 4*k > topKChunk {
		// One chunk, or a k that keeps much of each: the heap of the whole vocabulary.
		return s.best(s.all(logits), k, nil)
	}
	keep := s.cands[:0]
	if cap(keep) < chunks*k {
		keep = make([]candidate, 0, chunks*k)
	}
	keep = keep[:chunks*k]
	kept := make([]int, chunks)
	var wg sync.WaitGroup
	for c := range chunks {
		wg.Go(func() {
			first := c * topKChunk
			part := logits[first:min(first+topKChunk, len(logits))]
			kept[c] = chunkTopK(keep[c*k:(c+1)*k], part, int32(first))
		})
	}
	wg.Wait()
	// The chunks' bests, packed, sorted, cut.
	n := 0
	for c := range chunks {
		n += copy(keep[n:], keep[c*k:c*k+kept[c]])
	}
	keep = keep[:n]
	slices.SortFunc(keep, better)
	s.cands = keep
	s.sorted = append(s.sorted[:0], keep[:k]...)
	return s.sorted
}

// chunkTopK fills h with the best len(h) tokens of part (ids from first on), or all of part if
// fewer, in no order, and returns how many it holds.
func chunkTopK(h []candidate, part []float32, first int32) int {
	k, n := len(h), 0
	for i, l := range part {
		c := candidate{id: first + int32(i), score: float64(l)}
		switch {
		case n < k:
			// Push: the heap's worst stays at the root.
			h[n] = c
			for j := n; j > 0; {
				p := (j - 1) / 2
				if better(h[j], h[p]) < 0 {
					break
				}
				h[j], h[p] = h[p], h[j]
				j = p
			}
			n++
		case better(c, h[0]) < 0:
			h[0] = c
			siftDownWorst(h, 0)
		}
	}
	return n
}

// siftDownWorst restores the heap below i, in which each element is worse than its children.
func siftDownWorst(h []candidate, i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		c := l
		if r := l + 1; r < len(h) && better(h[r], h[l]) > 0 {
			c = r
		}
		if better(h[c], h[i]) <= 0 {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}
