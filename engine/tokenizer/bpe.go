package tokenizer

import (
	"hash/maphash"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// bpe is the byte-level BPE model. It works on raw bytes: a piece's symbols start as the tokens of
// its single bytes, which is what the byte-level alphabet makes of the characters Hugging Face
// works on, so the mapped string never has to be built.
type bpe struct {
	byteIDs [256]int32       // token of each byte alone; -1 where the vocabulary lacks it
	merges  map[uint64]merge // by pairKey(left, right)

	// words maps the raw bytes of every vocabulary token to its id; set only with ignoreMerges,
	// under which a piece found whole in the vocabulary is taken as one token (Llama 3).
	words        map[string]int32
	ignoreMerges bool

	unk     int32 // token for a byte the vocabulary lacks; -1 drops the byte, as Hugging Face does
	fuseUnk bool  // consecutive unknown bytes become one unk

	cache pieceCache
}

// merge is one entry of the merge table: the merged token and its priority (lower merges first).
type merge struct{ rank, id int32 }

func pairKey(left, right int32) uint64 { return uint64(uint32(left))<<32 | uint64(uint32(right)) }

// maxCachedPiece bounds the pieces the cache keeps: longer ones rarely repeat.
const maxCachedPiece = 64

// encode appends the tokens of one pre-tokenized piece (raw bytes, non-empty) to ids.
func (m *bpe) encode(piece string, ids []int32) []int32 {
	if len(piece) == 1 && m.byteIDs[piece[0]] >= 0 {
		return append(ids, m.byteIDs[piece[0]])
	}
	if m.ignoreMerges {
		if id, ok := m.words[piece]; ok {
			return append(ids, id)
		}
	}
	if len(piece) == 2 { // at most one merge: cheaper than the cache
		left, right := m.byteIDs[piece[0]], m.byteIDs[piece[1]]
		if left >= 0 && right >= 0 {
			if mg, ok := m.merges[pairKey(left, right)]; ok {
				return append(ids, mg.id)
			}
			return append(ids, left, right)
		}
	}
	if len(piece) > maxCachedPiece {
		return m.mergePiece(piece, ids)
	}
	if cached, ok := m.cache.get(piece); ok {
		return append(ids, cached...)
	}
	start := len(ids)
	ids = m.mergePiece(piece, ids)
	m.cache.put(piece, ids[start:])
	return ids
}

// symbol is one token of a piece being merged, in a doubly linked list over the piece's bytes.
// Merging always removes the right symbol, so the list starts at index 0 throughout.
type symbol struct {
	id         int32 // -1 once merged into its left neighbour
	prev, next int32 // indexes of the neighbours, -1 at the ends
}

// candidate is a possible merge of the adjacent symbols left and right. It goes stale when either
// symbol changes; the ids it records let mergePiece tell.
type candidate struct {
	rank, id        int32 // from the merge table
	left, right     int32 // symbol indexes
	leftID, rightID int32 // the symbols' ids when the candidate was made
}

func (a candidate) before(b candidate) bool {
	return a.rank < b.rank || a.rank == b.rank && a.left < b.left
}

// mergeScratch holds the buffers of one mergePiece call, pooled to keep encoding allocation-free.
type mergeScratch struct {
	syms []symbol
	heap []candidate
}

var scratchPool = sync.Pool{New: func() any { return new(mergeScratch) }}

// mergePiece appends the BPE tokens of piece to ids: it applies the merge of lowest rank among
// adjacent symbols, the leftmost on ties, until none applies, as Hugging Face's Word::merge_all
// does. The candidates sit in a binary heap, so long pieces cost O(n log n).
func (m *bpe) mergePiece(piece string, ids []int32) []int32 {
	sc := scratchPool.Get().(*mergeScratch)
	defer scratchPool.Put(sc)

	syms := sc.syms[:0]
	for i := 0; i < len(piece); i++ {
		id := m.byteIDs[piece[i]]
		if id < 0 {
			if m.unk < 0 {
				continue
			}
			if m.fuseUnk && len(syms) > 0 && syms[len(syms)-1].id == m.unk {
				continue
			}
			id = m.unk
		}
		n := int32(len(syms))
		syms = append(syms, symbol{id: id, prev: n - 1, next: n + 1})
	}
	if len(syms) == 0 {
		sc.syms = syms
		return ids
	}
	syms[len(syms)-1].next = -1

	h := candidateHeap(sc.heap[:0])
	for i := int32(0); i+1 < int32(len(syms)); i++ {
		m.offer(&h, syms, i, i+1)
	}
	for len(h) > 0 {
		c := h.pop()
		l, r := &syms[c.left], &syms[c.right]
		if l.id != c.leftID || l.next != c.right || r.id != c.rightID {
			continue // stale: one side was merged since
		}
		l.id, l.next = c.id, r.next
		if r.next >= 0 {
			syms[r.next].prev = c.left
		}
		r.id = -1
		if l.prev >= 0 {
			m.offer(&h, syms, l.prev, c.left)
		}
		if l.next >= 0 {
			m.offer(&h, syms, c.left, l.next)
		}
	}
	for i := int32(0); i >= 0; i = syms[i].next {
		ids = append(ids, syms[i].id)
	}
	sc.syms, sc.heap = syms, h
	return ids
}

// offer pushes the merge of symbols left and right, if the merge table has one.
func (m *bpe) offer(h *candidateHeap, syms []symbol, left, right int32) {
	lid, rid := syms[left].id, syms[right].id
	if mg, ok := m.merges[pairKey(lid, rid)]; ok {
		h.push(candidate{rank: mg.rank, id: mg.id, left: left, right: right, leftID: lid, rightID: rid})
	}
}

// candidateHeap is a binary min-heap ordered by candidate.before; written out rather than through
// container/heap to avoid its interface calls on the hot path.
type candidateHeap []candidate

func (h *candidateHeap) push(c candidate) {
	s := append(*h, c)
	for i := len(s) - 1; i > 0; {
		parent := (i - 1) / 2
		if !s[i].before(s[parent]) {
			break
		}
		s[i], s[parent] = s[parent], s[i]
		i = parent
	}
	*h = s
}

func (h *candidateHeap) pop() candidate {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s = s[:last]
	for i := 0; ; {
		least, l, r := i, 2*i+1, 2*i+2
		if l < len(s) && s[l].before(s[least]) {
			least = l
		}
		if r < len(s) && s[r].before(s[least]) {
			least = r
		}
		if least == i {
			break
		}
		s[i], s[least] = s[least], s[i]
		i = least
	}
	*h = s
	return top
}

// cacheSlots is the size of pieceCache's table, a power of two.
const cacheSlots = 1 << 16

// pieceCache remembers the tokens of recently encoded pieces in a two-way set-associative table:
// a piece hashes to a pair of slots, and storing it fills an empty one or replaces one of the two.
// That bounds memory without bookkeeping and keeps frequent pieces (an evicted one returns at its
// next use). Lookups take no lock, so encodings on many cores do not contend: a slot is an atomic
// pointer to an entry that is never modified. (An RWMutex here cost most of the parallel speed-up,
// see BenchmarkEncodeParallel.)
type pieceCache struct {
	seed  maphash.Seed
	slots []atomic.Pointer[cacheEntry] // cacheSlots of them
}

type cacheEntry struct {
	piece string
	ids   []int32
}

func newPieceCache() pieceCache {
	return pieceCache{seed: maphash.MakeSeed(), slots: make([]atomic.Pointer[cacheEntry], cacheSlots)}
}

// set returns the pair of slots of a piece's hash.
func (c *pieceCache) set(h uint64) []atomic.Pointer[cacheEntry] {
	i := h & (cacheSlots - 2)
	return c.slots[i : i+2]
}

func (c *pieceCache) get(piece string) ([]int32, bool) {
	set := c.set(maphash.String(c.seed, piece))
	for i := range set {
		if e := set[i].Load(); e != nil && e.piece == piece {
			return e.ids, true
		}
	}
	return nil, false
}

// put stores copies of piece (which may point into a caller's larger string) and ids.
func (c *pieceCache) put(piece string, ids []int32) {
	h := maphash.String(c.seed, piece)
	set := c.set(h)
	s := &set[h>>63] // a hash bit the set index does not use picks the victim
	if set[0].Load() == nil {
		s = &set[0]
	} else if set[1].Load() == nil {
		s = &set[1]
	}
	s.Store(&cacheEntry{piece: strings.Clone(piece), ids: slices.Clone(ids)})
}
