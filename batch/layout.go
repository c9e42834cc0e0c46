package batch

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Layout lists the capacities in tokens of a host's sessions, largest first: the order of its
// text form ("65536,32768x3,16384x11").
type Layout []int

// maxSessions bounds a layout's session count, far above what any machine holds.
const maxSessions = 4096

// ParseLayout reads a session layout such as "65536,32768x3,16384x11": a comma-separated list of
// session capacities in tokens, each optionally repeated with xCOUNT, in any order. An empty
// layout gives nil: sizes come from memory.
func ParseLayout(s string) (Layout, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var sizes Layout
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
	return sizes.Sorted(), nil
}

// Sorted returns a copy of l, largest first.
func (l Layout) Sorted() Layout {
	sorted := slices.Clone(l)
	slices.SortFunc(sorted, func(a, b int) int { return b - a })
	return sorted
}

// Total returns the KV slots the layout's sessions take together.
func (l Layout) Total() int {
	total := 0
	for _, n := range l {
		total += n
	}
	return total
}

// String writes l in ParseLayout's form, largest first, with runs folded: the inverse of
// ParseLayout up to order.
func (l Layout) String() string {
	sorted := l.Sorted()
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
