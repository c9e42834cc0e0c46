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
// matching suffix of tokens, appended to dst[:0]; none when nothing matches.
func (x *ngramIndex) propose(dst, tokens []int32, k int) []int32 {
	dst = dst[:0]
	if k <= 0 {
		return dst
	}
	if x.last == nil {
		x.last = make(map[uint64]int)
	}
	// Index every n-gram ending before the newest token, so the suffix finds only earlier ones.
	for ; x.indexed < len(tokens)-1; x.indexed++ {
		for _, n := range ngramSizes {
			if end := x.indexed; end+1 >= n {
				if key, ok := ngramKey(tokens[end+1-n : end+1]); ok {
					x.last[key] = end
				}
			}
		}
	}
	for _, n := range ngramSizes {
		if len(tokens) < n {
			continue
		}
		key, ok := ngramKey(tokens[len(tokens)-n:])
		if !ok {
			continue
		}
		if end, found := x.last[key]; found {
			next := tokens[end+1 : min(end+1+k, len(tokens))]
			return append(dst, next...)
		}
	}
	return dst
}
