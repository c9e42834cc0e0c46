package scheduler

import (
	"math"
	"time"
)

// Priced rounds: a draft token costs a row of the round and yields a token only if it lands. The
// lane learns both sides where it runs — what a round of r rows takes (a pricer, timed at load
// by calibrate and refined by every round) and how often a draft at each depth lands once those
// before it have (landing) — and grants each decoding stream the drafts that raise the round's
// tokens per unit of time. Replies do not depend on any of it: drafts change only how fast the
// same tokens come.

// A pricer estimates how long a round of r rows takes, T(r) = fixed + perRow·r, by least squares
// over the rounds it has timed, recent ones weighing more. It starts from the line timed at load
// (seed), else from a guess: only the ratio of the two matters, and a round's fixed part is taken
// to cost as much as ten rows. While the rounds seen do not vary enough in size to fit a line of
// their own (a lane of one decoding stream runs rounds of one size), it keeps the last line it
// had: a machine's cost per row does not change because the rounds stopped varying.
type pricer struct {
	w, sr, srr, st, srt float64 // decayed sums of 1, r, r², t, r·t
	known               bool    // last holds a line fitted to timed rounds
	last                [2]float64
}

// decay is how much each earlier observation counts relative to the next: about the last few
// hundred decide.
const decay = 0.995

// observe records that a round of rows rows took d.
func (p *pricer) observe(rows int, d time.Duration) {
	r, t := float64(rows), d.Seconds()
	p.w, p.sr, p.srr, p.st, p.srt = p.w*decay+1, p.sr*decay+r, p.srr*decay+r*r, p.st*decay+t, p.srt*decay+r*t
}

// seed makes the line fitted to the rounds observed so far (the forwards timed at load) the one
// the pricer starts from; it keeps the guess if they do not span two sizes.
func (p *pricer) seed() {
	if fixed, perRow, ok := p.fit(); ok {
		p.known, p.last = true, [2]float64{fixed, perRow}
	}
}

// fit returns the least-squares line through the rounds observed, or false when their sizes
// vary by less than a row.
func (p *pricer) fit() (fixed, perRow float64, ok bool) {
	den := p.w*p.srr - p.sr*p.sr
	if den < p.w*p.w || den <= 0 {
		return 0, 0, false
	}
	perRow = (p.w*p.srt - p.sr*p.st) / den
	return (p.st - perRow*p.sr) / p.w, perRow, true
}

// line returns the fixed cost of a round and cost of a row, and whether they are timings in
// seconds rather than the guess or the line that grants every draft.
func (p *pricer) line() (fixed, perRow float64, timed bool) {
	fixed, perRow, ok := p.fit()
	switch {
	case ok && p.w >= 4:
		p.known, p.last = true, [2]float64{fixed, perRow}
	case p.known: // too few rounds, or sizes that vary too little: the last line fitted
		fixed, perRow = p.last[0], p.last[1]
	default:
		return 10, 1, false
	}
	if perRow <= 0 {
		return 1, 1e-9, false // rows come free: grant every draft proposed
	}
	return math.Max(fixed, 0), perRow, true
}

// maxDepth bounds the draft depths landing keeps figures for; deeper drafts count as the deepest.
const maxDepth = 16

// landing counts, for each draft depth, the drafts verified there (all before them had landed)
// and those that landed. Drafts come in runs — a copied line lands token after token, a miss ends
// the run — so the chance at depth j given depth j-1 landed is what prices the next draft.
type landing struct {
	reached, landed [maxDepth]float64 // decayed counts
}

// note records a stream's verified drafts: depths below landed landed; the one at landed, if
// reached > landed, missed. The figures of every depth fade, reached or not: a depth that priced
// itself out (a few early misses) drifts back toward even odds and is tried again, where it would
// otherwise never be granted, never reached, and never learnt better.
func (x *landing) note(reached, landed int) {
	for j := range maxDepth {
		x.reached[j] *= decay
		x.landed[j] *= decay
		if j < min(reached, maxDepth) {
			x.reached[j]++
		}
		if j < landed {
			x.landed[j]++
		}
	}
}

// chance returns the chance that a draft at depth j lands once those before it have, with three
// landed and one missed added: a depth never seen starts at 3 in 4, so that it is tried where a
// draft costs a good part of a forward (a step of the MTP head), and learnt; a head that never
// lands falls under 1 in 8 within 20 misses.
func (x *landing) chance(j int) float64 {
	j = min(j, maxDepth-1)
	return (x.landed[j] + 3) / (x.reached[j] + 4)
}

// price trims the decoding streams' proposed drafts to the depths that make the round yield the
// most tokens per unit of time within budget rows. Drafts are granted one at a time to the
// stream whose next draft yields the most per cost (its chance to land, the product of the
// chances up to its depth, over the row it adds and what else it costs: hostCosts), while that
// chance per cost beats the round's tokens per unit of time. onDevice says the streams' drafts
// are made and verified on the device (a drafted chain): there the host picks nothing, and a
// draft of the head costs a step of the head that the device runs and the host does not wait
// for: the head's share of a forward's weights (batch.StepSharer) of a forward of one row, or,
// from a head that does not say, the host's call of the head, which is more (the wait and the
// logits read back on top). It sets each stream's grant and how deep its head chains next
// (paceHead).
func (l *laneState) price(decoding []*active, budget int, onDevice bool) {
	fixed, perRow, timed := l.pricer.line()
	var host hostCosts
	if timed { // host costs are seconds: only a timed line is in those units
		host = l.costs
		if onDevice {
			host.pick = [2]float64{}
			if l.headShare > 0 {
				host.head = l.headShare * (fixed + perRow)
			}
		}
	}
	tokens := float64(len(decoding))
	elapsed := fixed + perRow*tokens
	var heads [maxDepth]float64 // the streams with a draft of the head at each depth, which share its call
	l.depth = l.depth[:0]
	l.gain = l.gain[:0]
	for _, a := range decoding {
		elapsed += host.pick[picks(a)]
		for j := range min(a.fromHead, maxDepth) {
			heads[j]++
		}
		l.depth = append(l.depth, 0)
		l.gain = append(l.gain, l.landing[picks(a)].chance(0))
	}
	// cost is what stream i's next draft adds to the round: its row, the pick of the row after it
	// if it lands, and for a draft of the head its share of the head's call and its own pick.
	cost := func(i int) float64 {
		a, j := decoding[i], l.depth[i]
		pick := host.pick[picks(a)]
		c := perRow + l.gain[i]*pick
		if j < a.fromHead {
			c += host.head/heads[min(j, maxDepth-1)] + pick
		}
		return c
	}
	for ; budget > 0; budget-- {
		best, bestYield := -1, 0.0
		for i, a := range decoding {
			if l.depth[i] < len(a.drafts) {
				if y := l.gain[i] / cost(i); best < 0 || y > bestYield {
					best, bestYield = i, y
				}
			}
		}
		if best < 0 || l.gain[best]*elapsed <= tokens*cost(best) {
			break
		}
		tokens, elapsed = tokens+l.gain[best], elapsed+cost(best)
		l.depth[best]++
		l.gain[best] *= l.landing[picks(decoding[best])].chance(l.depth[best])
	}
	for i, a := range decoding {
		// Refused by its price, not by the budget: the head's next draft would not pay.
		refused := l.depth[i] < a.fromHead && l.gain[i]*elapsed <= tokens*cost(i)
		a.drafts = a.drafts[:l.depth[i]]
		a.granted = l.depth[i]
		a.paceHead(refused)
	}
}
