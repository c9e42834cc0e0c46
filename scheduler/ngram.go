package scheduler

// ngramIndex proposes drafts by copying: when a stream's last n tokens appeared earlier in its own
// context (prompt or reply), the tokens that followed them then are likely to follow now (code
// repeats identifiers, call patterns, whole lines). It keeps, for each n-gram, the position where
// its latest earlier occurrence ended.
type ngramIndex struct {
	last    map[uint64]int
	indexed int // n-grams ending before this position are in last
}

// ngramSizes are tried longest first: a longer match predicts better, a shorter one matches more.
var ngramSizes = []int{3, 2}

const ngramBits = 20 // token ids must fit, so a key packs up to 3 ids and n

func ngramKey(tokens []int32) (uint64, bool) {
	key := uint64(len(tokens))
	for _, t := range tokens {
		if t < 0 || t >= 1<<ngramBits {
			return 0, false
		}
		key = key<<ngramBits | uint64(t)
	}
	return key, true
}

// propose returns up to k tokens that followed the latest earlier occurrence of the longest
// matching suffix of the sequence tokens+more, appended to dst[:0]; none when nothing matches.
// more holds what a stream's sequence is taken to continue with (the MTP head's draft), if
// anything; only tokens is indexed for later calls.
func (x *ngramIndex) propose(dst, tokens, more []int32, k int) []int32 {
	dst = dst[:0]
	if k <= 0 {
		return dst
	}
	end, found := x.match(tokens, more)
	if !found {
		return dst
	}
	n := len(tokens) + len(more)
	for i := end + 1; i < min(end+1+k, n); i++ {
		if i < len(tokens) {
			dst = append(dst, tokens[i])
		} else {
			dst = append(dst, more[i-len(tokens)])
		}
	}
	return dst
}

// copies reports whether propose would copy anything after tokens alone.
func (x *ngramIndex) copies(tokens []int32) bool {
	end, found := x.match(tokens, nil)
	return found && end+1 < len(tokens) // an occurrence indexed up to the newest token copies nothing
}

// match indexes tokens and returns where the latest earlier occurrence of the longest matching
// suffix of tokens+more ended, if there is one.
func (x *ngramIndex) match(tokens, more []int32) (end int, found bool) {
	if x.last == nil {
		x.last = make(map[uint64]int)
	}
	n := len(tokens) + len(more)
	// Index every n-gram of tokens ending before the newest token, so that the suffix finds only
	// earlier ones.
	for ; x.indexed < min(n-1, len(tokens)); x.indexed++ {
		for _, size := range ngramSizes {
			if end := x.indexed; end+1 >= size {
				if key, ok := ngramKey(tokens[end+1-size : end+1]); ok {
					x.last[key] = end
				}
			}
		}
	}
	var suffix [3]int32
	for _, size := range ngramSizes {
		if n < size {
			continue
		}
		for i := range size {
			if j := n - size + i; j < len(tokens) {
				suffix[i] = tokens[j]
			} else {
				suffix[i] = more[j-len(tokens)]
			}
		}
		if key, ok := ngramKey(suffix[:size]); ok {
			if end, found := x.last[key]; found {
				return end, true
			}
		}
	}
	return 0, false
}
