package scheduler

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"tfd/batch"
)

// forwardTime is how long one forward takes on deviceToy's device, chain step or round.
const forwardTime = time.Millisecond

// deviceToy is the toy model with greedy chains (batch.Chainer) on a device simulated on
// synctest's clock: each forward, a round or a chain step, takes forwardTime, and the device runs
// one at a time, each from when it is enqueued or the one before it ends, whichever is later. A
// chain step's token is worked out when the step is enqueued (the toy is deterministic, and steps
// run in order) and handed over when the step ends. It logs when each step and each Forward
// started on the device.
type deviceToy struct {
	*toyModel
	busyUntil time.Time // when the device ends the work it has

	row    batch.Row // the next chain step's input
	queued []queuedStep
	steps  []time.Time // when each chain step started
	rounds []time.Time // when each Forward started
}

type queuedStep struct {
	token int32
	ends  time.Time
}

// run books forwardTime of the device for work enqueued now and returns when the work starts.
func (m *deviceToy) run() time.Time {
	start := time.Now()
	if m.busyUntil.After(start) {
		start = m.busyUntil
	}
	m.busyUntil = start.Add(forwardTime)
	return start
}

func (m *deviceToy) Forward(ctx context.Context, rows []batch.Row) ([]float32, error) {
	m.rounds = append(m.rounds, m.run())
	time.Sleep(time.Until(m.busyUntil))
	return m.toyModel.Forward(ctx, rows)
}

func (m *deviceToy) StartChain(_ context.Context, row batch.Row) error {
	m.row, m.queued = row, m.queued[:0]
	return nil
}

func (m *deviceToy) Step() error {
	if len(m.queued) == batch.ChainAhead {
		return errors.New("deviceToy: more steps untaken than batch.ChainAhead")
	}
	m.steps = append(m.steps, m.run())
	m.row.Logits = true
	logits, err := m.toyModel.Forward(context.Background(), []batch.Row{m.row})
	if err != nil {
		return err
	}
	tok := int32(0)
	for i, v := range logits {
		if v > logits[tok] {
			tok = int32(i)
		}
	}
	m.queued = append(m.queued, queuedStep{tok, m.busyUntil})
	m.row = batch.Row{Base: m.row.Base, Pos: m.row.Pos + 1, Token: tok}
	return nil
}

func (m *deviceToy) Token() (int32, error) {
	s := m.queued[0]
	m.queued = m.queued[1:]
	time.Sleep(time.Until(s.ends))
	return s.token, nil
}

// TestNewcomerWaitsAtMostOneForward: a greedy stream alone runs as a chain on the device; a
// request that arrives halfway through one of its steps has its first forward after that step and
// at most one more, not after a whole chain.
func TestNewcomerWaitsAtMostOneForward(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &deviceToy{toyModel: newToy(32, 2048)}
		h, err := NewShared(m, SharedOptions{Layout: []int{1024, 1024}, Grow: 8, Chainer: m})
		if err != nil {
			t.Fatal(err)
		}
		lone, err := h.Submit(t.Context(), Request{Prompt: []int32{1, 2, 3}, MaxTokens: 300})
		if err != nil {
			t.Fatal(err)
		}
		for range 20 {
			<-lone
		}
		time.Sleep(forwardTime / 2) // halfway through a step
		arrived := time.Now()
		newcomer, err := h.Submit(t.Context(), Request{Prompt: []int32{4, 5, 6}, MaxTokens: 5})
		if err != nil {
			t.Fatal(err)
		}
		lonely := drain(lone)
		if _, end := collect(t, newcomer); end.Reason != FinishLength {
			t.Fatalf("the newcomer ended %s: %v", end.Reason, end.Err)
		}
		<-lonely
		closeHost(t, h) // the lane has ended: its logs are the test's to read

		i := slices.IndexFunc(m.rounds, func(start time.Time) bool { return !start.Before(arrived) })
		if i < 0 {
			t.Fatal("no forward after the newcomer arrived")
		}
		first := m.rounds[i]
		before, after := 0, 0
		for _, start := range m.steps {
			switch {
			case start.Before(arrived):
				before++
			case start.Before(first):
				after++
			}
		}
		t.Logf("%d chain steps before the arrival, %d after it and before the newcomer's first forward, which began %v after it",
			before, after, first.Sub(arrived))
		if before < 10 {
			t.Fatalf("the lone stream ran %d chain steps before the arrival: it was not chaining", before)
		}
		if after > 1 {
			t.Errorf("the newcomer waited for %d chain steps that started after it arrived; want at most 1", after)
		}
	})
}

// draftDeviceToy is deviceToy with an MTP head and drafted chains (batch.DraftChainer) on its
// simulated device. The host's Draft calls draft token 0 everywhere; a chain step's head drafts
// the toy's own greedy continuation, so its drafts land. A step takes forwardTime of the device;
// its verdict is worked out when it is enqueued and handed over when the step ends. It logs when
// each drafted step started on the device.
type draftDeviceToy struct {
	*deviceToy
	row        batch.Row // the next step's newest token
	drafts     []int32   // and its drafts
	verdicts   []queuedVerdict
	draftSteps []time.Time
}

type queuedVerdict struct {
	accepted, next []int32
	ends           time.Time
}

func (m *draftDeviceToy) Draft(_ context.Context, rows []batch.DraftRow) ([]float32, error) {
	n := 0
	for _, r := range rows {
		if r.Logits {
			n++
		}
	}
	return make([]float32, n*m.vocab), nil
}

func (m *draftDeviceToy) StartDraftChain(_ context.Context, row batch.Row, drafts []int32) error {
	m.row, m.drafts, m.verdicts = row, slices.Clone(drafts), m.verdicts[:0]
	return nil
}

func (m *draftDeviceToy) Step() error {
	if len(m.verdicts) == batch.ChainAhead {
		return errors.New("draftDeviceToy: more steps untaken than batch.ChainAhead")
	}
	m.draftSteps = append(m.draftSteps, m.run())
	rows := []batch.Row{{Base: m.row.Base, Pos: m.row.Pos, Token: m.row.Token, Logits: true}}
	for i, tok := range m.drafts {
		rows = append(rows, batch.Row{Base: m.row.Base, Pos: m.row.Pos + 1 + i, Token: tok, Logits: true})
	}
	logits, err := m.toyModel.Forward(context.Background(), rows)
	if err != nil {
		return err
	}
	var accepted []int32
	for i := range rows {
		tok := batch.Argmax(logits[i*m.vocab : (i+1)*m.vocab])
		accepted = append(accepted, tok)
		if i == len(m.drafts) || tok != m.drafts[i] {
			break
		}
	}
	next := m.row.Pos + len(accepted) // the new newest token's position
	tok := accepted[len(accepted)-1]
	drafts := make([]int32, len(m.drafts))
	for i := range drafts {
		l, err := m.toyModel.Forward(context.Background(), []batch.Row{{Base: m.row.Base, Pos: next + i, Token: tok, Logits: true}})
		if err != nil {
			return err
		}
		tok = batch.Argmax(l)
		drafts[i] = tok
	}
	m.verdicts = append(m.verdicts, queuedVerdict{accepted, slices.Clone(drafts), m.busyUntil})
	m.row, m.drafts = batch.Row{Base: m.row.Base, Pos: next, Token: accepted[len(accepted)-1]}, drafts
	return nil
}

// Verdict waits, on synctest's clock (every test of the toy runs in a bubble), until the step
// that made it is done on the toy's device, as a real device's read of the verdict would.
func (m *draftDeviceToy) Verdict() ([]int32, []int32, error) {
	v := m.verdicts[0]
	m.verdicts = m.verdicts[1:]
	time.Sleep(time.Until(v.ends))
	return v.accepted, v.next, nil
}

// TestNewcomerWaitsAtMostOneDraftedStep: a greedy stream alone that drafts with the MTP head runs
// as drafted chains on the device; a request that arrives halfway through a step has its first
// forward after that step and at most one more, and the lone reply is its undrafted self.
func TestNewcomerWaitsAtMostOneDraftedStep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &draftDeviceToy{deviceToy: &deviceToy{toyModel: newToy(32, 2048)}}
		h, err := NewShared(m, SharedOptions{Layout: []int{1024, 1024}, Grow: 8, Drafter: m, DraftChainer: m})
		if err != nil {
			t.Fatal(err)
		}
		req := Request{Prompt: []int32{1, 2, 3}, MaxTokens: 300, Drafts: Drafts{MTP: 3}}
		lone, err := h.Submit(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		var head []int32
		for range 40 {
			head = append(head, (<-lone).Token)
		}
		time.Sleep(forwardTime / 2) // halfway through a step
		arrived := time.Now()
		newcomer, err := h.Submit(t.Context(), Request{Prompt: []int32{4, 5, 6}, MaxTokens: 5})
		if err != nil {
			t.Fatal(err)
		}
		lonely := drain(lone)
		if _, end := collect(t, newcomer); end.Reason != FinishLength {
			t.Fatalf("the newcomer ended %s: %v", end.Reason, end.Err)
		}
		for _, ev := range <-lonely {
			if !ev.Done {
				head = append(head, ev.Token)
			}
		}
		closeHost(t, h) // the lane has ended: its logs are the test's to read

		serial := NewSerial(newToy(32, 2048), SharedOptions{})
		req.Drafts = Drafts{}
		events, err := serial.Submit(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := collect(t, events)
		closeHost(t, serial)
		if !slices.Equal(head, want) {
			t.Errorf("the lone drafted reply\n %v\nundrafted\n %v", head, want)
		}

		i := slices.IndexFunc(m.rounds, func(start time.Time) bool { return !start.Before(arrived) })
		if i < 0 {
			t.Fatal("no forward after the newcomer arrived")
		}
		first := m.rounds[i]
		before, after := 0, 0
		for _, start := range m.draftSteps {
			switch {
			case start.Before(arrived):
				before++
			case start.Before(first):
				after++
			}
		}
		t.Logf("%d drafted steps before the arrival, %d after it and before the newcomer's first forward, which began %v after it",
			before, after, first.Sub(arrived))
		if before < 5 {
			t.Fatalf("the lone stream ran %d drafted steps before the arrival: it was not on drafted chains", before)
		}
		if after > 1 {
			t.Errorf("the newcomer waited for %d drafted steps that started after it arrived; want at most 1", after)
		}
	})
}

// TestCloseEndsAChainingStream: a Close that gives up on a stream running on the lone driver (a
// greedy chain, a drafted chain) ends it and returns: the lane, which the chain leaves with the
// stream cancelled but not yet ended, ends it and stops instead of waiting for a wake that no
// one sends.
func TestCloseEndsAChainingStream(t *testing.T) {
	for _, drafts := range []Drafts{{}, {MTP: 2}} {
		synctest.Test(t, func(t *testing.T) {
			m := &draftDeviceToy{deviceToy: &deviceToy{toyModel: newToy(32, 2048)}}
			h, err := NewShared(m, SharedOptions{Layout: []int{1024}, Chainer: m.deviceToy, Drafter: m, DraftChainer: m})
			if err != nil {
				t.Fatal(err)
			}
			events, err := h.Submit(t.Context(), Request{Prompt: []int32{1, 2, 3}, MaxTokens: 900, Drafts: drafts})
			if err != nil {
				t.Fatal(err)
			}
			for range 10 {
				<-events
			}
			got := drain(events)
			ctx, cancel := context.WithTimeout(t.Context(), 5*forwardTime)
			defer cancel()
			if err := h.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%+v: Close gave %v, want it to give up on the running reply", drafts, err)
			}
			evs := <-got
			if end := evs[len(evs)-1]; !end.Done || end.Reason != FinishCancelled {
				t.Errorf("%+v: the reply ended %+v, want cancelled", drafts, end)
			}
			if len(m.steps)+len(m.draftSteps) == 0 {
				t.Errorf("%+v: the reply ran no chain step", drafts)
			}
		})
	}
}

// missingDrafts is draftDeviceToy with an MTP head that is always wrong: each step's next drafts
// are the toy's continuation plus one, so no draft after the chain's first step lands.
type missingDrafts struct{ *draftDeviceToy }

func (m missingDrafts) Step() error {
	if err := m.draftDeviceToy.Step(); err != nil {
		return err
	}
	for i := range m.drafts {
		m.drafts[i] = (m.drafts[i] + 1) % int32(m.vocab)
	}
	v := &m.verdicts[len(m.verdicts)-1]
	v.next = slices.Clone(m.drafts)
	return nil
}

// TestChainEndsWhenDraftsStopLanding: a greedy stream alone whose MTP head's drafts never land
// starts a drafted chain (nothing has missed yet), and ends it once pricing, which takes each
// step's verdict, no longer grants the drafts: the stream drops the head and makes the rest of
// its reply on undrafted chains (without pricing each step again it ran 299 drafted steps). Its
// reply is its undrafted self.
func TestChainEndsWhenDraftsStopLanding(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		toy := &draftDeviceToy{deviceToy: &deviceToy{toyModel: newToy(32, 2048)}}
		m := missingDrafts{toy}
		h, err := NewShared(toy, SharedOptions{Layout: []int{1024}, Chainer: toy.deviceToy, Drafter: toy, DraftChainer: m})
		if err != nil {
			t.Fatal(err)
		}
		req := Request{Prompt: []int32{1, 2, 3}, MaxTokens: 300, Drafts: Drafts{MTP: 3}}
		events, err := h.Submit(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		got, end := collect(t, events)
		closeHost(t, h)

		serial := NewSerial(newToy(32, 2048), SharedOptions{})
		req.Drafts = Drafts{}
		events, err = serial.Submit(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := collect(t, events)
		closeHost(t, serial)
		if !slices.Equal(got, want) {
			t.Errorf("the reply\n %v\nundrafted\n %v", got, want)
		}
		t.Logf("%d drafts fed, %d landed; %d drafted chain steps, %d undrafted", end.Drafted, end.Accepted, len(toy.draftSteps), len(toy.steps))
		if len(toy.draftSteps) == 0 {
			t.Fatal("no drafted chain step ran: the test's premise failed")
		}
		// Unclocked, pricing takes a draft's row for a tenth of a forward's cost, and a depth never
		// seen for 3 in 4 to land: the head's first draft stops paying after 30 misses.
		if len(toy.draftSteps) > 40 || len(toy.steps) < 250 {
			t.Errorf("%d drafted chain steps, %d undrafted for %d tokens: want the drafted chain ended after about 30 misses",
				len(toy.draftSteps), len(toy.steps), len(got))
		}
	})
}
