package scheduler

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// maxSessions bounds a layout's session count, far above what any machine holds.
const maxSessions = 4096

// ParseLayout reads a session layout such as "65536,32768x3,16384x11": a comma-separated list of
// session capacities in tokens, each optionally repeated with xCOUNT. The result is sorted from
// the smallest session to the largest. An empty layout gives nil: sizes come from memory.
func ParseLayout(s string) ([]int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var sizes []int
	for part := range strings.SplitSeq(s, ",") {
		size, count, repeated := strings.Cut(strings.TrimSpace(part), "x")
		n, err := strconv.Atoi(size)
		k := 1
		if err == nil && repeated {
			k, err = strconv.Atoi(count)
		}
		if err != nil || n <= 0 || k <= 0 {
			return nil, fmt.Errorf("session layout %q: %q is not TOKENS or TOKENSxCOUNT with positive numbers (e.g. \"65536,32768x3\")", s, part)
		}
		if k > maxSessions-len(sizes) {
			return nil, fmt.Errorf("session layout %q: more than %d sessions", s, maxSessions)
		}
		sizes = append(sizes, slices.Repeat([]int{n}, k)...)
	}
	slices.Sort(sizes)
	return sizes, nil
}

// FormatLayout writes sizes back in ParseLayout's form, largest first, with runs folded: the
// inverse of ParseLayout up to order.
func FormatLayout(sizes []int) string {
	sorted := slices.Clone(sizes)
	slices.Sort(sorted)
	slices.Reverse(sorted)
	var parts []string
	for i := 0; i < len(sorted); {
		j := i
		for j < len(sorted) && sorted[j] == sorted[i] {
			j++
		}
		if j-i == 1 {
			parts = append(parts, strconv.Itoa(sorted[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%dx%d", sorted[i], j-i))
		}
		i = j
	}
	return strings.Join(parts, ",")
}

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

// sessionPool places sessions side by side in the model's KV pool, smallest first.
type sessionPool struct {
	sessions []*session
}

func newSessionPool(sizes []int) *sessionPool {
	p := &sessionPool{}
	base := 0
	for _, n := range sizes {
		p.sessions = append(p.sessions, &session{base: base, capacity: n})
		base += n
	}
	return p
}

// largest returns the capacity of the largest session.
func (p *sessionPool) largest() int { return p.sessions[len(p.sessions)-1].capacity }

// bestFree returns the free session holding at least need tokens that keeps the longest start of
// prompt, the smallest such on a tie, or nil; and how many prompt tokens it keeps.
func (p *sessionPool) bestFree(need int, prompt []int32) (*session, int) {
	var best *session
	kept := 0
	for _, s := range p.sessions { // sorted by capacity: on a tie the first is the smallest
		if s.holder != nil || s.capacity < need {
			continue
		}
		if n := s.reusable(prompt); best == nil || n > kept {
			best, kept = s, n
		}
	}
	return best, kept
}

// smallestFree returns the smallest free session holding at least need tokens, or nil.
func (p *sessionPool) smallestFree(need int) *session {
	for _, s := range p.sessions { // sorted by capacity
		if s.holder == nil && s.capacity >= need {
			return s
		}
	}
	return nil
}

// inUse counts the sessions held by a stream.
func (p *sessionPool) inUse() int {
	n := 0
	for _, s := range p.sessions {
		if s.holder != nil {
			n++
		}
	}
	return n
}
