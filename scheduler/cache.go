package scheduler

import (
	"io"

	"tfd/promptcache"
)

// The prompt cache on the lane. A waiting stream looks its prompt up before it takes a session:
// the blocks in memory are copied into the session it takes, and only the rest of the prompt is
// fed; blocks that the spill folder has beyond them are read back first, on another goroutine,
// while the stream keeps waiting (and those behind it go ahead). A stream offers each block as
// soon as it has fed it whole, after the forward that did, and everything it fed when it ends,
// however it ends: a store may keep part of a block's state only for a while (a sliding layer's
// ring, a hybrid model's DeltaNet states at a block's end), and a block it can no longer save
// leaves every block after it uncached, since a block is found only through those before it.
//
// A restore is exact: a block holds the keys and values computed for those positions after that
// very prefix (its key hashes the whole prefix), and a row's keys and values depend on nothing
// else (the compute contract's batch invariance), so they are the bits the stream would compute.
// As with a session's own kept prompt, the last restored position is fed again: the stream
// needs the logits after its last prompt token, and the MTP head its own entry there.

// lookup is what the lane knows of a waiting stream's prompt in the cache.
type lookup struct {
	keys     []promptcache.Key // the prompt's whole blocks; nil until first looked up
	fetching bool              // its spilled blocks are being read back
	fetched  bool              // they were: what is in memory now is what it gets
	pinned   promptcache.Match // blocks read back for it, kept from eviction until it is admitted
}

// fetchResult is the blocks a fetch goroutine read back for a stream.
type fetchResult struct {
	st    *stream
	loads []promptcache.Load
}

// cacheMatch looks a waiting stream's prompt up; it reports false while the stream must wait for
// blocks being read back from the spill folder, which it starts reading the first time.
func (l *laneState) cacheMatch(st *stream) (promptcache.Match, bool) {
	c := l.cache
	if c == nil {
		return promptcache.Match{}, true
	}
	if st.look.fetching {
		return promptcache.Match{}, false
	}
	if st.look.keys == nil {
		st.look.keys = c.Keys(st.req.Prompt)
	}
	m := c.Lookup(st.look.keys)
	if m.Disk == 0 || st.look.fetched {
		return m, true
	}
	most := c.Free()
	if most == 0 {
		return m, true
	}
	st.look.fetching = true
	fetch := c.Fetcher(m, st.req.Prompt, most)
	h := l.h
	go func() {
		r := fetchResult{st: st, loads: fetch()}
		select {
		case h.fetched <- r:
		case <-h.done:
		}
	}()
	return m, false
}

// placeFetched puts blocks read back from the spill folder into memory, pinned for their stream
// until it is admitted.
func (l *laneState) placeFetched(r fetchResult) {
	l.cache.Put(r.loads)
	st := r.st
	st.look.fetching, st.look.fetched = false, true
	if st.ctx.Err() != nil {
		return // the request ended meanwhile; the blocks stay for others
	}
	st.look.pinned = l.cache.Lookup(st.look.keys)
	l.cache.Pin(st.look.pinned)
}

// unpin releases what placeFetched pinned for st.
func (l *laneState) unpin(st *stream) {
	if l.cache != nil {
		l.cache.Unpin(st.look.pinned)
		st.look.pinned = promptcache.Match{}
	}
}

// restore copies the cached blocks of m into sess, which already holds the prompt's first kept
// tokens; it returns how many prompt tokens the stream need not feed.
func (l *laneState) restore(m promptcache.Match, sess *session, kept int) int {
	if l.cache == nil {
		return kept
	}
	end := l.cache.Restore(m, sess.base, kept)
	return max(kept, end-1)
}

// offer gives the cache the whole blocks a stream has fed.
func (l *laneState) offer(a *active) {
	if l.cache != nil && a.fed >= promptcache.BlockTokens {
		a.look.keys = l.cache.AppendKeys(a.look.keys, a.tokens[:a.fed])
		l.cache.Offer(a.tokens, a.look.keys, a.sess.base, a.fed)
		a.offered = a.fed / promptcache.BlockTokens
	}
}

// offerFed offers a stream's blocks once a forward has fed one whole that it had not offered, so
// that streams arriving while it runs (a shared system prompt) find them, and so that each is
// saved while the session still holds all of its state.
func (l *laneState) offerFed(a *active) {
	if !a.done && a.fed/promptcache.BlockTokens > a.offered {
		l.offer(a)
	}
}

// applyCache puts the cache settings of opts in force: its spill folder and its size. A spill
// folder it replaces is closed here, once nothing of the lane's uses it (a fetch under way holds
// its own reference and only reads files), if it is an io.Closer: the host owns the spill folders
// it was handed after the first.
func (l *laneState) applyCache(opts SharedOptions) {
	if l.cache == nil {
		return
	}
	if old := l.cache.SetSpill(opts.CacheSpill); old != nil && old != opts.CacheSpill {
		if c, ok := old.(io.Closer); ok {
			l.report("prompt cache spill folder", c.Close())
		}
	}
	if err := l.cache.Resize(opts.CacheBlocks); err != nil {
		l.report("prompt cache", err)
	}
}
