package scheduler

import (
	"context"
	"testing"
	"time"

	"tfd/batch"
	"tfd/compute"
	_ "tfd/cpu"
	"tfd/engine"
	"tfd/models"
)

// TestMTPDepthsFeedLanding: a lone greedy stream drafting MTP chains of depth 4 on the bundled
// model teaches the lane how often each depth lands, as priced rounds need, and the head's chain
// lands at every depth about as often as measured when it was wired right: given the depth
// before it landed, 86% at depth 1, 57% at 2, 52 to 60% at 3, about 70% at 4. Fed another row's
// output of the head (the first of the call's rows rather than the one behind the draft), depth
// 2 landed 36% and depth 3 14%.
func TestMTPDepthsFeedLanding(t *testing.T) {
	b, err := compute.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	m, err := engine.Load(context.Background(), engine.Source{FS: models.FS(), Name: models.Name}, b,
		engine.Options{Context: 512, MaxRows: 64, Slots: 512})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	// Every forward takes the same time, so pricing grants each depth proposed and every depth
	// is counted whatever the machine's load.
	even := &evenForwards{Model: m, at: time.Now()}
	h, err := NewShared(even, SharedOptions{Layout: []int{512}, Drafter: m.MTP(), Clock: even.now})
	if err != nil {
		t.Fatal(err)
	}
	tok := m.Tokenizer()
	events, err := h.Submit(context.Background(), Request{
		Prompt:    tok.Encode("<|im_start|>user\nWrite a function that sums a slice.<|im_end|>\n<|im_start|>assistant\n"),
		MaxTokens: 160,
		Drafts:    Drafts{MTP: 4},
	})
	if err != nil {
		t.Fatal(err)
	}
	for range events {
	}
	h.Close(context.Background()) // the lane has returned: its figures can be read
	x := &h.lane.landing[0]       // the greedy streams'
	// Floors under what the chain lands wired right, above what it landed miswired.
	floor := [4]float64{0.6, 0.4, 0.3, 0.3}
	for j := range 4 {
		t.Logf("depth %d: reached %.1f (decayed), landed %.0f%% of those", j+1, x.reached[j], 100*x.landed[j]/max(x.reached[j], 1))
		if x.reached[j] < 5 {
			t.Errorf("depth %d: reached %.1f times: want the chain's depths counted", j+1, x.reached[j])
		} else if rate := x.landed[j] / x.reached[j]; rate < floor[j] {
			t.Errorf("depth %d: %.0f%% landed, below %.0f%%: want the chain to land as it does wired right", j+1, 100*rate, 100*floor[j])
		}
	}
}

// evenForwards is the bundled model on a clock of its own that each forward moves on by 80 ms,
// whatever its rows and however long it really took, so a forward's rows cost nothing that
// pricing can see. (Padding real forwards to a fixed time failed under make test's race pass,
// whose forwards sometimes took longer than the padding.) Only the lane calls it.
type evenForwards struct {
	*engine.Model
	at time.Time
}

func (e *evenForwards) Forward(ctx context.Context, rows []batch.Row) ([]float32, error) {
	logits, _, err := e.ForwardPicks(ctx, rows)
	return logits, err
}

func (e *evenForwards) ForwardPicks(ctx context.Context, rows []batch.Row) ([]float32, []int32, error) {
	e.at = e.at.Add(80 * time.Millisecond)
	return e.Model.ForwardPicks(ctx, rows)
}

func (e *evenForwards) now() time.Time { return e.at }
