package scheduler

import (
	"math"
	"testing"
	"time"
)

func TestPricerFitsALine(t *testing.T) {
	var p pricer
	if f, r, _ := p.line(); f != 10 || r != 1 {
		t.Fatalf("with no rounds seen: fixed %v, per row %v; want the 10:1 assumption", f, r)
	}
	for i := range 40 {
		rows := 1 + i%16
		p.observe(rows, time.Duration(2000+150*rows)*time.Microsecond)
	}
	f, r, _ := p.line()
	if math.Abs(f-0.002) > 1e-6 || math.Abs(r-0.00015) > 1e-8 {
		t.Fatalf("fit fixed %v s, per row %v s; the rounds took 2 ms + 0.15 ms a row", f, r)
	}
}

func TestLandingCountsRuns(t *testing.T) {
	var x landing
	if c := x.chance(0); c != 0.75 {
		t.Fatalf("an unseen depth has chance %v, want 3 in 4", c)
	}
	for range 100 {
		x.note(4, 4) // four drafts, all landed
		x.note(1, 0) // one draft, missed
	}
	if c0, c3 := x.chance(0), x.chance(3); !(c0 > 0.4 && c0 < 0.6) || c3 < 0.95 {
		t.Fatalf("chance at depth 0 %v (half the runs start), at depth 3 %v (every run that got there went on)", c0, c3)
	}
}

// TestLandingForgetsDepthsNotReached: a depth that missed its first drafts and then went
// untried (pricing no longer grants it) drifts back toward the odds of a depth never seen, so it
// is tried again.
func TestLandingForgetsDepthsNotReached(t *testing.T) {
	var x landing
	for range 12 {
		x.note(2, 1) // depth 1 reached and missed
	}
	early := x.chance(1)
	for range 500 {
		x.note(1, 1) // only depth 0 drafted from now on
	}
	if late := x.chance(1); early > 0.2 || late < 0.6 {
		t.Fatalf("depth 1 after 12 misses: chance %v; after 500 notes without it: %v, want it back near 3 in 4", early, late)
	}
}

// TestPriceGrantsDraftsWhereTheyPay: with rows nearly free beside a round's fixed cost, a likely
// draft run is granted whole; with rows as dear as the round, none is.
func TestPriceGrantsDraftsWhereTheyPay(t *testing.T) {
	streams := func() []*active {
		return []*active{{stream: &stream{}, drafts: []int32{1, 2, 3, 4}}, {stream: &stream{}, drafts: []int32{5, 6}}}
	}
	var l laneState
	for range 50 {
		l.landing[0].note(4, 4)
	}
	for i := range 40 { // cheap rows: 5 ms a round, 0.01 ms a row
		l.pricer.observe(1+i%20, time.Duration(5000+10*(1+i%20))*time.Microsecond)
	}
	cheap := streams()
	l.price(cheap, 64, false)
	if len(cheap[0].drafts) != 4 || len(cheap[1].drafts) != 2 {
		t.Errorf("cheap rows: drafts kept %d and %d of 4 and 2", len(cheap[0].drafts), len(cheap[1].drafts))
	}
	l.pricer = pricer{}
	for i := range 40 { // dear rows: nothing fixed, 1 ms a row
		l.pricer.observe(1+i%20, time.Duration(1000*(1+i%20))*time.Microsecond)
	}
	dear := streams()
	l.price(dear, 64, false)
	if len(dear[0].drafts) != 0 || len(dear[1].drafts) != 0 {
		t.Errorf("dear rows: drafts kept %d and %d, want none", len(dear[0].drafts), len(dear[1].drafts))
	}
	budget := streams()
	l.pricer = pricer{}
	l.price(budget, 3, false) // the 10:1 assumption grants all it can; the budget stops it
	if n := len(budget[0].drafts) + len(budget[1].drafts); n != 3 {
		t.Errorf("a budget of 3 rows granted %d drafts", n)
	}
}

// TestPricerKeepsItsLineWhileRoundsDoNotVary: a pricer seeded with timed forwards refines that
// line from rounds of several sizes, and keeps the last line it fitted, not the guess, once the
// rounds seen have all been one size for long enough that they cannot fit a line of their own.
func TestPricerKeepsItsLineWhileRoundsDoNotVary(t *testing.T) {
	var p pricer
	for r := 1; r <= 64; r *= 2 {
		p.observe(r, time.Duration(1000+100*r)*time.Microsecond)
	}
	p.seed()
	if f, r, _ := p.line(); math.Abs(f-0.001) > 1e-9 || math.Abs(r-0.0001) > 1e-9 {
		t.Fatalf("seeded: fixed %v s, per row %v s; want the timed 1 ms + 0.1 ms", f, r)
	}
	for i := range 1000 { // the machine turns out slower per row
		rows := 1 + i%8
		p.observe(rows, time.Duration(1000+200*rows)*time.Microsecond)
	}
	if _, r, _ := p.line(); math.Abs(r-0.0002) > 0.00001 {
		t.Errorf("after rounds at 0.2 ms a row, the pricer still says %v s a row", r)
	}
	for range 3000 { // one stream decoding alone: every round one row
		p.observe(1, 1200*time.Microsecond)
		p.line() // as each round's price does
	}
	if _, _, ok := p.fit(); ok {
		t.Fatal("3000 rounds of one row still fit a line of their own")
	}
	if f, r, _ := p.line(); math.Abs(f-0.001) > 0.00002 || math.Abs(r-0.0002) > 0.00002 {
		t.Errorf("after rounds of one size: fixed %v s, per row %v s; want the last line, 1 ms + 0.2 ms", f, r)
	}
}

// TestPriceCountsTheHostsCosts: where drafts are made and verified on the host, a draft costs
// the picks of its rows besides its row, and a draft of the MTP head a call of the head too. With
// sampled picks of 3 ms (a large vocabulary) beside forwards of 5 ms, a sampled stream whose
// drafts land half the time is granted copies but no draft of the head, and pricing says it
// refused the head; a greedy stream's drafts verified on the device (a drafted chain) cost their
// rows and the head's steps, no picks, and are all granted. A step of the head on the device is
// priced as the host's call of it, or as its share of a forward's weights where the head says.
func TestPriceCountsTheHostsCosts(t *testing.T) {
	var l laneState
	for range 50 {
		l.landing[0].note(4, 4)
		l.landing[1].note(1, 0)
		l.landing[1].note(2, 1)
	}
	for i := range 40 { // 5 ms a forward, 0.01 ms a row
		l.pricer.observe(1+i%20, time.Duration(5000+10*(1+i%20))*time.Microsecond)
	}
	l.costs = hostCosts{head: 0.001, pick: [2]float64{0.00001, 0.003}}
	sampled := func() *active {
		return &active{stream: &stream{req: Request{Sampling: Sampling{Temperature: 0.8, Seed: 1}}},
			drafts: []int32{1, 2, 3, 4}, fromHead: 2}
	}
	a := sampled()
	l.price([]*active{a}, 64, false)
	if a.granted != 0 || !a.headRefused || a.headCap != 0 {
		t.Errorf("sampled, picks dear: granted %d, refused %v, head chains %d; want nothing granted and the head refused", a.granted, a.headRefused, a.headCap)
	}
	a = sampled()
	a.fromHead = 0 // the same four drafts as copies: each costs its row and a pick if it lands
	l.price([]*active{a}, 64, false)
	if a.granted == 0 || a.headRefused {
		t.Errorf("sampled copies: granted %d of 4, refused %v; want some granted", a.granted, a.headRefused)
	}
	greedy := &active{stream: &stream{}, drafts: []int32{1, 2, 3, 4}, fromHead: 4}
	l.price([]*active{greedy}, 64, true)
	if greedy.granted != 4 || greedy.headCap != 5 {
		t.Errorf("greedy on the device: granted %d of 4, head chains %d next; want all and one deeper", greedy.granted, greedy.headCap)
	}
	l.costs.head = 0.006 // a step of the head dearer than a forward: no draft of it pays
	greedy = &active{stream: &stream{}, drafts: []int32{1, 2, 3, 4}, fromHead: 4}
	l.price([]*active{greedy}, 64, true)
	if greedy.granted != 0 || !greedy.headRefused {
		t.Errorf("greedy on the device, head dear: granted %d of 4, refused %v; want none and the head refused", greedy.granted, greedy.headRefused)
	}
	l.headShare = 0.1 // a head that reads a tenth of a forward's weights: its steps on the device cost that
	greedy = &active{stream: &stream{}, drafts: []int32{1, 2, 3, 4}, fromHead: 4}
	l.price([]*active{greedy}, 64, true)
	if greedy.granted != 4 {
		t.Errorf("greedy on the device, a tenth of a forward a step: granted %d of 4, want all", greedy.granted)
	}
}

// TestPaceHeadBacksOff: after pricing refuses the head's next draft, the head chains no deeper
// than it was granted for 1, then 3, 7 … rounds, up to maxHeadWait, before it tries one more.
func TestPaceHeadBacksOff(t *testing.T) {
	a := &active{granted: 1}
	tries := 0
	for round := range 300 {
		refused := false
		if a.headCap > a.granted { // it tries one deeper: refused again
			tries++
			refused = true
		}
		if round == 0 {
			refused = true
		}
		a.paceHead(refused)
		if a.headCap < a.granted {
			t.Fatalf("round %d: the head chains %d, under the %d granted", round, a.headCap, a.granted)
		}
	}
	// Waits of 1, 3, 7, 15, 31, then 64 each: 300 rounds hold about 9 tries.
	if tries < 5 || tries > 10 {
		t.Errorf("%d tries in 300 rounds of refusals", tries)
	}
}
