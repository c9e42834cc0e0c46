// Package promptcache is the prompt cache: the model's state at block boundaries of prompts and
// replies already computed, kept in memory of its own and spilled to disk, so that a prompt that
// starts as an earlier one did (a shared system prompt, the next turn of a chat) prefills only
// what is new.
//
// A prompt is cut into blocks of BlockTokens tokens. A block is named by a Key, the hash of the
// whole prefix up to its end (and of the model's identity), so a key says both which tokens a
// block holds and what came before them: a shared system prompt is one chain of keys that every
// conversation starting with it finds.
//
// Three parts: a Store holds the blocks in the backend's memory (the engine's BlockStore, so a
// restore is a device copy); a Cache is the index over it (lookup, restore, offer, least recently
// used eviction, pins), driven by the scheduler's lane; a Disk is the spill folder the Cache
// hands evicted blocks to and reads them back from, one checked file a block. The package imports
// nothing of tfd's.
package promptcache

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
)

// BlockTokens is the tokens one block holds. Smaller blocks reuse more of a prompt whose tail
// differs (a chat's next turn prefills at most one block again) and cost more entries and files;
// 64 keeps a 32k-token conversation to 512 entries.
const BlockTokens = 64

// Key names a block: the hash of the model's identity and of every token from the start of the
// prompt to the block's end.
type Key [16]byte

func (k Key) String() string { return hex.EncodeToString(k[:]) }

// Keys returns the keys of the whole blocks of tokens, in order: Keys(id, t)[i] names the block
// that ends at token (i+1)·BlockTokens. Each key hashes the one before it with its block's tokens,
// so the work is one pass over tokens.
func Keys(identity string, tokens []int32) []Key { return appendKeys(identity, nil, tokens) }

// appendKeys returns keys, the keys of tokens' first len(keys) whole blocks, with the keys of
// the whole blocks of tokens after them appended.
func appendKeys(identity string, keys []Key, tokens []int32) []Key {
	var prev Key
	if len(keys) > 0 {
		prev = keys[len(keys)-1]
	} else {
		seed := sha256.Sum256([]byte("tfd prompt cache\x00" + identity))
		copy(prev[:], seed[:])
	}
	buf := make([]byte, len(prev)+4*BlockTokens)
	for i := len(keys); i < len(tokens)/BlockTokens; i++ {
		copy(buf, prev[:])
		for j, t := range tokens[i*BlockTokens : (i+1)*BlockTokens] {
			binary.LittleEndian.PutUint32(buf[len(prev)+4*j:], uint32(t))
		}
		sum := sha256.Sum256(buf)
		copy(prev[:], sum[:])
		keys = append(keys, prev)
	}
	return keys
}
