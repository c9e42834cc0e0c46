package scheduler

import (
	"slices"
	"testing"
)

func TestNGramProposals(t *testing.T) {
	tests := []struct {
		name   string
		tokens []int32
		k      int
		want   []int32
	}{
		{"copies what followed the earlier trigram", []int32{1, 2, 3, 4, 5, 9, 1, 2, 3}, 3, []int32{4, 5, 9}},
		{"the latest earlier occurrence wins", []int32{1, 2, 3, 7, 1, 2, 3, 8, 1, 2, 3}, 2, []int32{8, 1}},
		{"falls back to a bigram", []int32{5, 2, 3, 6, 9, 2, 3}, 2, []int32{6, 9}},
		{"stops at the end of the context", []int32{4, 4, 4}, 5, []int32{4}},
		{"nothing matches", []int32{1, 2, 3, 4}, 3, nil},
		{"k of zero", []int32{1, 2, 1, 2}, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var x ngramIndex
			got := x.propose(nil, tt.tokens, nil, tt.k)
			if !slices.Equal(got, tt.want) {
				t.Fatalf("propose(%v, %d) = %v, want %v", tt.tokens, tt.k, got, tt.want)
			}
		})
	}
}

// TestNGramIndexGrowsWithTheStream: proposing as tokens arrive one by one gives what a fresh
// index gives for the whole sequence.
func TestNGramIndexGrowsWithTheStream(t *testing.T) {
	seq := []int32{3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3, 2, 3, 8, 4, 6, 2, 6, 4, 3, 3, 1, 4, 1, 5}
	var grown ngramIndex
	for n := 1; n <= len(seq); n++ {
		var fresh ngramIndex
		if a, b := grown.propose(nil, seq[:n], nil, 4), fresh.propose(nil, seq[:n], nil, 4); !slices.Equal(a, b) {
			t.Fatalf("after %d tokens: incremental %v, fresh %v", n, a, b)
		}
	}
}

// TestNGramProposesAfterMore: proposing after tokens and one token more is proposing over the
// sequence with that token appended, and indexes only tokens.
func TestNGramProposesAfterMore(t *testing.T) {
	seq := []int32{5, 6, 7, 8, 5, 6, 7, 9, 5, 6, 7, 8, 5, 6}
	for n := 1; n < len(seq); n++ {
		var split, whole ngramIndex
		a := split.propose(nil, seq[:n-1], seq[n-1:n], 4)
		b := whole.propose(nil, seq[:n], nil, 4)
		if !slices.Equal(a, b) {
			t.Fatalf("prefix %v: %v with the last token as more, %v with it in the sequence", seq[:n], a, b)
		}
		if split.indexed > n-1 {
			t.Fatalf("prefix %v: indexed %d tokens, past the %d real ones", seq[:n], split.indexed, n-1)
		}
	}
}
