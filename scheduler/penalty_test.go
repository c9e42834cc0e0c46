package scheduler_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"tfd/batch"
	"tfd/engine"
	"tfd/scheduler"
	"tfd/scheduler/schedulertest"
)

// penalised returns reqs with penalties of every kind, the first greedy and the rest as they are.
func penalised(m *engine.Model, n int) []scheduler.Request {
	reqs := requests(m, n)
	for i := range reqs {
		reqs[i].MaxTokens, reqs[i].StopTokens = 64, nil
		reqs[i].Sampling.Penalties = scheduler.Penalties{
			Presence: 0.4, Frequency: 0.3, Repetition: 1.2,
			Bias: map[int32]float32{reqs[i].Prompt[0]: -3, 11: 2.5},
		}
	}
	return reqs
}

// TestPenalisedDraftedEqualsUndrafted: penalised replies, greedy and sampled, are the same tokens
// with drafts and beside others as alone without drafts (the counts a penalty reads move with
// each verified draft), and the penalties really change the replies.
func TestPenalisedDraftedEqualsUndrafted(t *testing.T) {
	m := loadBundled(t, 4*512)
	reqs := penalised(m, 4)
	want := solo(t, m, reqs)
	plain := slices.Clone(reqs)
	for i := range plain {
		plain[i].Sampling.Penalties = scheduler.Penalties{}
	}
	for i, r := range solo(t, m, plain) {
		if slices.Equal(r.tokens, want[i].tokens) {
			t.Fatalf("stream %d: the penalties changed nothing: %v", i, r.tokens)
		}
	}
	h, err := scheduler.NewShared(m, schedulertest.Equip(m, scheduler.SharedOptions{Layout: slices.Repeat([]int{512}, 4)}))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	chans := submitAll(t, h, reqs, scheduler.Drafts{MTP: 3, NGram: 4})
	accepted := 0
	for i, r := range drainAll(chans) {
		sameReply(t, fmt.Sprintf("stream %d (sampled %v)", i, !reqs[i].Sampling.Greedy()), r, want[i])
		accepted += r.end.Accepted
	}
	if accepted == 0 {
		t.Fatal("no draft landed: the test did not verify any")
	}
}

// TestPenalisedGreedyEqualsStepwise: a penalised greedy stream alone must not take the device's
// greedy chains (they take the raw argmax); its reply equals plain forwards with the penalties,
// written here from their definitions, applied before an argmax.
func TestPenalisedGreedyEqualsStepwise(t *testing.T) {
	m := loadBundled(t, 512)
	if m.Chains() == nil {
		t.Fatal("the CPU backend should run greedy chains")
	}
	req := penalised(m, 1)[0]
	got := solo(t, m, []scheduler.Request{req})[0]
	p := req.Sampling.Penalties
	seq := slices.Clone(req.Prompt)
	rows := make([]batch.Row, len(seq))
	for i, tok := range seq {
		rows[i] = batch.Row{Pos: i, Token: tok, Logits: i == len(seq)-1}
	}
	var want []int32
	for len(want) < req.MaxTokens {
		logits, err := m.Forward(context.Background(), rows)
		if err != nil {
			t.Fatal(err)
		}
		l := slices.Clone(logits[:m.Vocab()])
		for id := range l {
			v := l[id] + p.Bias[int32(id)]
			if slices.Contains(seq, int32(id)) {
				if v > 0 {
					v /= p.Repetition
				} else {
					v *= p.Repetition
				}
			}
			if c := count(want, int32(id)); c > 0 {
				v -= float32(c)*p.Frequency + p.Presence
			}
			l[id] = v
		}
		tok := batch.Argmax(l)
		want = append(want, tok)
		rows = []batch.Row{{Pos: len(seq), Token: tok, Logits: true}}
		seq = append(seq, tok)
	}
	if !slices.Equal(got.tokens, want) {
		t.Fatalf("penalised greedy reply\n %v\nstepwise\n %v", got.tokens, want)
	}
}

func count(s []int32, id int32) int {
	n := 0
	for _, v := range s {
		if v == id {
			n++
		}
	}
	return n
}
