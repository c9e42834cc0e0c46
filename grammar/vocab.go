package grammar

import (
	"bytes"
	"slices"
)

// Vocab is a model's vocabulary laid out for masks: a byte trie of every token, and the tokens
// sorted by what they do between the characters of a string, where most of a reply's tokens are
// picked. There, what a token does up to an unescaped closing quote depends on nothing else, so
// the tokens that stay inside the string are allowed from any such state, those refused before a
// quote never are, and only those that close the string need walking. It depends only on the
// vocabulary, so one serves every grammar; it is immutable and safe for concurrent use.
type Vocab struct {
	size   int
	full   trie     // every token with bytes
	closes trie     // the tokens that close a string they start inside
	inside []uint64 // bitset of the tokens that stay inside a string they start inside
	bytes  [][]byte // each token's bytes
}

// trie is a byte trie flattened into one slice: each node's children are contiguous.
type trie struct {
	nodes []trieNode
	ids   []int32 // token ids, grouped by the node their bytes end at
}

type trieNode struct {
	b            byte  // the byte that leads here from the parent
	kidLo, kidHi int32 // children: nodes[kidLo:kidHi]
	idLo, idHi   int32 // tokens ending here: ids[idLo:idHi]
}

// NewVocab lays out a vocabulary given as each token id's bytes (byte-level BPE decoded). A token
// with no bytes (a special token such as EOS) is never allowed by a mask; the caller allows the
// stop tokens itself where the grammar may end.
func NewVocab(tokens [][]byte) *Vocab {
	v := &Vocab{size: len(tokens), inside: make([]uint64, (len(tokens)+63)/64), bytes: tokens}
	var all, closing []int32
	for id, t := range tokens {
		if len(t) == 0 {
			continue
		}
		all = append(all, int32(id))
		switch inString(t) {
		case stays:
			v.inside[id>>6] |= 1 << (id & 63)
		case closes:
			closing = append(closing, int32(id))
		}
	}
	v.full = buildTrie(tokens, all)
	v.closes = buildTrie(tokens, closing)
	return v
}

// Size returns the number of token ids; a mask holds (Size()+63)/64 words.
func (v *Vocab) Size() int { return v.size }

// Bytes returns the bytes of token id; the slice is shared and must not be changed.
func (v *Vocab) Bytes(id int32) []byte { return v.bytes[id] }

// inStringEffect is what a token does when it starts between the characters of a string.
type inStringEffect uint8

const (
	refused inStringEffect = iota // a byte is refused before the string closes
	stays                         // the token ends inside the string
	closes                        // an unescaped quote closes the string: what follows depends on the state
)

// inString returns what t does from between the characters of a string.
func inString(t []byte) inStringEffect {
	s := State{top: frame{n: anyString, ph: phStrBody}} // alone: closing it ends the document
	for _, b := range t {
		var ok bool
		if s, ok = s.Step(b); !ok {
			return refused
		}
		if s.top.ph == phDone {
			return closes
		}
	}
	return stays
}

func buildTrie(tokens [][]byte, ids []int32) trie {
	ids = slices.Clone(ids)
	slices.SortFunc(ids, func(a, b int32) int {
		if c := bytes.Compare(tokens[a], tokens[b]); c != 0 {
			return c
		}
		return int(a - b)
	})
	t := trie{nodes: []trieNode{{}}, ids: ids}
	t.fill(tokens, 0, 0, 0, int32(len(ids)))
	return t
}

// fill makes node at the trie of ids[lo:hi], whose bytes share their first depth bytes.
func (t *trie) fill(tokens [][]byte, at int32, depth int, lo, hi int32) {
	i := lo
	for i < hi && len(tokens[t.ids[i]]) == depth { // sorted: the tokens that end here come first
		i++
	}
	t.nodes[at].idLo, t.nodes[at].idHi = lo, i
	type group struct{ lo, hi int32 }
	var groups []group
	for i < hi {
		b, j := tokens[t.ids[i]][depth], i
		for j < hi && tokens[t.ids[j]][depth] == b {
			j++
		}
		groups = append(groups, group{i, j})
		i = j
	}
	kidLo := int32(len(t.nodes))
	for _, g := range groups {
		t.nodes = append(t.nodes, trieNode{b: tokens[t.ids[g.lo]][depth]})
	}
	t.nodes[at].kidLo, t.nodes[at].kidHi = kidLo, int32(len(t.nodes))
	for k, g := range groups {
		t.fill(tokens, kidLo+int32(k), depth+1, g.lo, g.hi)
	}
}

// Allowed sets in mask (at least (Size()+63)/64 words, cleared first) the bit of each token
// whose bytes may follow s. It walks the trie with the automaton and drops a branch at its first
// refused byte; between a string's characters, the tokens that stay inside are set at once and
// only those that close the string are walked.
func (v *Vocab) Allowed(s State, mask []uint64) {
	t := &v.full
	if s.inString() {
		copy(mask, v.inside)
		t = &v.closes
	} else {
		clear(mask)
	}
	t.walk(0, s, mask)
}

func (t *trie) walk(at int32, s State, mask []uint64) {
	n := &t.nodes[at]
	for k := n.kidLo; k < n.kidHi; k++ {
		kid := &t.nodes[k]
		next, ok := s.Step(kid.b)
		if !ok {
			continue
		}
		for _, id := range t.ids[kid.idLo:kid.idHi] {
			mask[id>>6] |= 1 << (id & 63)
		}
		if kid.kidLo < kid.kidHi {
			t.walk(k, next, mask)
		}
	}
}

// Advance returns the state after token id, and false when its bytes may not follow s (a token
// without bytes never may).
func (v *Vocab) Advance(s State, id int32) (State, bool) {
	if id < 0 || int(id) >= v.size || len(v.bytes[id]) == 0 {
		return State{}, false
	}
	return s.StepBytes(v.bytes[id])
}
