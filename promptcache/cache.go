package promptcache

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
)

// Spill is what the cache needs of its spill folder; *Disk is one. Put takes ownership of
// payload and may drop it (a cache may forget): evictions use it, so that the lane never waits on
// the disk. PutWait waits for room instead, until ctx ends: a graceful stop uses it, so that every
// block reaches the disk. Get returns an error for anything it cannot vouch for, which the cache
// takes as a miss.
type Spill interface {
	Has(k Key) bool
	Put(k Key, tokens []int32, payload []byte)
	PutWait(ctx context.Context, k Key, tokens []int32, payload []byte) error
	Get(k Key, tokens []int32) ([]byte, error)
}

// Options configures a Cache.
type Options struct {
	// Identity names the model, backend and kernels whose state the blocks hold
	// (engine.Model.Identity): it seeds every key, so no block of another model is ever found.
	Identity string
	// Spill, if not nil, receives the blocks evicted from memory and those in memory at Flush,
	// and gives them back on lookup.
	Spill Spill
	// Logger hears what goes wrong with the store (a failed copy); nil drops it.
	Logger *slog.Logger
}

// Cache is the prompt cache's index over its Store: which block holds which key, in what order
// they were last used, and which of them a restore is reading. One goroutine (the scheduler's
// lane, which drives the model) calls every method but Stats.
type Cache struct {
	store    Store
	identity string
	spill    Spill
	logger   *slog.Logger

	entries map[Key]*entry
	free    []int // blocks that hold nothing
	lru     entry // sentinel of the use list: lru.next is the most recently used

	mu    sync.Mutex // guards stats
	stats Stats
}

// entry is one block in memory.
type entry struct {
	key        Key
	block      int
	tokens     []int32 // the block's own tokens, for the spill file's check
	pins       int     // restores and loads that read or fill the block now
	prev, next *entry
}

// Stats counts what the cache did since it was made; Stats is safe for concurrent use.
type Stats struct {
	Lookups, Hits uint64 // prompts looked up, and those that reused at least one block
	TokensReused  uint64 // prompt tokens restored from blocks instead of computed
	Blocks        int    // blocks in memory now
	Capacity      int    // blocks the store holds
	BlockBytes    int    // bytes of one block
	Evictions     uint64 // blocks dropped from memory to make room (spilled first where a Spill is set)
	SpillWrites   uint64 // blocks handed to the spill folder
	SpillReads    uint64 // blocks read back from it
	Errors        uint64 // store copies that failed (the block is forgotten)
}

// New returns an empty cache over store.
func New(store Store, opts Options) *Cache {
	c := &Cache{store: store, identity: opts.Identity, spill: opts.Spill, logger: opts.Logger, entries: map[Key]*entry{}}
	c.lru.next, c.lru.prev = &c.lru, &c.lru
	c.resetFree(store.Blocks(), 0)
	return c
}

func (c *Cache) resetFree(blocks, used int) {
	c.free = c.free[:0]
	for b := blocks - 1; b >= used; b-- { // popped from the end: lowest block first
		c.free = append(c.free, b)
	}
	c.mu.Lock()
	c.stats.Capacity, c.stats.BlockBytes, c.stats.Blocks = blocks, c.store.BlockBytes(), len(c.entries)
	c.mu.Unlock()
}

// Keys returns the keys of the whole blocks of tokens under this cache's identity.
func (c *Cache) Keys(tokens []int32) []Key { return Keys(c.identity, tokens) }

// AppendKeys returns keys, the keys of the first len(keys) whole blocks of tokens, with the keys
// of the whole blocks after them appended: the work of the new blocks alone, for a sequence that
// grows.
func (c *Cache) AppendKeys(keys []Key, tokens []int32) []Key {
	return appendKeys(c.identity, keys, tokens)
}

// Match is what a lookup found for a prompt: the keys of its whole blocks, how many of them from
// the first are in memory, and how many after those the spill folder has.
type Match struct {
	Keys         []Key
	Memory, Disk int
}

// Lookup finds how much of the start of prompt the cache holds. It does not count as a use:
// Restore does.
func (c *Cache) Lookup(keys []Key) Match {
	m := Match{Keys: keys}
	for m.Memory < len(keys) && c.entries[keys[m.Memory]] != nil {
		m.Memory++
	}
	if c.spill != nil {
		for i := m.Memory; i < len(keys) && c.spill.Has(keys[i]); i++ {
			m.Disk++
		}
	}
	return m
}

// Restore copies the blocks of m that lie in memory into the session whose KV slots start at
// base, skipping those wholly before position from (the session already holds them), and counts
// the lookup. It returns how many positions from the start the session now holds: the memory
// blocks' end, or from when none reaches past it. The copies are enqueued before any later
// forward, so they never see a block reused.
func (c *Cache) Restore(m Match, base, from int) int {
	c.mu.Lock()
	c.stats.Lookups++
	c.mu.Unlock()
	end := m.Memory * BlockTokens
	if end <= from {
		return from
	}
	for i := from / BlockTokens; i < m.Memory; i++ {
		e := c.entries[m.Keys[i]]
		if err := c.store.Restore(base, i*BlockTokens, e.block); err != nil {
			c.fail("restore", err)
			return max(from, i*BlockTokens)
		}
		c.touch(e)
	}
	c.mu.Lock()
	c.stats.Hits++
	c.stats.TokensReused += uint64(end - from)
	c.mu.Unlock()
	return end
}

// Offer keeps the whole blocks among the first fed positions of tokens, whose state stands in
// the session at base, copying in those the cache does not hold yet. keys, when not nil, are
// Keys(tokens[:fed]) or a longer prefix's, computed already.
func (c *Cache) Offer(tokens []int32, keys []Key, base, fed int) {
	n := fed / BlockTokens
	if len(keys) < n {
		keys = c.Keys(tokens[:n*BlockTokens])
	}
	windowed, _ := c.store.(WindowedStore)
	for i, k := range keys[:n] {
		if e := c.entries[k]; e != nil {
			c.touch(e)
			continue
		}
		if windowed != nil && !windowed.Saveable(base, i*BlockTokens) {
			return // the session no longer holds it, and no block after it is found without it
		}
		e := c.allocate(k, tokens[i*BlockTokens:(i+1)*BlockTokens])
		if e == nil {
			return // every block is pinned: nothing more fits now
		}
		if err := c.store.Save(e.block, base, i*BlockTokens); err != nil {
			c.forget(e)
			c.fail("save", err)
			return
		}
	}
}

// allocate returns a new entry for k in a free block, evicting the least recently used unpinned
// block if none is free, or nil when every block is pinned (or the store has none).
func (c *Cache) allocate(k Key, tokens []int32) *entry {
	if len(c.free) == 0 && !c.evict() {
		return nil
	}
	b := c.free[len(c.free)-1]
	c.free = c.free[:len(c.free)-1]
	e := &entry{key: k, block: b, tokens: append([]int32(nil), tokens...)}
	c.entries[k] = e
	c.link(e)
	c.setBlocks()
	return e
}

// evict drops the least recently used unpinned block, spilling it first; it reports false when
// there is none.
func (c *Cache) evict() bool {
	for e := c.lru.prev; e != &c.lru; e = e.prev {
		if e.pins > 0 {
			continue
		}
		c.spillOut(e, nil)
		c.forget(e)
		c.mu.Lock()
		c.stats.Evictions++
		c.mu.Unlock()
		return true
	}
	return false
}

// spillOut hands e's block to the spill folder unless it has it already: with Put, or, when wait
// is not nil, with PutWait under it. It reports false when wait ended first.
func (c *Cache) spillOut(e *entry, wait context.Context) bool {
	if c.spill == nil || c.spill.Has(e.key) {
		return true
	}
	payload := make([]byte, c.store.BlockBytes())
	if err := c.store.Read(e.block, payload); err != nil {
		c.fail("read for the spill folder", err)
		return true
	}
	if wait == nil {
		c.spill.Put(e.key, e.tokens, payload)
	} else if err := c.spill.PutWait(wait, e.key, e.tokens, payload); err != nil {
		return false
	}
	c.mu.Lock()
	c.stats.SpillWrites++
	c.mu.Unlock()
	return true
}

// forget drops e and frees its block.
func (c *Cache) forget(e *entry) {
	c.unlink(e)
	delete(c.entries, e.key)
	c.free = append(c.free, e.block)
	c.setBlocks()
}

// Load is one block read back from the spill folder.
type Load struct {
	Key     Key
	Tokens  []int32
	Payload []byte
}

// Fetcher returns a function that reads from the spill folder the blocks of m after its memory
// ones, at most most of them, stopping at the first it cannot vouch for. The function blocks on
// the disk, so the lane runs it on another goroutine; it touches nothing of the cache but the
// spill folder in force now, which is safe for that. Put places what it returns.
func (c *Cache) Fetcher(m Match, prompt []int32, most int) func() []Load {
	spill := c.spill
	return func() []Load {
		var loads []Load
		for i := m.Memory; i < m.Memory+min(m.Disk, most) && spill != nil; i++ {
			tokens := prompt[i*BlockTokens : (i+1)*BlockTokens]
			payload, err := spill.Get(m.Keys[i], tokens)
			if err != nil {
				break
			}
			loads = append(loads, Load{Key: m.Keys[i], Tokens: tokens, Payload: payload})
		}
		return loads
	}
}

// SetSpill puts spill in force for the blocks evicted from now on (nil: none) and returns the
// one it replaces.
func (c *Cache) SetSpill(spill Spill) (old Spill) {
	old, c.spill = c.spill, spill
	return old
}

// Put writes blocks Fetch read into memory; it returns how many it placed.
func (c *Cache) Put(loads []Load) int {
	placed := 0
	for _, l := range loads {
		if e := c.entries[l.Key]; e != nil {
			c.touch(e)
			placed++
			continue
		}
		e := c.allocate(l.Key, l.Tokens)
		if e == nil {
			break
		}
		if err := c.store.Write(e.block, l.Payload); err != nil {
			c.forget(e)
			c.fail("write", err)
			break
		}
		placed++
	}
	c.mu.Lock()
	c.stats.SpillReads += uint64(placed)
	c.mu.Unlock()
	return placed
}

// Free returns how many blocks could be taken now without evicting a pinned one.
func (c *Cache) Free() int {
	n := len(c.free)
	for e := c.lru.next; e != &c.lru; e = e.next {
		if e.pins == 0 {
			n++
		}
	}
	return n
}

// Resize makes the cache hold blocks blocks, evicting (and spilling) the least recently used
// down to it first; the blocks kept move to the front of the resized store.
func (c *Cache) Resize(blocks int) error {
	if blocks == c.store.Blocks() {
		return nil
	}
	for len(c.entries) > blocks {
		if !c.evict() {
			return fmt.Errorf("promptcache: resize to %d blocks: %d are pinned", blocks, len(c.entries))
		}
	}
	keep := make([]int, 0, len(c.entries))
	for e := c.lru.next; e != &c.lru; e = e.next {
		keep = append(keep, e.block)
	}
	if err := c.store.Resize(blocks, keep); err != nil {
		return fmt.Errorf("promptcache: resize to %d blocks: %w", blocks, err) // the store is as it was
	}
	i := 0
	for e := c.lru.next; e != &c.lru; e = e.next {
		e.block = i
		i++
	}
	c.resetFree(blocks, len(keep))
	return nil
}

// Flush hands every block in memory that the spill folder lacks to it, most recently used
// first, waiting for room in its queue until ctx ends: at a graceful stop and before the model is
// unloaded, so that a restart starts warm.
func (c *Cache) Flush(ctx context.Context) {
	for e := c.lru.next; e != &c.lru && ctx.Err() == nil; e = e.next {
		if !c.spillOut(e, ctx) {
			return
		}
	}
}

// Pin keeps the memory blocks of m from eviction until Unpin: a stream that waits for a session
// after its blocks were read back from disk holds them this way.
func (c *Cache) Pin(m Match) {
	for _, k := range m.Keys[:m.Memory] {
		c.entries[k].pins++
	}
}

// Unpin undoes Pin(m); m must be the Match Pin was given.
func (c *Cache) Unpin(m Match) {
	for _, k := range m.Keys[:m.Memory] {
		if e := c.entries[k]; e != nil {
			e.pins--
		}
	}
}

// Stats returns what the cache did so far.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}

func (c *Cache) fail(what string, err error) {
	c.mu.Lock()
	c.stats.Errors++
	c.mu.Unlock()
	if c.logger != nil {
		c.logger.Warn("prompt cache: a block copy failed; the block is forgotten", "copy", what, "err", err)
	}
}

func (c *Cache) setBlocks() {
	c.mu.Lock()
	c.stats.Blocks = len(c.entries)
	c.mu.Unlock()
}

// The use list, most recent first.

func (c *Cache) link(e *entry) {
	e.prev, e.next = &c.lru, c.lru.next
	c.lru.next.prev = e
	c.lru.next = e
}

func (c *Cache) unlink(e *entry) {
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
}

func (c *Cache) touch(e *entry) {
	c.unlink(e)
	c.link(e)
}
