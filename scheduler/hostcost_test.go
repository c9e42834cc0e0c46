package scheduler_test

import (
	"context"
	"testing"
	"time"

	"tfd/batch"
	"tfd/engine"
	"tfd/scheduler"
	"tfd/scheduler/schedulertest"
)

// TestDearHeadIsDropped: on a clock where a call of the MTP head costs as much as a forward, a
// stream alone with MTP drafts, sampled or greedy, drops the head at its first priced forward
// (no draft is fed) and runs as with drafts off, the greedy one as undrafted chains on the
// device; both replies equal their undrafted selves.
func TestDearHeadIsDropped(t *testing.T) {
	m := loadBundled(t, 512)
	reqs := requests(m, 2) // one greedy, one sampled
	for i := range reqs {
		reqs[i].MaxTokens, reqs[i].StopTokens = 64, nil
	}
	want := solo(t, m, reqs)
	clock := &dearHead{Model: m, at: time.Now()}
	opts := schedulertest.Equip(m, scheduler.SharedOptions{Layout: []int{512}, Clock: clock.now, Calibrate: true})
	clock.head = opts.Drafter
	opts.Drafter = clock
	chains := &countedChains{Chainer: opts.Chainer}
	opts.Chainer = chains
	h, err := scheduler.NewShared(clock, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	for i, req := range reqs {
		req.Drafts = scheduler.Drafts{MTP: 2}
		steps := chains.steps
		events, err := h.Submit(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		r := drain(events)
		name := map[bool]string{true: "greedy", false: "sampled"}[req.Sampling.Greedy()]
		sameReply(t, name, r, want[i])
		t.Logf("%s: %d drafts fed, %d landed, %d undrafted chain steps", name, r.end.Drafted, r.end.Accepted, chains.steps-steps)
		if r.end.Drafted != 0 {
			t.Errorf("%s: %d drafts fed; want the head dropped before its drafts were fed", name, r.end.Drafted)
		}
		if req.Sampling.Greedy() && chains.steps-steps < len(r.tokens)/2 {
			t.Errorf("greedy: %d undrafted chain steps for %d tokens; want most tokens from chains", chains.steps-steps, len(r.tokens))
		}
	}
}

// countedChains counts the undrafted chain steps a host enqueues; the test reads the count
// between replies.
type countedChains struct {
	batch.Chainer
	steps int
}

func (c *countedChains) Step() error {
	c.steps++
	return c.Chainer.Step()
}

// dearHead is a model on a clock of its own: a forward moves it by 5 ms and 10 µs a row, a call
// of the MTP head by 5 ms, whatever they really took. Only the lane calls it.
type dearHead struct {
	*engine.Model
	head batch.Drafter
	at   time.Time
}

func (d *dearHead) Forward(ctx context.Context, rows []batch.Row) ([]float32, error) {
	logits, _, err := d.ForwardPicks(ctx, rows)
	return logits, err
}

func (d *dearHead) ForwardPicks(ctx context.Context, rows []batch.Row) ([]float32, []int32, error) {
	d.at = d.at.Add(5*time.Millisecond + time.Duration(len(rows))*10*time.Microsecond)
	return d.Model.ForwardPicks(ctx, rows)
}

func (d *dearHead) Draft(ctx context.Context, rows []batch.DraftRow) ([]float32, error) {
	d.at = d.at.Add(5 * time.Millisecond)
	return d.head.Draft(ctx, rows)
}

func (d *dearHead) now() time.Time { return d.at }

// TestCopyingStreamChainsWhileItHasNoCopy: a greedy stream alone that drafts only by n-gram copies
// drafts a forward at a time while its context has a copy to propose and runs undrafted chains on
// the device while it has none, whose steps read back a token, not every row's logits. Its reply
// is its undrafted self.
func TestCopyingStreamChainsWhileItHasNoCopy(t *testing.T) {
	m := loadBundled(t, 512)
	req := requests(m, 1)[0]
	req.MaxTokens, req.StopTokens = 96, nil
	want := solo(t, m, []scheduler.Request{req})[0]
	opts := schedulertest.Equip(m, scheduler.SharedOptions{Layout: []int{512}, Clock: schedulertest.StillClock()})
	chains := &countedChains{Chainer: opts.Chainer}
	opts.Chainer = chains
	h, err := scheduler.NewShared(m, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	req.Drafts = scheduler.Drafts{NGram: 4}
	events, err := h.Submit(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	r := drain(events)
	sameReply(t, "greedy, copies", r, want)
	t.Logf("%d copies fed, %d landed; %d undrafted chain steps for %d tokens", r.end.Drafted, r.end.Accepted, chains.steps, len(r.tokens))
	if r.end.Accepted == 0 || chains.steps == 0 || chains.steps == len(r.tokens) {
		t.Errorf("%d copies landed, %d undrafted chain steps for %d tokens: want both ways", r.end.Accepted, chains.steps, len(r.tokens))
	}
}

// TestDefaultDraftsCopyAndChain: a greedy stream alone with the default drafts (MTP chains and
// copies) copies where its context has a copy, a forward at a time, and runs drafted chains on the
// device where it has none: both kinds of draft are fed, and both ways run. Its reply is its
// undrafted self.
func TestDefaultDraftsCopyAndChain(t *testing.T) {
	m := loadBundled(t, 512)
	req := requests(m, 1)[0]
	req.MaxTokens, req.StopTokens = 200, nil
	want := solo(t, m, []scheduler.Request{req})[0]
	opts := schedulertest.Equip(m, scheduler.SharedOptions{Layout: []int{512}, Clock: schedulertest.StillClock()})
	chains := &countedDraftChains{DraftChainer: opts.DraftChainer}
	opts.DraftChainer = chains
	h, err := scheduler.NewShared(m, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	req.Drafts = scheduler.Drafts{MTP: 3, NGram: 4}
	events, err := h.Submit(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	r := drain(events)
	sameReply(t, "greedy, MTP and copies", r, want)
	fed := map[string]uint64{}
	for _, c := range h.Stats().Drafts {
		fed[c.Source] += c.Proposed
	}
	t.Logf("drafts fed %v, %d landed; %d drafted chain steps", fed, r.end.Accepted, chains.steps)
	if fed["ngram"] == 0 || fed["mtp"] == 0 || chains.steps == 0 {
		t.Errorf("drafts fed %v, %d drafted chain steps: want copies, the head's drafts and chains", fed, chains.steps)
	}
}
