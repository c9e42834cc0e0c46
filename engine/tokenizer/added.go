package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// addedToken is one entry of tokenizer.json's added_tokens.
type addedToken struct {
	id         int32
	content    string
	singleWord bool // match only where no word character touches either side
	lstrip     bool // the match takes the whitespace before it
	rstrip     bool // the match takes the whitespace after it
	normalized bool // matched in normalized text rather than the raw input
	special    bool
}

// addedSet finds added tokens in text as Hugging Face's AddedVocabulary does: non-overlapping
// leftmost-longest matches (its Aho-Corasick automaton's MatchKind::LeftmostLongest), each then
// checked for single_word and widened by lstrip and rstrip. The zero value matches nothing.
type addedSet struct {
	tokens []addedToken
	nodes  []trieNode // nodes[0] is the root
	root   [256]int32 // child of the root by byte, 0 for none
}

// trieNode is a node of the byte trie of token contents.
type trieNode struct {
	token int32 // index into tokens of the token ending here, -1 for none
	edges []trieEdge
}

type trieEdge struct {
	b    byte
	node int32
}

// add puts t in the set; pattern is the text to find, its content or, for a normalized token,
// its normalized content.
func (a *addedSet) add(t addedToken, pattern string) {
	if pattern == "" {
		return
	}
	if len(a.nodes) == 0 {
		a.nodes = append(a.nodes, trieNode{token: -1})
	}
	n := int32(0)
	for i := 0; i < len(pattern); i++ {
		n = a.child(n, pattern[i])
	}
	if a.nodes[n].token < 0 {
		a.nodes[n].token = int32(len(a.tokens))
		a.tokens = append(a.tokens, t)
	}
}

// child returns the child of node n by byte b, creating it if need be.
func (a *addedSet) child(n int32, b byte) int32 {
	if n == 0 && a.root[b] != 0 {
		return a.root[b]
	}
	for _, e := range a.nodes[n].edges {
		if e.b == b {
			return e.node
		}
	}
	c := int32(len(a.nodes))
	a.nodes = append(a.nodes, trieNode{token: -1})
	a.nodes[n].edges = append(a.nodes[n].edges, trieEdge{b, c})
	if n == 0 {
		a.root[b] = c
	}
	return c
}

// longestAt returns the index of the longest token starting at s[i] and its end, or -1.
func (a *addedSet) longestAt(s string, i int) (token, end int) {
	token = -1
	n := a.root[s[i]]
	for j := i + 1; n != 0; j++ {
		if t := a.nodes[n].token; t >= 0 {
			token, end = int(t), j
		}
		if j == len(s) {
			break
		}
		next := int32(0)
		for _, e := range a.nodes[n].edges {
			if e.b == s[j] {
				next = e.node
				break
			}
		}
		n = next
	}
	return token, end
}

// span is a part of a text: an added token (id >= 0) or a gap between them (id < 0).
type span struct {
	start, end int
	id         int32
}

// split appends to out the spans that tile s: the added tokens found and the gaps around them.
func (a *addedSet) split(s string, out []span) []span {
	from := 0 // end of the last span
	for i := 0; i < len(s) && len(a.tokens) > 0; {
		k, end := a.longestAt(s, i)
		if k < 0 {
			i++
			continue
		}
		start, stop := i, end
		i = end // a match discarded below still consumes its text, as in Hugging Face
		t := &a.tokens[k]
		if t.singleWord && (endsWithWord(s[:start]) || startsWithWord(s[stop:])) {
			continue
		}
		if t.lstrip {
			start -= len(s[:start]) - len(trimRightSpace(s[:start]))
		}
		start = max(start, from)
		if t.rstrip {
			stop = len(s) - len(trimLeftSpace(s[stop:]))
		}
		if from < start {
			out = append(out, span{from, start, -1})
		}
		out = append(out, span{start, stop, t.id})
		from, i = stop, max(i, stop)
	}
	if from < len(s) {
		out = append(out, span{from, len(s), -1})
	}
	return out
}

// isWordChar reports whether r is in Rust regex's Unicode \w: alphabetic, a mark, a decimal
// digit, connector punctuation or a join control.
func isWordChar(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsMark(r) || unicode.Is(unicode.Nd, r) ||
		unicode.Is(unicode.Nl, r) || unicode.Is(unicode.Pc, r) || unicode.Is(unicode.Other_Alphabetic, r) ||
		r == 0x200C || r == 0x200D
}

func startsWithWord(s string) bool {
	r, n := utf8.DecodeRuneInString(s)
	return n > 0 && isWordChar(r)
}

func endsWithWord(s string) bool {
	r, n := utf8.DecodeLastRuneInString(s)
	return n > 0 && isWordChar(r)
}

// trimLeftSpace and trimRightSpace trim Unicode White_Space, Rust's char::is_whitespace.
func trimLeftSpace(s string) string {
	for len(s) > 0 {
		r, n := utf8.DecodeRuneInString(s)
		if !unicode.Is(unicode.White_Space, r) {
			break
		}
		s = s[n:]
	}
	return s
}

func trimRightSpace(s string) string {
	for len(s) > 0 {
		r, n := utf8.DecodeLastRuneInString(s)
		if !unicode.Is(unicode.White_Space, r) {
			break
		}
		s = s[:len(s)-n]
	}
	return s
}
