package schedulertest

import (
	"context"
	"slices"
	"testing"

	"tfd/batch"
	"tfd/compute"
	"tfd/engine"
	"tfd/engine/enginetest"
	"tfd/scheduler"
)

// CheckLoneDrafted runs two replies of the bundled model on b (one greedy, one sampled with a
// seed) alone on a shared host, so on the lone driver, with MTP chains of depth 1 to 4, alone and
// with n-gram copies, and demands the tokens they make one at a time on the serial host without
// drafts. Where the model runs drafted chains on b, the greedy replies must have run some of
// their steps there (how many depends on the drafts pricing grants on the machine, logged by
// depth). At each depth the greedy reply also starts alone and the sampled one arrives
// after its eighth token, so that the greedy one is handed to shared rounds mid-chain; both must
// still be their undrafted selves.
func CheckLoneDrafted(t *testing.T, b compute.Backend) {
	m := enginetest.Load(t, b, "models/gopher", engine.Options{Context: 512, MaxRows: 64, Slots: 1024})
	reqs := []scheduler.Request{
		{Prompt: m.Tokenizer().Encode("func (b *Buffer) Write(p []byte) (n int, err error) {\n\t"), MaxTokens: 96},
		{Prompt: m.Tokenizer().Encode("// Reverse returns"), MaxTokens: 96, Sampling: scheduler.Sampling{Temperature: 0.8, TopP: 0.95, Seed: 9}},
	}
	reply := func(h scheduler.Host, req scheduler.Request) []int32 {
		events, err := h.Submit(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		var out []int32
		for ev := range events {
			if ev.Done && ev.Reason != scheduler.FinishLength && ev.Reason != scheduler.FinishStop {
				t.Fatalf("a reply ended %s: %v", ev.Reason, ev.Err)
			}
			if !ev.Done {
				out = append(out, ev.Token)
			}
		}
		return out
	}
	serial := scheduler.NewSerial(m, scheduler.SharedOptions{})
	var want [][]int32
	for _, req := range reqs {
		want = append(want, reply(serial, req))
	}
	serial.Close(context.Background())

	opts := Equip(m, scheduler.SharedOptions{Layout: []int{512, 512}})
	steps := &stepCount{DraftChainer: opts.DraftChainer}
	if opts.DraftChainer != nil {
		opts.DraftChainer = steps
	}
	h, err := scheduler.NewShared(m, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	for depth := 1; depth <= 4; depth++ {
		handoffs := h.Stats().Handoffs
		lone, sampled := reqs[0], reqs[1]
		lone.Drafts, sampled.Drafts = scheduler.Drafts{MTP: depth}, scheduler.Drafts{MTP: depth, NGram: 4}
		events, err := h.Submit(context.Background(), lone)
		if err != nil {
			t.Fatal(err)
		}
		var head []int32
		for ev := range events { // some tokens alone, so the newcomer arrives mid-reply
			if head = append(head, ev.Token); ev.Done || len(head) == 8 {
				break
			}
		}
		rest := make(chan []int32, 1)
		go func() {
			var out []int32
			for ev := range events {
				if !ev.Done {
					out = append(out, ev.Token)
				}
			}
			rest <- out
		}()
		if got := reply(h, sampled); !slices.Equal(got, want[1]) {
			t.Errorf("depth %d, the newcomer (sampled): drafted\n %v\nundrafted\n %v", depth, got, want[1])
		}
		if got := append(head, <-rest...); !slices.Equal(got, want[0]) {
			t.Errorf("depth %d, handed off mid-chain (greedy): drafted\n %v\nundrafted\n %v", depth, got, want[0])
		}
		if h.Stats().Handoffs == handoffs {
			t.Errorf("depth %d: the greedy reply was not handed off to shared rounds", depth)
		}
		for _, ngram := range []int{0, 4} {
			for i, req := range reqs {
				req.Drafts = scheduler.Drafts{MTP: depth, NGram: ngram}
				before := steps.steps
				if got := reply(h, req); !slices.Equal(got, want[i]) {
					t.Errorf("%+v, sampled %v: alone and drafted\n %v\nundrafted\n %v", req.Drafts, !req.Sampling.Greedy(), got, want[i])
				}
				if req.Sampling.Greedy() {
					t.Logf("%+v: %d drafted chain steps", req.Drafts, steps.steps-before)
				}
			}
		}
	}
	if opts.DraftChainer != nil && steps.steps == 0 {
		t.Error("no greedy reply ran a drafted chain step on the device")
	}
}

// stepCount counts the drafted chain steps a host enqueues; the host's lane is the only caller,
// and the test reads the count between replies.
type stepCount struct {
	batch.DraftChainer
	steps int
}

func (c *stepCount) Step() error {
	c.steps++
	return c.DraftChainer.Step()
}
