package scheduler

import (
	"slices"

	"tfd/batch"
)

// session is a range of KV slots that one stream holds at a time. Its keys and values outlive
// the stream: kept lists the tokens whose keys and values it still holds, position by position,
// so that a next stream whose prompt starts the same way need not compute them again.
type session struct {
	base, capacity int
	holder         *active // nil when free
	kept           []int32
}

// reusable returns how many leading tokens of prompt a stream taking s need not feed: the
// common prefix of s.kept and prompt, less one so that the last shared position is fed again
// (which rewrites the same bits and gives the MTP head its own entry there), and short of the
// prompt's last token, whose logits the stream needs.
func (s *session) reusable(prompt []int32) int {
	n := 0
	for n < len(s.kept) && n < len(prompt)-1 && s.kept[n] == prompt[n] {
		n++
	}
	return max(0, n-1)
}

// sessionPool places the sessions of the layout in force side by side in the model's KV pool,
// smallest first. After a layout change, sessions of the earlier layout that still hold a stream
// are retiring: their streams finish where they are, and a session of the new layout that shares
// a KV slot with one of them stays unavailable until it is given up. So a layout change applies at
// once to whatever of the new layout is already free, and to the rest as running replies end.
type sessionPool struct {
	sessions []*session // the layout in force, smallest first
	retiring []*session // sessions of earlier layouts that a stream still holds
	// resumable, when set (the model's batch.Stateful), says from which position a session can
	// be fed again: a kept prefix is reused only up to there.
	resumable func(base, want int) int
}

// relayout puts the layout sizes in force. A new session with the bounds of a
// free old one keeps what that one kept, so a reload that leaves a session as it was costs no
// chat its warm start.
func (p *sessionPool) relayout(sizes batch.Layout) {
	old := map[[2]int]*session{}
	for _, s := range p.sessions {
		if s.holder != nil {
			p.retiring = append(p.retiring, s)
		} else {
			old[[2]int{s.base, s.capacity}] = s
		}
	}
	p.sessions = p.sessions[:0:0]
	base := 0
	for _, n := range slices.Backward(sizes.Sorted()) { // smallest first
		s := &session{base: base, capacity: n}
		if o := old[[2]int{base, n}]; o != nil {
			s.kept = o.kept
		}
		p.sessions = append(p.sessions, s)
		base += n
	}
}

// largest returns the capacity of the largest session of the layout in force.
func (p *sessionPool) largest() int { return p.sessions[len(p.sessions)-1].capacity }

// available reports whether s is free and shares no KV slot with a retiring session.
func (p *sessionPool) available(s *session) bool {
	if s.holder != nil {
		return false
	}
	for _, r := range p.retiring {
		if r.holder != nil && r.base < s.base+s.capacity && s.base < r.base+r.capacity {
			return false
		}
	}
	return true
}

// prune forgets the retiring sessions whose streams have ended; it reports whether any were.
func (p *sessionPool) prune() bool {
	n := len(p.retiring)
	p.retiring = slices.DeleteFunc(p.retiring, func(s *session) bool { return s.holder == nil })
	return len(p.retiring) < n
}

// bestFree returns the available session holding at least need tokens that keeps the longest
// start of prompt, the smallest such on a tie, or nil; and how many prompt tokens it keeps. A
// session keeping no more than cached tokens, which the prompt cache restores into any session,
// counts as keeping none.
func (p *sessionPool) bestFree(need int, prompt []int32, cached int) (*session, int) {
	var best *session
	kept := 0
	for _, s := range p.sessions { // sorted by capacity: on a tie the first is the smallest
		if s.capacity < need || !p.available(s) {
			continue
		}
		n := s.reusable(prompt)
		if p.resumable != nil {
			n = p.resumable(s.base, n)
		}
		if best == nil || n > max(kept, cached) {
			best, kept = s, n
		}
	}
	return best, kept
}

// smallestFree returns the smallest available session holding at least need tokens, or nil.
func (p *sessionPool) smallestFree(need int) *session {
	for _, s := range p.sessions { // sorted by capacity
		if s.capacity >= need && p.available(s) {
			return s
		}
	}
	return nil
}

// retiringLayout returns the capacities of the retiring sessions, largest first.
func (p *sessionPool) retiringLayout() batch.Layout {
	var sizes batch.Layout
	for _, s := range p.retiring {
		sizes = append(sizes, s.capacity)
	}
	return sizes.Sorted()
}
