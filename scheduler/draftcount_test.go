package scheduler

import (
	"slices"
	"testing"
)

// TestDraftCountsBySourceAndDepth: a draft list counts by its position, the head's drafts first;
// depth 1 of each source shows from the start, deeper ones once drafted there.
func TestDraftCountsBySourceAndDepth(t *testing.T) {
	var c draftCounts
	want := []DraftCount{{SourceMTP, 1, 0, 0}, {SourceNGram, 1, 0, 0}}
	if got := c.snapshot(); !slices.Equal(got, want) {
		t.Fatalf("before any draft: %+v, want %+v", got, want)
	}
	// note counts a round's drafts of one stream as the lane does: all fed, then the first
	// landed of them as each lands.
	note := func(drafts, fromHead, landed int) {
		c.proposed(drafts, fromHead)
		for j := range landed {
			c.landed(j, fromHead)
		}
	}
	note(3, 1, 2)  // the head's draft and two copies; the first two landed
	note(2, 2, 0)  // a chain of two from the head, the first missed
	note(2, 0, 2)  // two copies, both landed
	note(40, 0, 0) // past the deepest depth counted apart
	want = []DraftCount{
		{SourceMTP, 1, 2, 1}, {SourceMTP, 2, 1, 0},
		{SourceNGram, 1, 2, 1}, {SourceNGram, 2, 3, 2}, {SourceNGram, 3, 2, 0},
	}
	for d := 4; d < draftDepths; d++ {
		want = append(want, DraftCount{SourceNGram, d, 1, 0})
	}
	want = append(want, DraftCount{SourceNGram, draftDepths, 40 - draftDepths + 1, 0})
	if got := c.snapshot(); !slices.Equal(got, want) {
		t.Errorf("counts\n got %+v\nwant %+v", got, want)
	}
}
