package schedulertest

import (
	"path/filepath"
	"testing"

	"tfd/engine"
	"tfd/engine/enginetest"
)

// lonePrompt is one of BenchLone's prompts, encoded for its model.
type lonePrompt struct {
	name   string
	tokens []int32
}

// lonePrompts encodes BenchLone's three prompts with m's tokenizer: code, prose and edit, in
// that order. They are plain text to continue, not chat, so that a model trained only on source
// (the bundled one) meets each as it would in use.
func lonePrompts(m *engine.Model) []lonePrompt {
	tok := m.Tokenizer()
	return []lonePrompt{
		{"code", tok.Encode(codePrompt)},
		{"prose", tok.Encode(prosePrompt)},
		{"edit", tok.Encode(editPrompt)},
	}
}

// absDir returns dir, a model folder given relative to the repository root or absolute, as an
// absolute path.
func absDir(t testing.TB, dir string) string {
	if filepath.IsAbs(dir) {
		return dir
	}
	return filepath.Join(enginetest.RepoRoot(t), dir)
}

// codePrompt is the start of a Go source file, cut inside a method: a model continues the file.
const codePrompt = `// Package lru implements a least-recently-used cache of fixed size.
package lru

import (
	"container/list"
	"sync"
)

// entry is one key and its value, an element of the cache's list.
type entry[K comparable, V any] struct {
	key   K
	value V
}

// Cache holds up to size entries; adding one more evicts the least recently used. It is safe
// for concurrent use.
type Cache[K comparable, V any] struct {
	mu    sync.Mutex
	size  int
	order *list.List // most recently used at the front
	items map[K]*list.Element
}

// New returns a cache that holds up to size entries.
func New[K comparable, V any](size int) *Cache[K, V] {
	return &Cache[K, V]{size: size, order: list.New(), items: make(map[K]*list.Element)}
}

// Get returns the value stored under key and whether there was one, and marks it used.
func (c *Cache[K, V]) Get(key K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[key]; ok {
		c.order.MoveToFront(e)
		return e.Value.(*entry[K, V]).value, true
	}
	var zero V
	return zero, false
}

// Add stores value under key, evicting the least recently used entry if the cache is full.
func (c *Cache[K, V]) Add(key K, value V) {
	c.mu.Lock()
	defer c.mu.Unlock()
`

// prosePrompt is a paragraph of English to continue.
const prosePrompt = `The harbour town woke early in those years. Before the light had reached the upper streets, the
fishing boats were already out past the breakwater, and the women who mended nets had set out
their stools along the quay. Nobody remembers now who first thought of building the covered
market, but everyone agrees that it changed the town more than the railway did. Farmers came in
from the valley on Thursdays, and by noon the hall was so full of voices that the gulls on the
roof kept away until evening. The children of the town learned to count there, and to argue, and
`

// editPrompt asks, in a comment, for a function again with one change, and starts the answer:
// most of what follows is a copy of what the prompt already holds.
const editPrompt = `// Reverse returns the words of s in reverse order, separated by single spaces. Leading,
// trailing and repeated spaces in s are dropped.
func Reverse(s string) string {
	words := strings.Fields(s)
	for i, j := 0, len(words)-1; i < j; i, j = i+1, j-1 {
		words[i], words[j] = words[j], words[i]
	}
	var b strings.Builder
	for i, w := range words {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(w)
	}
	return b.String()
}

// The same function again, with the separator a parameter instead of a single space:

// ReverseSep returns the words of s in reverse order, separated by sep. Leading,
// trailing and repeated spaces in s are dropped.
func ReverseSep(s, sep string) string {
`
