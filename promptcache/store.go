package promptcache

// Store is the cache's memory: numbered blocks, each holding the model's state over BlockTokens
// positions (the keys and values of every layer; for a hybrid model also its recurrent state at
// the block's end), in the backend's memory, so that a restore is a device copy. The engine
// implements it. Like the model, it is driven by one goroutine (the scheduler's lane), and its
// copies are ordered with the model's forwards: a Restore enqueued before a forward is seen by it.
type Store interface {
	// Blocks returns how many blocks the store holds.
	Blocks() int
	// BlockBytes returns the bytes of one block on the host: the length Read and Write take.
	BlockBytes() int
	// Save copies the state of positions pos … pos+BlockTokens-1 of the session whose KV slots
	// start at base into block. Keys and values stay in the session for every position, so any
	// whole block of a stream's past can be saved at any time. A hybrid model's recurrent state
	// exists only for the position the session stands at, so its store can save a block only when
	// the session stands at the block's end: the lane will then cut prompt chunks at block
	// boundaries and offer each block as the stream passes it, rather than when the prompt is fed
	// and when the stream ends as it does for attention-only models.
	Save(block, base, pos int) error
	// Restore copies block into positions pos … pos+BlockTokens-1 of the session at base.
	Restore(base, pos, block int) error
	// Read waits for the work enqueued so far and copies block into dst.
	Read(block int, dst []byte) error
	// Write copies src, as Read wrote it, into block.
	Write(block int, src []byte) error
	// Resize makes the store hold blocks blocks; block i of the resized store holds what block
	// keep[i] held (len(keep) ≤ blocks), the rest are empty. Memory the store no longer needs is
	// given back.
	Resize(blocks int, keep []int) error
	// Close frees the store's memory.
	Close()
}

// WindowedStore is a Store whose sessions keep part of their state only for their newest
// positions (a model whose sliding-window layers keep their keys and values in rings bounded by
// the window): a block can be saved only while the session still holds it. Offer asks Saveable
// first and stops quietly at the first block that can no longer be saved (those after it are
// found only through it). A block restored writes the session's state as a forward would.
type WindowedStore interface {
	Store
	// Saveable reports whether Save can copy positions pos … pos+BlockTokens−1 of the session
	// whose KV slots start at base.
	Saveable(base, pos int) bool
}
