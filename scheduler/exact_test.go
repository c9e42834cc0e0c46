package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"tfd/batch"
	"tfd/compute"
	_ "tfd/cpu"
	"tfd/engine"
	"tfd/engine/enginetest"
	"tfd/models"
	"tfd/scheduler"
	"tfd/scheduler/schedulertest"
)

// These tests hold the scheduler to its promise on the bundled model: a reply is the same tokens,
// bit for bit, whether it ran alone or beside others, moved sessions, or was handed from the lone
// driver to shared rounds.

func loadBundled(t testing.TB, slots int) *engine.Model {
	t.Helper()
	return loadBundledLogits(t, slots, 0)
}

// loadBundledLogits is loadBundled with at most logitRows rows of a forward asking for logits
// (engine.Options.LogitRows; 0: every row may).
func loadBundledLogits(t testing.TB, slots, logitRows int) *engine.Model {
	t.Helper()
	if testing.Short() {
		// make test runs these once in full; its race pass (-short) keeps to the toy model, whose
		// tests take the lane through the same goroutines in a fraction of the time.
		t.Skip("runs the bundled model; skipped with -short")
	}
	b, err := compute.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	m, err := engine.Load(context.Background(), engine.Source{FS: models.FS(), Name: models.Name}, b,
		engine.Options{Context: 512, MaxRows: 64, LogitRows: logitRows, Slots: slots})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(); b.Close() })
	return m
}

// requests returns n varied requests: prompts of different lengths, greedy and sampled.
func requests(m *engine.Model, n int) []scheduler.Request {
	tok := m.Tokenizer()
	texts := []string{
		"package main\n\nimport \"fmt\"\n\nfunc main() {\n",
		"// Reverse returns a copy of s with its elements in reverse order.\nfunc Reverse",
		"func (b *Buffer) Write(p []byte) (n int, err error) {\n\t",
		"// Package sort provides primitives for sorting slices.",
		"type Reader interface {\n",
		"if err != nil {\n\treturn",
		"<|im_start|>user\nWrite a function that sums a slice.<|im_end|>\n<|im_start|>assistant\n",
		"for i := range n {\n\t\t",
	}
	reqs := make([]scheduler.Request, n)
	for i := range reqs {
		reqs[i] = scheduler.Request{
			Prompt:     tok.Encode(texts[i%len(texts)]),
			MaxTokens:  24 + 5*i,
			StopTokens: m.Generation().EOS,
		}
		if i%2 == 1 {
			reqs[i].Sampling = scheduler.Sampling{Temperature: 0.9, TopK: 40, TopP: 0.95, MinP: 0.02, Seed: uint64(1000 + i)}
		}
	}
	return reqs
}

type reply struct {
	tokens []int32
	end    scheduler.Event
}

func drain(events <-chan scheduler.Event) reply {
	var r reply
	for ev := range events {
		if ev.Done {
			r.end = ev
			continue
		}
		r.tokens = append(r.tokens, ev.Token)
	}
	return r
}

// solo runs each request alone on a serial host.
func solo(t *testing.T, m *engine.Model, reqs []scheduler.Request) []reply {
	t.Helper()
	h := scheduler.NewSerial(m, schedulertest.Equip(m, scheduler.SharedOptions{}))
	defer h.Close(context.Background())
	out := make([]reply, len(reqs))
	for i, req := range reqs {
		events, err := h.Submit(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = drain(events)
	}
	return out
}

func sameReply(t *testing.T, name string, got, want reply) {
	t.Helper()
	if !slices.Equal(got.tokens, want.tokens) || got.end.Reason != want.end.Reason {
		t.Errorf("%s: %d tokens ending %q, solo gave %d ending %q\n got %v\nwant %v",
			name, len(got.tokens), got.end.Reason, len(want.tokens), want.end.Reason, got.tokens, want.tokens)
	}
}

// TestStaggeredStreamsEqualSolo starts 8 streams one after another, each once the previous one has
// sent a few tokens, so the first begins on the lone driver and is handed to shared rounds when
// the second arrives, and later streams prefill while earlier ones decode; once where every row
// of a forward may ask for logits, once where only 3 may (engine.Options.LogitRows), so that
// rounds leave decoding streams and prompts' last tokens for later rounds.
func TestStaggeredStreamsEqualSolo(t *testing.T) {
	for _, logitRows := range []int{0, 3} {
		t.Run(fmt.Sprintf("logit_rows=%d", logitRows), func(t *testing.T) { staggered(t, logitRows) })
	}
}

func staggered(t *testing.T, logitRows int) {
	m := loadBundledLogits(t, 8*512, logitRows)
	reqs := requests(m, 8)
	want := solo(t, m, reqs)

	rec := &recorder{Model: m}
	h, err := scheduler.NewShared(rec, schedulertest.Equip(m, scheduler.SharedOptions{Layout: slices.Repeat([]int{512}, 8), Grow: 64}))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	got := make([]reply, len(reqs))
	var wg sync.WaitGroup
	for i, req := range reqs {
		events, err := h.Submit(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		// Take the stream's first tokens here, so the next request arrives mid-reply.
		var head []int32
		for ev := range events {
			if ev.Done {
				t.Fatalf("stream %d ended after %d tokens before the next arrived; make its reply longer", i, len(head))
			}
			if head = append(head, ev.Token); len(head) == 3 {
				break
			}
		}
		wg.Go(func() {
			rest := drain(events)
			got[i] = reply{tokens: append(head, rest.tokens...), end: rest.end}
		})
	}
	wg.Wait()
	for i := range reqs {
		sameReply(t, fmt.Sprintf("stream %d (sampled %v)", i, !reqs[i].Sampling.Greedy()), got[i], want[i])
	}
	if s := h.Stats(); s.SessionsInUse != 0 || s.Waiting != 0 {
		t.Errorf("after every stream ended: %+v", s)
	}
	// With 3 logit rows a round holds at most 3 decoding streams beside the prompt arriving.
	shared := 6
	if logitRows > 0 {
		shared = min(shared, logitRows+1)
	}
	if rec.maxSessions < shared || !rec.mixed {
		t.Errorf("the rounds never shared much: at most %d sessions in one forward (want %d), prefill beside decode: %v", rec.maxSessions, shared, rec.mixed)
	}
	total := 0
	for _, r := range got {
		total += len(r.tokens)
	}
	// The first stream began alone and was handed over when the second came.
	if s := h.Stats(); s.Handoffs < 1 || s.LoneTokens == 0 || s.LoneTokens+s.SharedTokens != uint64(total) {
		t.Errorf("%d handoffs, %d tokens on the lone driver and %d in shared rounds; want at least one handoff and %d tokens in all",
			s.Handoffs, s.LoneTokens, s.SharedTokens, total)
	}
}

// recorder passes forwards through to the model and notes how the rounds were made up.
type recorder struct {
	*engine.Model
	maxSessions int  // the most sessions one forward held
	mixed       bool // a forward held a prompt chunk beside a decoding row
}

func (r *recorder) Forward(ctx context.Context, rows []batch.Row) ([]float32, error) {
	logits, _, err := r.ForwardPicks(ctx, rows)
	return logits, err
}

func (r *recorder) ForwardPicks(ctx context.Context, rows []batch.Row) ([]float32, []int32, error) {
	perSession := map[int]int{}
	for _, row := range rows {
		perSession[row.Base]++
	}
	r.maxSessions = max(r.maxSessions, len(perSession))
	var chunk, single bool
	for _, n := range perSession {
		chunk, single = chunk || n > 1, single || n == 1
	}
	r.mixed = r.mixed || chunk && single
	return r.Model.ForwardPicks(ctx, rows)
}

// TestMigratedStreamEqualsSolo makes streams outgrow small sessions and move to larger ones
// mid-reply, two of them competing for the one large session.
func TestMigratedStreamEqualsSolo(t *testing.T) {
	m := loadBundled(t, 2*40+512+256)
	reqs := requests(m, 3)
	for i := range reqs {
		reqs[i].MaxTokens = 60
		reqs[i].StopTokens = nil // run the whole length, past the small sessions
	}
	want := solo(t, m, reqs)
	h, err := scheduler.NewShared(m, schedulertest.Equip(m, scheduler.SharedOptions{Layout: []int{40, 40, 512, 256}, Grow: 4}))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	var chans []<-chan scheduler.Event
	for _, req := range reqs {
		events, err := h.Submit(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		chans = append(chans, events)
	}
	// Read all streams at once, as real clients do: a stream whose reader stops keeps its
	// session, and sessions are what a migrating stream waits for.
	got := drainAll(chans)
	for i := range got {
		sameReply(t, fmt.Sprintf("stream %d", i), got[i], want[i])
	}
}

// TestReplyOutgrowsEverySmallSession runs, on the layout auto makes when fewer than two
// context-sized sessions fit (one of the whole context, then half, a quarter, an eighth), a reply
// longer than every small session beside a short one: it climbs the ladder up to the
// whole-context session and equals its solo self, and so does the short one.
func TestReplyOutgrowsEverySmallSession(t *testing.T) {
	m := loadBundled(t, 512+256+128+64)
	reqs := requests(m, 2)
	reqs[0].MaxTokens, reqs[0].StopTokens = 400, nil // past 256 tokens: only the 512 holds it
	want := solo(t, m, reqs)
	if n := len(reqs[0].Prompt) + len(want[0].tokens); n <= 256 {
		t.Fatalf("the long reply reaches %d tokens; it must outgrow the 256-token session", n)
	}
	h, err := scheduler.NewShared(m, schedulertest.Equip(m, scheduler.SharedOptions{Layout: []int{512, 256, 128, 64}, Grow: 16}))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	var chans []<-chan scheduler.Event
	for _, req := range reqs {
		events, err := h.Submit(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		chans = append(chans, events)
	}
	got := drainAll(chans)
	for i := range got {
		sameReply(t, fmt.Sprintf("stream %d", i), got[i], want[i])
	}
}

func drainAll(chans []<-chan scheduler.Event) []reply {
	got := make([]reply, len(chans))
	var wg sync.WaitGroup
	for i, events := range chans {
		wg.Go(func() { got[i] = drain(events) })
	}
	wg.Wait()
	return got
}

// TestOutgrownStreamEndsWithError: a reply longer than the largest session ends with an error
// that says so, and the tokens it sent stand (they equal the solo reply's start).
func TestOutgrownStreamEndsWithError(t *testing.T) {
	m := loadBundled(t, 512)
	req := requests(m, 1)[0]
	req.MaxTokens, req.StopTokens = 100, nil
	want := solo(t, m, []scheduler.Request{req})[0]
	h, err := scheduler.NewShared(m, schedulertest.Equip(m, scheduler.SharedOptions{Layout: []int{40}}))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	events, err := h.Submit(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	got := drain(events)
	if got.end.Reason != scheduler.FinishError || got.end.Err == nil || len(req.Prompt)+len(got.tokens) != 41 {
		t.Fatalf("ended %+v after %d tokens, want an error once prompt+reply pass 40 tokens", got.end, len(got.tokens))
	}
	if !slices.Equal(got.tokens, want.tokens[:len(got.tokens)]) {
		t.Fatalf("tokens before the error differ from the solo reply")
	}
}

// TestBurstBeyondQueue: past the queue bound requests are refused at once with ErrQueueFull, and
// every admitted request completes.
func TestBurstBeyondQueue(t *testing.T) {
	m := loadBundled(t, 2*512)
	h, err := scheduler.NewShared(m, schedulertest.Equip(m, scheduler.SharedOptions{Layout: slices.Repeat([]int{512}, 2), Queue: 3}))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	req := requests(m, 1)[0]
	req.MaxTokens, req.StopTokens = 8, nil
	var admitted []<-chan scheduler.Event
	refused := 0
	for range 20 {
		events, err := h.Submit(context.Background(), req)
		switch {
		case errors.Is(err, scheduler.ErrQueueFull):
			refused++
		case err != nil:
			t.Fatal(err)
		default:
			admitted = append(admitted, events)
		}
	}
	if refused == 0 || len(admitted) < 3 {
		t.Fatalf("20 requests at once with a queue of 3: %d admitted, %d refused", len(admitted), refused)
	}
	for i, r := range drainAll(admitted) {
		if r.end.Reason != scheduler.FinishLength || len(r.tokens) != 8 {
			t.Errorf("admitted request %d: %d tokens ending %q", i, len(r.tokens), r.end.Reason)
		}
	}
}

// TestCancelledStreamFreesItsSession: a stream whose client goes away ends cancelled, its session
// is free by the next round, and the streams beside it are untouched.
func TestCancelledStreamFreesItsSession(t *testing.T) {
	m := loadBundled(t, 2*512)
	reqs := requests(m, 2)
	for i := range reqs {
		reqs[i].MaxTokens, reqs[i].StopTokens = 40, nil
	}
	want := solo(t, m, reqs[1:])
	h, err := scheduler.NewShared(m, schedulertest.Equip(m, scheduler.SharedOptions{Layout: slices.Repeat([]int{512}, 2)}))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	gone, _ := h.Submit(ctx, reqs[0])
	kept, _ := h.Submit(context.Background(), reqs[1])
	<-gone
	cancel()
	if r := drain(gone); r.end.Reason != scheduler.FinishCancelled {
		t.Fatalf("cancelled stream ended %q", r.end.Reason)
	}
	sameReply(t, "the stream beside it", drain(kept), want[0])
	if s := h.Stats(); s.SessionsInUse != 0 {
		t.Fatalf("sessions still held: %+v", s)
	}
}

// submitAll submits each of reqs to h with drafts, and returns their event channels in order.
func submitAll(t *testing.T, h scheduler.Host, reqs []scheduler.Request, drafts scheduler.Drafts) []<-chan scheduler.Event {
	t.Helper()
	var chans []<-chan scheduler.Event
	for _, req := range reqs {
		req.Drafts = drafts
		events, err := h.Submit(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		chans = append(chans, events)
	}
	return chans
}

// TestDraftedEqualsUndrafted: with n-gram drafts the replies are the tokens they are without,
// greedy and sampled, alone and in shared rounds, and some drafts do land.
func TestDraftedEqualsUndrafted(t *testing.T) {
	m := loadBundled(t, 4*512)
	reqs := requests(m, 4)
	for i := range reqs {
		reqs[i].MaxTokens, reqs[i].StopTokens = 80, nil
	}
	want := solo(t, m, reqs)
	// Pricing on a clock that stands still grants every draft proposed, so the drafts counted
	// do not depend on how busy the machine is.
	h, err := scheduler.NewShared(m, schedulertest.Equip(m, scheduler.SharedOptions{Layout: slices.Repeat([]int{512}, 4), Clock: schedulertest.StillClock()}))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	chans := submitAll(t, h, reqs, scheduler.Drafts{MTP: 3, NGram: 4})
	drafted, accepted := 0, 0
	for i, r := range drainAll(chans) {
		sameReply(t, fmt.Sprintf("stream %d (sampled %v)", i, !reqs[i].Sampling.Greedy()), r, want[i])
		drafted, accepted = drafted+r.end.Drafted, accepted+r.end.Accepted
	}
	// Alone, on the lone driver's path.
	req := reqs[0]
	req.Drafts = scheduler.Drafts{MTP: 3, NGram: 4}
	events, err := h.Submit(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	r := drain(events)
	sameReply(t, "stream 0 alone", r, want[0])
	drafted, accepted = drafted+r.end.Drafted, accepted+r.end.Accepted
	t.Logf("drafts: %d proposed, %d accepted", drafted, accepted)
	if accepted == 0 || accepted > drafted {
		t.Fatalf("drafts: %d proposed, %d accepted: want some accepted", drafted, accepted)
	}
	// The host's counts by source and depth add up to the replies' own, and the head drafted.
	// (TestDraftCountsBySourceAndDepth counts both sources; here the replies decide whether
	// n-gram copies found a line to copy beside the head's chains.)
	var proposed, landed uint64
	bySource := map[string]uint64{}
	for _, c := range h.Stats().Drafts {
		proposed, landed = proposed+c.Proposed, landed+c.Accepted
		bySource[c.Source] += c.Proposed
	}
	if proposed != uint64(drafted) || landed != uint64(accepted) || bySource[scheduler.SourceMTP] == 0 {
		t.Errorf("Stats.Drafts %+v add up to %d proposed and %d accepted, by source %v; the replies had %d and %d",
			h.Stats().Drafts, proposed, landed, bySource, drafted, accepted)
	}
}

// TestMTPDraftsLand: with one draft a round, which is the MTP head's, greedy replies equal their
// undrafted selves and most drafts land. The head was trained to agree with the model's own
// greedy token two places ahead on 75% of held-out positions (tools/train/README.md), so a rate
// far below that means the head is wired wrong (its inputs swapped, the wrong hidden state).
func TestMTPDraftsLand(t *testing.T) {
	m := loadBundled(t, 4*512)
	if m.MTP() == nil {
		t.Fatal("the bundled model should load its MTP head")
	}
	reqs := requests(m, 8)
	var greedy []scheduler.Request
	for _, req := range reqs {
		if req.Sampling.Greedy() {
			req.MaxTokens, req.StopTokens = 96, nil
			greedy = append(greedy, req)
		}
	}
	want := solo(t, m, greedy)
	// Pricing on a clock that stands still grants the head's draft every round, however long a
	// busy machine makes a row seem: the rate measures the head, not the pricing.
	h, err := scheduler.NewShared(m, schedulertest.Equip(m, scheduler.SharedOptions{Layout: slices.Repeat([]int{512}, 4), Clock: schedulertest.StillClock()}))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	chans := submitAll(t, h, greedy, scheduler.Drafts{MTP: 1})
	drafted, accepted := 0, 0
	for i, r := range drainAll(chans) {
		sameReply(t, fmt.Sprintf("stream %d", i), r, want[i])
		drafted, accepted = drafted+r.end.Drafted, accepted+r.end.Accepted
	}
	rate := float64(accepted) / float64(max(drafted, 1))
	t.Logf("MTP drafts: %d proposed, %d accepted (%.0f%%)", drafted, accepted, 100*rate)
	if drafted < 100 || rate < 0.5 {
		t.Fatalf("MTP drafts: %d proposed, %d accepted: want most of at least 100 to land", drafted, accepted)
	}
}

// TestLoneGreedyEqualsStepwise: a greedy stream alone runs on the lone driver's greedy chains
// (several tokens a call); its reply equals plain forwards with the host's argmax between them.
func TestLoneGreedyEqualsStepwise(t *testing.T) {
	m := loadBundled(t, 512)
	if m.Chains() == nil {
		t.Fatal("the CPU backend should run greedy chains")
	}
	req := requests(m, 1)[0]
	req.MaxTokens, req.StopTokens = 75, nil
	got := solo(t, m, []scheduler.Request{req})[0]
	want := enginetest.Greedy(t, m, req.Prompt, 75)
	if !slices.Equal(got.tokens, want) {
		t.Fatalf("lone greedy reply\n %v\nstepwise\n %v", got.tokens, want)
	}
}

// TestNextTurnReusesTheSession: a request whose prompt starts with an earlier request's prompt and
// reply (a chat's next turn) takes the session that still holds their keys and values, feeds only
// what is new, and gets the reply it gets on a fresh host.
func TestNextTurnReusesTheSession(t *testing.T) {
	m := loadBundled(t, 2*512)
	first := requests(m, 2)[1] // sampled
	first.MaxTokens, first.StopTokens = 30, nil
	first.Drafts = scheduler.Drafts{MTP: 3, NGram: 4}

	h, err := scheduler.NewShared(m, schedulertest.Equip(m, scheduler.SharedOptions{Layout: slices.Repeat([]int{512}, 2)}))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	run := func(req scheduler.Request) reply {
		events, err := h.Submit(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		return drain(events)
	}
	r1 := run(first)
	next := first
	next.Prompt = append(append(slices.Clone(first.Prompt), r1.tokens...), m.Tokenizer().Encode("\n// next turn\n")...)
	next.Sampling.Seed++
	r2 := run(next)
	// The session holds the first prompt and all but the last reply token (never fed); the next
	// turn feeds the last of those again.
	if want := len(first.Prompt) + len(r1.tokens) - 2; r2.end.Cached != want {
		t.Errorf("the next turn reused %d prompt tokens, want %d", r2.end.Cached, want)
	}
	sameReply(t, "the next turn", r2, solo(t, m, []scheduler.Request{next})[0])
}

// logitCounter is the bundled model with a record of the most rows one forward took and the most
// of them that asked for their logits or picks.
type logitCounter struct {
	*engine.Model
	mu                sync.Mutex
	mostRows, mostAsk int
}

func (m *logitCounter) Forward(ctx context.Context, rows []batch.Row) ([]float32, error) {
	logits, _, err := m.ForwardPicks(ctx, rows)
	return logits, err
}

func (m *logitCounter) ForwardPicks(ctx context.Context, rows []batch.Row) ([]float32, []int32, error) {
	ask := 0
	for _, r := range rows {
		if r.Logits || r.Pick {
			ask++
		}
	}
	m.mu.Lock()
	m.mostRows, m.mostAsk = max(m.mostRows, len(rows)), max(m.mostAsk, ask)
	m.mu.Unlock()
	return m.Model.ForwardPicks(ctx, rows)
}

// TestFewLogitRowsEqualSolo: where a forward takes more rows than may ask for logits
// (engine.Options.LogitRows, as larger forwards for prompts keep it), rounds keep their decoding
// rows and drafts within the limit and stop a prompt one token short of a logits row past it, and
// every reply is still the one it makes alone and undrafted.
func TestFewLogitRowsEqualSolo(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the bundled model; skipped with -short")
	}
	b, err := compute.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	const logitRows = 3
	em, err := engine.Load(context.Background(), engine.Source{FS: models.FS(), Name: models.Name}, b,
		engine.Options{Context: 512, MaxRows: 64, LogitRows: logitRows, Slots: 6 * 512})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { em.Close(); b.Close() })
	reqs := requests(em, 6)
	want := solo(t, em, reqs)
	m := &logitCounter{Model: em}
	h, err := scheduler.NewShared(m, schedulertest.Equip(em, scheduler.SharedOptions{Layout: slices.Repeat([]int{512}, 6), Clock: schedulertest.StillClock()}))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	for i, r := range drainAll(submitAll(t, h, reqs, scheduler.Drafts{MTP: 3, NGram: 4})) {
		sameReply(t, fmt.Sprintf("stream %d (sampled %v)", i, !reqs[i].Sampling.Greedy()), r, want[i])
	}
	t.Logf("the most rows a forward took: %d, of which %d asked for logits or picks", m.mostRows, m.mostAsk)
	if m.mostRows <= logitRows || m.mostAsk != logitRows {
		t.Errorf("forwards of up to %d rows, up to %d asking for logits or picks: want forwards past %d rows and %d asking", m.mostRows, m.mostAsk, logitRows, logitRows)
	}
}
