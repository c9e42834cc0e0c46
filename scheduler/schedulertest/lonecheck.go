package schedulertest

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
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
// drafts. At each depth the greedy reply also starts alone and the sampled one arrives after its
// eighth token, so that the greedy one is handed to shared rounds mid-chain, and the two then
// draft side by side in shared rounds; both must still be their undrafted selves.
//
// The host prices rounds on a still clock (StillClock), so every draft proposed is granted
// whatever the machine's load, and the check demands its own premise: at each depth every reply
// drafted and had drafts land, and, where the model runs drafted chains on b, the greedy reply
// with MTP drafts alone ran steps of chains of that very depth on the device (before the
// newcomer arrived, too). A drafted path that changed bits cannot pass by not running.
func CheckLoneDrafted(t *testing.T, b compute.Backend) {
	m := enginetest.Load(t, b, "models/gopher", engine.Options{Context: 512, MaxRows: 64, Slots: 1024})
	reqs := []scheduler.Request{
		{Prompt: m.Tokenizer().Encode("func (b *Buffer) Write(p []byte) (n int, err error) {\n\t"), MaxTokens: 96},
		{Prompt: m.Tokenizer().Encode("// Reverse returns"), MaxTokens: 96, Sampling: scheduler.Sampling{Temperature: 0.8, TopP: 0.95, Seed: 9}},
	}
	serial := scheduler.NewSerial(m, scheduler.SharedOptions{})
	var want [][]int32
	for _, req := range reqs {
		got, _ := loneReply(t, serial, req)
		want = append(want, got)
	}
	serial.Close(context.Background())

	opts := Equip(m, scheduler.SharedOptions{Layout: []int{512, 512}, Clock: StillClock()})
	chains := &chainCount{DraftChainer: opts.DraftChainer}
	if opts.DraftChainer != nil {
		opts.DraftChainer = chains
	}
	h, err := scheduler.NewShared(m, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	for depth := 1; depth <= 4; depth++ {
		checkHandoff(t, h, chains, reqs, want, depth)
		for _, ngram := range []int{0, 4} {
			for i, req := range reqs {
				req.Drafts = scheduler.Drafts{MTP: depth, NGram: ngram}
				name := func() string { return describe(req) }
				before, lone := chains.snapshot(), h.Stats().LoneTokens
				got, end := loneReply(t, h, req)
				if !slices.Equal(got, want[i]) {
					t.Errorf("%s, alone: drafted\n %v\nundrafted\n %v", name(), got, want[i])
				}
				if end.Drafted == 0 || end.Accepted == 0 {
					t.Errorf("%s, alone: %d drafts proposed, %d landed: want both above 0", name(), end.Drafted, end.Accepted)
				}
				if made := h.Stats().LoneTokens - lone; made < uint64(len(got))/2 {
					t.Errorf("%s: %d of %d tokens on the lone driver: want most of them", name(), made, len(got))
				}
				now := chains.snapshot()
				steps := now[depth] - before[depth]
				t.Logf("%s: %d drafts proposed, %d landed; %d drafted chain steps of depth %d", name(), end.Drafted, end.Accepted, steps, depth)
				if opts.DraftChainer != nil && req.Sampling.Greedy() && ngram == 0 {
					if steps == 0 {
						t.Errorf("%s: the greedy reply ran no drafted chain step of depth %d on the device", name(), depth)
					}
					var deeper int64 // shallower ones may end a reply, where fewer drafts fit
					for d := depth + 1; d < len(now); d++ {
						deeper += now[d] - before[d]
					}
					if deeper != 0 {
						t.Errorf("%s: %d drafted chain steps deeper than %d", name(), deeper, depth)
					}
				}
			}
		}
	}
}

// checkHandoff starts reqs[0] (greedy) alone with MTP chains of depth and, after its eighth token,
// submits reqs[1] (sampled) with MTP chains and n-gram copies, so that the first is handed from
// the lone driver to shared rounds mid-chain; both must equal want.
func checkHandoff(t *testing.T, h *scheduler.Shared, chains *chainCount, reqs []scheduler.Request, want [][]int32, depth int) {
	before := h.Stats()
	steps := sum(chains.snapshot())
	lone, newcomer := reqs[0], reqs[1]
	lone.Drafts, newcomer.Drafts = scheduler.Drafts{MTP: depth}, scheduler.Drafts{MTP: depth, NGram: 4}
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
	if chains.DraftChainer != nil && sum(chains.snapshot()) == steps {
		t.Errorf("depth %d: the greedy reply ran no drafted chain step before the newcomer arrived", depth)
	}
	rest := make(chan scheduler.Event, 1)
	go func() {
		var end scheduler.Event
		for ev := range events {
			if ev.Done {
				end = ev
				continue
			}
			head = append(head, ev.Token)
		}
		rest <- end
	}()
	got, end := loneReply(t, h, newcomer)
	if !slices.Equal(got, want[1]) {
		t.Errorf("depth %d, the newcomer (sampled): drafted\n %v\nundrafted\n %v", depth, got, want[1])
	}
	first := <-rest
	if !slices.Equal(head, want[0]) {
		t.Errorf("depth %d, handed off mid-chain (greedy): drafted\n %v\nundrafted\n %v", depth, head, want[0])
	}
	after := h.Stats()
	if after.Handoffs == before.Handoffs || after.SharedTokens == before.SharedTokens {
		t.Errorf("depth %d: %d handoffs, %d tokens in shared rounds: want the greedy reply handed to shared rounds",
			depth, after.Handoffs-before.Handoffs, after.SharedTokens-before.SharedTokens)
	}
	if end.Drafted == 0 || first.Drafted == 0 {
		t.Errorf("depth %d, handed off: the newcomer proposed %d drafts, the greedy reply %d: want both above 0", depth, end.Drafted, first.Drafted)
	}
}

// loneReply submits req to h and returns its tokens and its end, failing t unless it ends by
// its length or a stop token.
func loneReply(t *testing.T, h scheduler.Host, req scheduler.Request) ([]int32, scheduler.Event) {
	t.Helper()
	events, err := h.Submit(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	var out []int32
	var end scheduler.Event
	for ev := range events {
		if !ev.Done {
			out = append(out, ev.Token)
			continue
		}
		if end = ev; ev.Reason != scheduler.FinishLength && ev.Reason != scheduler.FinishStop {
			t.Fatalf("%s: the reply ended %s: %v", describe(req), ev.Reason, ev.Err)
		}
	}
	return out, end
}

// describe names a request of the check by its drafts and sampling.
func describe(req scheduler.Request) string {
	kind := "greedy"
	if !req.Sampling.Greedy() {
		kind = "sampled"
	}
	return fmt.Sprintf("%s %+v", kind, req.Drafts)
}

// chainCount counts the drafted chain steps a host enqueues, by the depth of the chain they
// belong to. The host's lane is the only caller; the test reads the counts while it runs.
type chainCount struct {
	batch.DraftChainer
	depth int // of the chain started last; the lane's alone
	steps [8]atomic.Int64
}

func (c *chainCount) StartDraftChain(ctx context.Context, row batch.Row, drafts []int32) error {
	c.depth = min(len(drafts), len(c.steps)-1)
	return c.DraftChainer.StartDraftChain(ctx, row, drafts)
}

func (c *chainCount) Step() error {
	c.steps[c.depth].Add(1)
	return c.DraftChainer.Step()
}

// snapshot returns the steps counted so far, by depth.
func (c *chainCount) snapshot() [8]int64 {
	var n [8]int64
	for i := range c.steps {
		n[i] = c.steps[i].Load()
	}
	return n
}

// sum returns the steps of every depth.
func sum(steps [8]int64) int64 {
	var n int64
	for _, s := range steps {
		n += s
	}
	return n
}
