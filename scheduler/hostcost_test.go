package scheduler_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"tfd/batch"
	"tfd/engine"
	"tfd/scheduler"
	"tfd/scheduler/schedulertest"
)

// TestDearHeadIsDroppedForALoneSampledStream: on a clock where a call of the MTP head costs as
// much as a forward (as on a GPU, where the host waits for it), a sampled stream alone with MTP
// drafts stops drafting from the head at its first priced forward and runs as it would with
// drafts off, while a greedy stream on the same host still drafts on the device's drafted
// chains, whose head steps the host does not wait for. Both replies equal their undrafted selves.
func TestDearHeadIsDroppedForALoneSampledStream(t *testing.T) {
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
	h, err := scheduler.NewShared(clock, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	for i, req := range slices.Backward(reqs) { // the sampled one first, on a host that has landed nothing
		req.Drafts = scheduler.Drafts{MTP: 2}
		events, err := h.Submit(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		r := drain(events)
		name := map[bool]string{true: "greedy", false: "sampled"}[req.Sampling.Greedy()]
		sameReply(t, name, r, want[i])
		t.Logf("%s: %d drafts proposed, %d landed", name, r.end.Drafted, r.end.Accepted)
		switch greedy := req.Sampling.Greedy(); {
		case !greedy && r.end.Drafted > 2:
			t.Errorf("sampled: %d drafts proposed; want the head dropped at once (at most the 2 it made before its first forward)", r.end.Drafted)
		case greedy && r.end.Accepted == 0:
			t.Errorf("greedy: no draft landed; want the drafted chains, whose head the host does not wait for")
		}
	}
}

// dearHead is a model on a clock of its own: a forward moves it by 5 ms and 10 µs a row, a call
// of the MTP head by 5 ms, whatever they really took. Only the lane calls it.
type dearHead struct {
	*engine.Model
	head batch.Drafter
	at   time.Time
}

func (d *dearHead) Forward(ctx context.Context, rows []batch.Row) ([]float32, error) {
	d.at = d.at.Add(5*time.Millisecond + time.Duration(len(rows))*10*time.Microsecond)
	return d.Model.Forward(ctx, rows)
}

func (d *dearHead) Draft(ctx context.Context, rows []batch.DraftRow) ([]float32, error) {
	d.at = d.at.Add(5 * time.Millisecond)
	return d.head.Draft(ctx, rows)
}

func (d *dearHead) now() time.Time { return d.at }
