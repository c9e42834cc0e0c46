package scheduler

import "sync/atomic"

// Draft counts by source and depth tell which drafts pay: the MTP head's first guess lands far
// more often than a copied line's fifth token, and deeper MTP chains are worth drafting only
// where their depths land. The lane counts them as it verifies; Stats reads them.

// The sources of a draft, as Stats.Drafts and /metrics name them.
const (
	SourceMTP   = "mtp"   // the model's MTP head
	SourceNGram = "ngram" // copied from the stream's own context
)

// draftDepths bounds the depths counted apart; deeper drafts count at the deepest.
const draftDepths = 32

// DraftCount is how many drafts from one source at one depth (1: the first draft after the
// newest token, counted over a stream's whole draft list) were fed to a round, and how many of
// those landed.
type DraftCount struct {
	Source             string
	Depth              int
	Proposed, Accepted uint64
}

// draftCounts holds the counts: [source][depth-1][0: proposed, 1: accepted].
type draftCounts [2][draftDepths][2]atomic.Uint64

// proposed counts a round's drafts of one stream as fed: drafts of them, the first fromHead the
// MTP head's and the rest copies. The lane counts them before it verifies any, and each landed
// draft (landed) as it lands, so that the counts are whole before a token that ends the stream
// is sent: a reader that hears the end and then reads Stats finds the stream's drafts counted.
func (c *draftCounts) proposed(drafts, fromHead int) {
	for j := range drafts {
		c.at(j, fromHead)[0].Add(1)
	}
}

// landed counts that draft j of a round's drafts of one stream, the first fromHead of which are
// the MTP head's, landed.
func (c *draftCounts) landed(j, fromHead int) { c.at(j, fromHead)[1].Add(1) }

// at returns the proposed and accepted counts of draft j, by its source and depth.
func (c *draftCounts) at(j, fromHead int) *[2]atomic.Uint64 {
	src := 1
	if j < fromHead {
		src = 0
	}
	return &c[src][min(j, draftDepths-1)]
}

// snapshot lists the counts, source by source and depth by depth: depth 1 of each source always,
// so that rates can be taken from the start, and deeper ones once a draft was fed there.
func (c *draftCounts) snapshot() []DraftCount {
	var out []DraftCount
	for src, name := range []string{SourceMTP, SourceNGram} {
		for d := range draftDepths {
			proposed := c[src][d][0].Load()
			if d > 0 && proposed == 0 {
				continue
			}
			out = append(out, DraftCount{Source: name, Depth: d + 1, Proposed: proposed, Accepted: c[src][d][1].Load()})
		}
	}
	return out
}
