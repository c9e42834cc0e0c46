package scheduler

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestPicksAheadAreThePicks: the picks prepick and predraft make side by side are, row by row,
// the picks verify and draftMTP make one after another: each stream's rows at the positions that
// follow its newest token and its drafts, once the drafts before the row are accepted, and each
// MTP draft at the position after the stream's chain so far. Penalties are read, with the drafts
// before the row counted: a bias that makes token 7 all but certain fails a pick that skips them,
// and a greedy stream whose biased tokens 11, 10, 9 are its drafts in turn, under a frequency
// penalty of 100, fails one that does not count the drafts. A stream that asks for
// log-probabilities gets the walk's, taken ahead with its picks.
func TestPicksAheadAreThePicks(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	const vocab = 40000 // past parallelDraw: top_p alone splits too
	settings := []Sampling{{}, {Temperature: 0.7, Seed: 3}, {Temperature: 0.7, TopP: 0.9, Seed: 4},
		{Temperature: 1, TopK: 20, TopP: 0.8, Seed: 5}, {Temperature: 0.8, MinP: 0.05, Seed: 6},
		{Temperature: 0.7, Seed: 7, Penalties: Penalties{Presence: 0.5}},
		{Temperature: 0.7, TopP: 0.9, Seed: 8, Penalties: Penalties{Repetition: 1.1, Frequency: 0.3, Bias: map[int32]float32{7: 40}}},
		{Temperature: 0.9, TopK: 50, Seed: 9},
		{Penalties: Penalties{Frequency: 100, Repetition: 1.2, Bias: map[int32]float32{7: 40, 8: 40.1, 9: 40.2, 10: 40.3, 11: 40.4}}}}
	l := &laneState{now: time.Now}
	rows := 0
	for i, set := range settings {
		// Every other stream asks for log-probabilities, three alternatives at each token.
		a := &active{stream: &stream{req: Request{Sampling: set, Logprobs: i%2 == 1, TopLogprobs: 3}}, tokens: make([]int32, 5+3*i), drafts: make([]int32, i%3), mtpDrafts: make([]int32, i%2)}
		for j := range a.tokens {
			a.tokens[j] = int32(r.IntN(vocab))
		}
		if len(set.Penalties.Bias) > 1 {
			a.drafts = []int32{11, 10, 11}
		}
		l.shares = append(l.shares, share{a: a, logits: rows})
		l.drafting = append(l.drafting, a)
		rows += 1 + len(a.drafts)
	}
	logits := make([]float32, rows*vocab)
	for i := range logits {
		logits[i] = float32(r.NormFloat64() * 3)
	}
	for _, s := range l.shares {
		if len(s.a.req.Sampling.Penalties.Bias) > 1 {
			for row := s.logits; row <= s.logits+len(s.a.drafts); row++ {
				clear(logits[row*vocab+7 : row*vocab+12]) // the bias alone orders 7 … 11
			}
		}
	}
	var one sampler
	// pick is the walk's pick at row, position pos, once extra is accepted after a's tokens.
	pick := func(a *active, row, pos int, extra []int32) int32 {
		w := &active{stream: a.stream, tokens: append(slices.Clone(a.tokens), extra...)}
		return one.pick(w.penalised(logits[row*vocab:(row+1)*vocab]), a.req.Sampling, pos)
	}

	l.prepick(logits, vocab)
	for _, s := range l.shares {
		if s.ahead != pickAhead(s.a) {
			t.Errorf("%+v: picked ahead %v, want %v", s.a.req.Sampling, s.ahead, pickAhead(s.a))
		}
		for d := range 1 + len(s.a.drafts) {
			row := s.logits + d
			want := pick(s.a, row, len(s.a.tokens)+d, s.a.drafts[:d])
			if !s.ahead {
				continue
			}
			if l.ahead[row] != want {
				t.Errorf("%+v, row %d after the newest: %d ahead, %d in the walk", s.a.req.Sampling, d, l.ahead[row], want)
			}
			if s.a.req.Logprobs {
				lp, top := new(sampler).logprobs(logits[row*vocab:(row+1)*vocab], want, 3)
				if got := l.aheadLP[row]; got.Logprob != lp || !slices.Equal(got.Top, top) {
					t.Errorf("%+v, row %d after the newest: log-probabilities %v %v ahead, %v %v in the walk", s.a.req.Sampling, d, got.Logprob, got.Top, lp, top)
				}
			}
		}
	}
	if !l.predraft(logits, vocab) {
		t.Fatal("predraft picked nothing ahead")
	}
	for i, a := range l.drafting {
		if want := pick(a, i, len(a.tokens)+len(a.mtpDrafts), nil); l.ahead[i] != want {
			t.Errorf("%+v: draft %d ahead, %d in draftMTP", a.req.Sampling, l.ahead[i], want)
		}
	}
}

// TestPenalisedAfterIsPenalised: penalisedAfter's row for tokens then extra is, bit for bit,
// penalised's once extra is among the tokens, for every kind of penalty and ids shared between
// the prompt, the reply so far and extra (repeated within extra too).
func TestPenalisedAfterIsPenalised(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	const vocab = 64
	logits := make([]float32, vocab)
	ids := func(n int) []int32 {
		out := make([]int32, n)
		for i := range out {
			out[i] = int32(r.IntN(vocab / 2)) // half the vocabulary: ids recur
		}
		return out
	}
	for trial := range 500 {
		for i := range logits {
			logits[i] = float32(r.NormFloat64() * 3)
		}
		prompt, reply, extra := ids(1+r.IntN(8)), ids(r.IntN(8)), ids(r.IntN(6))
		req := Request{Prompt: prompt, Sampling: Sampling{Penalties: Penalties{
			Presence: float32(r.NormFloat64()), Frequency: float32(r.NormFloat64()),
			Repetition: []float32{0, 1, 1.3}[trial%3], Bias: map[int32]float32{int32(r.IntN(vocab)): 2.5},
		}}}
		a := &active{stream: &stream{req: req}, tokens: append(slices.Clone(prompt), reply...)}
		a.countPenalties()
		got := a.penalisedAfter(logits, extra, nil)
		w := &active{stream: a.stream, tokens: append(slices.Clone(a.tokens), extra...)}
		if want := w.penalised(logits); !slices.Equal(got, want) {
			t.Fatalf("trial %d, prompt %v, reply %v, extra %v, %+v:\n got %v\nwant %v", trial, prompt, reply, extra, req.Sampling.Penalties, got, want)
		}
	}
}
