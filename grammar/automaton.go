// Package grammar constrains a model's output to JSON: a pushdown automaton over bytes, compiled
// from "any JSON object", from a subset of JSON Schema, or from a list of tools (one call in a
// tagged form, ToolCall), and the token masks that let a sampler pick only tokens whose bytes the
// automaton accepts.
//
// The output form is fixed so replies stay short and a schema's language is small: no whitespace
// outside strings (compact JSON, as json.Marshal writes it), an object's declared properties in
// the schema's order (optional ones may be left out, undeclared ones are never written), and
// anyOf branches told apart by their first byte. Every document the automaton accepts parses with
// encoding/json and validates against its schema; not every valid document is accepted.
//
// A State is a small value: the top frame and an immutable linked stack below it. Stepping returns
// a new State and never changes the old one, so a caller can try drafts from a state and keep it.
// Grammar, Vocab and State are safe for concurrent use; a mask buffer is the caller's.
//
// The package is a leaf: it imports nothing of tfd.
package grammar

// kind is what a node of a compiled grammar matches.
type kind uint8

const (
	kAny       kind = iota // any JSON value
	kObject                // an object with declared properties, written in their order
	kAnyObject             // any JSON object
	kArray                 // an array of items, with bounds on its length
	kString                // any JSON string
	kNumber                // any JSON number
	kInteger               // a JSON number without fraction or exponent
	kLiteral               // one of a set of JSON texts (enum, const, true/false, null)
	kAnyOf                 // one of several nodes, chosen by the first byte
	kSeq                   // parts, one after another
	kTagged                // one of a set of texts (lit), then the node tagged to the text written
)

// node is one schema (or part of one) compiled. Nodes form a graph that may have cycles ($ref).
type node struct {
	kind kind

	keys     []string // kObject: each property's key as JSON text, quotes included
	values   []*node  // kObject: each property's value
	reqAfter []int32  // kObject: the index of the first required property at or after i; len(keys) if none

	items              *node // kArray
	minItems, maxItems int   // kArray; maxItems < 0: no bound

	lit    []litNode // kLiteral, kTagged: a byte trie of the texts; lit[0] is its root
	tagged []*node   // kTagged: what follows each text, by the text's index
	parts  []*node   // kSeq

	alts []*node   // kAnyOf
	pick [256]int8 // kAnyOf: 1 + the index of the branch that starts with a byte, or 0
}

// litNode is a node of a literal trie: the bytes that may follow, and whether a text ends here.
type litNode struct {
	next []litEdge
	term bool
	text int32 // the index of the text that ends here, when term
}

type litEdge struct {
	b  byte
	to int32
}

// The nodes that any JSON value is built of, shared by every grammar.
var anyValue, anyObject, anyArray, anyString, anyNumber, anyKeyword *node

func init() {
	anyValue = &node{kind: kAny}
	anyObject = &node{kind: kAnyObject}
	anyArray = &node{kind: kArray, items: anyValue, maxItems: -1}
	anyString = &node{kind: kString}
	anyNumber = &node{kind: kNumber}
	anyKeyword = literal([]string{"true", "false", "null"})
}

// literal returns a node that matches exactly one of texts.
func literal(texts []string) *node {
	n := &node{kind: kLiteral, lit: []litNode{{}}}
	for i, t := range texts {
		at := int32(0)
		for i := 0; i < len(t); i++ {
			to := int32(-1)
			for _, e := range n.lit[at].next {
				if e.b == t[i] {
					to = e.to
				}
			}
			if to < 0 {
				to = int32(len(n.lit))
				n.lit = append(n.lit, litNode{})
				n.lit[at].next = append(n.lit[at].next, litEdge{t[i], to})
			}
			at = to
		}
		n.lit[at].term, n.lit[at].text = true, int32(i)
	}
	return n
}

// resolve returns the node that a value starting with b matches under n, looking through kAny
// and kAnyOf, or nil when no value under n starts with b.
func resolve(n *node, b byte) *node {
	for n != nil {
		switch n.kind {
		case kAny:
			switch {
			case b == '{':
				return anyObject
			case b == '[':
				return anyArray
			case b == '"':
				return anyString
			case b == '-' || isDigit(b):
				return anyNumber
			default:
				return anyKeyword
			}
		case kAnyOf:
			if n.pick[b] == 0 {
				return nil
			}
			n = n.alts[n.pick[b]-1]
		default:
			return n
		}
	}
	return nil
}

func isDigit(b byte) bool { return b >= '0' && b <= '9' }

func isHex(b byte) bool { return isDigit(b) || (b|0x20 >= 'a' && b|0x20 <= 'f') }
