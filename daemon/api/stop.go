package api

import "strings"

// stopMatcher finds stop strings in a reply's text as it arrives, across token boundaries. It
// holds back any tail of the text that could be the start of a stop string, so text that a stop
// string would remove is never emitted. The zero value with no stops passes text through.
type stopMatcher struct {
	stops []string
	held  string // emitted by the decoder, not yet released: a prefix of some stop string
}

// push adds text and returns the part that is safe to emit. When a stop string is complete,
// stopped is true and out is the text before it; the stop string and anything after it are
// dropped, and the matcher must not be used again.
func (m *stopMatcher) push(text string) (out string, stopped bool) {
	if len(m.stops) == 0 {
		return text, false
	}
	buf := m.held + text
	if i := m.earliest(buf); i >= 0 {
		m.held = ""
		return buf[:i], true
	}
	keep := m.partial(buf)
	m.held = buf[len(buf)-keep:]
	return buf[:len(buf)-keep], false
}

// flush returns the held text at the end of the reply: it started a stop string that never
// completed, so it is part of the reply.
func (m *stopMatcher) flush() string {
	out := m.held
	m.held = ""
	return out
}

// earliest returns the index of the first stop string in buf, or -1.
func (m *stopMatcher) earliest(buf string) int {
	first := -1
	for _, s := range m.stops {
		if i := strings.Index(buf, s); i >= 0 && (first < 0 || i < first) {
			first = i
		}
	}
	return first
}

// partial returns the length of the longest tail of buf that is a proper prefix of a stop string.
func (m *stopMatcher) partial(buf string) int {
	longest := 0
	for _, s := range m.stops {
		for n := min(len(s)-1, len(buf)); n > longest; n-- {
			if strings.HasSuffix(buf, s[:n]) {
				longest = n
				break
			}
		}
	}
	return longest
}
