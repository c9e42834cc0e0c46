package scheduler_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"tfd/batch"
	"tfd/compute"
	"tfd/scheduler"
	"tfd/scheduler/schedulertest"
)

// TestMTPChainsEqualUndrafted: with MTP chains of depth 1 to 4 (and n-gram copies after them),
// greedy and sampled replies are their undrafted selves, in shared rounds and alone on the lone
// driver, which drafts now: a lone drafted stream makes its tokens there, not in rounds of one,
// and the greedy one as drafted chains on the device.
func TestMTPChainsEqualUndrafted(t *testing.T) {
	m := loadBundled(t, 4*512)
	reqs := requests(m, 4)
	for i := range reqs {
		reqs[i].MaxTokens, reqs[i].StopTokens = 64, nil
	}
	want := solo(t, m, reqs)
	for depth := 1; depth <= 4; depth++ {
		// On a still clock pricing grants every draft proposed, so drafts land however busy the
		// machine is.
		opts := schedulertest.Equip(m, scheduler.SharedOptions{Layout: slices.Repeat([]int{512}, 4), Clock: schedulertest.StillClock()})
		chains := &countedDraftChains{DraftChainer: opts.DraftChainer}
		opts.DraftChainer = chains
		h, err := scheduler.NewShared(m, opts)
		if err != nil {
			t.Fatal(err)
		}
		var chans []<-chan scheduler.Event
		for _, req := range reqs {
			req.Drafts = scheduler.Drafts{MTP: depth, NGram: 2}
			events, err := h.Submit(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			chans = append(chans, events)
		}
		drafted, accepted := 0, 0
		for i, r := range drainAll(chans) {
			sameReply(t, fmt.Sprintf("depth %d, shared, stream %d (sampled %v)", depth, i, !reqs[i].Sampling.Greedy()), r, want[i])
			drafted, accepted = drafted+r.end.Drafted, accepted+r.end.Accepted
		}
		before := h.Stats().LoneTokens
		for i, req := range reqs[:2] { // one greedy, one sampled, each alone
			req.Drafts = scheduler.Drafts{MTP: depth}
			events, err := h.Submit(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			r := drain(events)
			sameReply(t, fmt.Sprintf("depth %d, alone, stream %d (sampled %v)", depth, i, !req.Sampling.Greedy()), r, want[i])
			drafted, accepted = drafted+r.end.Drafted, accepted+r.end.Accepted
		}
		lone := h.Stats().LoneTokens - before
		h.Close(context.Background())
		t.Logf("depth %d: %d drafts proposed, %d accepted; %d tokens of the lone streams on the lone driver, %d drafted chain steps",
			depth, drafted, accepted, lone, chains.steps)
		if accepted == 0 {
			t.Errorf("depth %d: no draft landed", depth)
		}
		if lone == 0 {
			t.Errorf("depth %d: the lone drafted streams made no token on the lone driver", depth)
		}
		if chains.steps == 0 {
			t.Errorf("depth %d: the lone greedy stream ran no drafted chain step on the device", depth)
		}
	}
}

// TestLoneDraftedEqualsSoloOnCPU: a reply alone on the lone driver with MTP chains of depth 1 to
// 4, with and without n-gram copies, greedy (on drafted chains) and sampled, and handed to shared
// rounds mid-chain, equals the same request run without drafts, each depth checked to have run
// drafted (the check every backend runs, schedulertest.CheckLoneDrafted).
func TestLoneDraftedEqualsSoloOnCPU(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the bundled model; skipped with -short")
	}
	b, err := compute.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	schedulertest.CheckLoneDrafted(t, b)
}

// countedDraftChains counts the drafted chain steps a host enqueues.
type countedDraftChains struct {
	batch.DraftChainer
	steps int
}

func (c *countedDraftChains) Step() error {
	c.steps++
	return c.DraftChainer.Step()
}

// TestLoneDraftedHandoffEqualsSolo: a drafted stream alone on the lone driver, mid-chain when a
// second drafted stream arrives, is handed to shared rounds with its chain; both replies equal
// their solo, undrafted selves, greedy and sampled, and greedy with MTP drafts alone, whose lone
// tokens come from drafted chains on the device.
func TestLoneDraftedHandoffEqualsSolo(t *testing.T) {
	m := loadBundled(t, 2*512)
	reqs := requests(m, 4)
	reqs[0].MaxTokens, reqs[1].MaxTokens = 96, 96 // the long ones: greedy, sampled
	reqs[2].MaxTokens, reqs[3].MaxTokens = 20, 20 // the newcomers, which end first
	for i := range reqs {
		reqs[i].StopTokens = nil
	}
	want := solo(t, m, reqs)
	for _, c := range []struct {
		pair   [2]int
		drafts scheduler.Drafts
	}{{[2]int{0, 3}, scheduler.Drafts{MTP: 3, NGram: 4}}, {[2]int{1, 2}, scheduler.Drafts{MTP: 3, NGram: 4}}, {[2]int{0, 3}, scheduler.Drafts{MTP: 3}}} {
		pair := c.pair
		opts := schedulertest.Equip(m, scheduler.SharedOptions{Layout: []int{512, 512}})
		chains := &countedDraftChains{DraftChainer: opts.DraftChainer}
		opts.DraftChainer = chains
		h, err := scheduler.NewShared(m, opts)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]reply, 2)
		first := reqs[pair[0]]
		first.Drafts = c.drafts
		events, err := h.Submit(context.Background(), first)
		if err != nil {
			t.Fatal(err)
		}
		var head []int32
		for ev := range events { // some tokens alone, so the newcomer arrives mid-reply
			if head = append(head, ev.Token); ev.Done || len(head) == 8 {
				break
			}
		}
		var wg sync.WaitGroup
		wg.Go(func() {
			rest := drain(events)
			got[0] = reply{tokens: append(head, rest.tokens...), end: rest.end}
		})
		second := reqs[pair[1]]
		second.Drafts = scheduler.Drafts{MTP: 2, NGram: 4}
		more, err := h.Submit(context.Background(), second)
		if err != nil {
			t.Fatal(err)
		}
		got[1] = drain(more)
		wg.Wait()
		s := h.Stats()
		h.Close(context.Background())
		for i, r := range got {
			req := reqs[pair[i]]
			sameReply(t, fmt.Sprintf("stream %d (sampled %v)", pair[i], !req.Sampling.Greedy()), r, want[pair[i]])
		}
		if s.Handoffs < 1 || s.LoneTokens < 8 || s.SharedTokens == 0 {
			t.Errorf("pair %v: %d handoffs, %d tokens on the lone driver, %d in shared rounds: want the first stream handed over mid-reply",
				pair, s.Handoffs, s.LoneTokens, s.SharedTokens)
		}
		if c.drafts.NGram == 0 && chains.steps == 0 {
			t.Errorf("pair %v, %+v: the lone greedy stream ran no drafted chain step before its handoff", pair, c.drafts)
		}
	}
}
