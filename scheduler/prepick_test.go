package scheduler

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestPicksAheadAreThePicks: the picks prepick and predraft make side by side are, row by row,
// the picks verify and draftMTP make one after another: each stream's rows at the positions that
// follow its newest token and its drafts, and each MTP draft at the position after the stream's
// chain so far; a stream with penalties is picked ahead in a round where it has no drafts, its
// penalties read (a bias that makes token 7 all but certain, so that a pick without them fails);
// a stream that asks for log-probabilities gets the walk's, taken ahead with its picks.
func TestPicksAheadAreThePicks(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	const vocab = 40000 // past parallelDraw: top_p alone splits too
	settings := []Sampling{{}, {Temperature: 0.7, Seed: 3}, {Temperature: 0.7, TopP: 0.9, Seed: 4},
		{Temperature: 1, TopK: 20, TopP: 0.8, Seed: 5}, {Temperature: 0.8, MinP: 0.05, Seed: 6},
		{Temperature: 0.7, Seed: 7, Penalties: Penalties{Presence: 0.5}},
		{Temperature: 0.7, TopP: 0.9, Seed: 8, Penalties: Penalties{Repetition: 1.1, Frequency: 0.3, Bias: map[int32]float32{7: 40}}},
		{Temperature: 0.9, TopK: 50, Seed: 9}}
	l := &laneState{now: time.Now}
	rows := 0
	for i, set := range settings {
		// Every other stream asks for log-probabilities, three alternatives at each token.
		a := &active{stream: &stream{req: Request{Sampling: set, Logprobs: i%2 == 1, TopLogprobs: 3}}, tokens: make([]int32, 5+3*i), drafts: make([]int32, i%3), mtpDrafts: make([]int32, i%2)}
		for j := range a.tokens {
			a.tokens[j] = int32(r.IntN(vocab))
		}
		l.shares = append(l.shares, share{a: a, logits: rows})
		l.drafting = append(l.drafting, a)
		rows += 1 + len(a.drafts)
	}
	logits := make([]float32, rows*vocab)
	for i := range logits {
		logits[i] = float32(r.NormFloat64() * 3)
	}
	var one sampler
	pick := func(a *active, row, pos int) int32 {
		return one.pick(a.penalised(logits[row*vocab:(row+1)*vocab]), a.req.Sampling, pos)
	}

	l.prepick(logits, vocab)
	for _, s := range l.shares {
		if s.ahead != pickAhead(s.a) {
			t.Errorf("%+v: picked ahead %v, want %v", s.a.req.Sampling, s.ahead, pickAhead(s.a))
		}
		for d := range 1 + len(s.a.drafts) {
			row := s.logits + d
			want := pick(s.a, row, len(s.a.tokens)+d)
			if !s.ahead {
				continue
			}
			if l.ahead[row] != want {
				t.Errorf("%+v, row %d after the newest: %d ahead, %d in the walk", s.a.req.Sampling, d, l.ahead[row], want)
			}
			if s.a.req.Logprobs {
				lp, top := logprobs(logits[row*vocab:(row+1)*vocab], want, 3)
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
		if want := pick(a, i, len(a.tokens)+len(a.mtpDrafts)); l.ahead[i] != want {
			t.Errorf("%+v: draft %d ahead, %d in draftMTP", a.req.Sampling, l.ahead[i], want)
		}
	}
}
