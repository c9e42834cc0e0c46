package scheduler_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"tfd/engine"
	"tfd/grammar"
	"tfd/scheduler"
	"tfd/scheduler/schedulertest"
)

// vocabOf lays out the model's vocabulary for grammar masks: special tokens have no bytes, so
// only the stop tokens, where the grammar accepts, stand for them.
func vocabOf(m *engine.Model) *grammar.Vocab {
	tok := m.Tokenizer()
	tokens := make([][]byte, m.Vocab())
	for id := range tokens {
		if !tok.IsSpecial(int32(id)) {
			tokens[id] = tok.TokenBytes(int32(id))
		}
	}
	return grammar.NewVocab(tokens)
}

const testSchema = `{"type":"object","properties":{"name":{"type":"string"},"count":{"type":"integer"},"ok":{"type":"boolean"},"color":{"enum":["red","green","blue"]}},"required":["name","count","ok","color"],"additionalProperties":false}`

// constrainedRequests returns the test requests under a JSON schema or json_object, greedy and
// sampled.
func constrainedRequests(t *testing.T, m *engine.Model, n int) []scheduler.Request {
	g, err := grammar.Compile([]byte(testSchema))
	if err != nil {
		t.Fatal(err)
	}
	v := vocabOf(m)
	reqs := requests(m, n)
	for i := range reqs {
		reqs[i].MaxTokens = 60
		reqs[i].Constraint = grammar.NewMatcher(g, v)
		if i%3 == 2 {
			reqs[i].Constraint = grammar.NewMatcher(grammar.AnyObject(), v)
		}
	}
	return reqs
}

// checkJSON checks a constrained reply: whole and valid JSON when it stopped, and a prefix the
// grammar accepts when it ran out of tokens.
func checkJSON(t *testing.T, m *engine.Model, name string, req scheduler.Request, r reply) {
	t.Helper()
	text := m.Tokenizer().Decode(r.tokens)
	s, ok := req.Constraint.Start(), true
	for _, tok := range r.tokens {
		if s, ok = req.Constraint.Advance(s, tok); !ok {
			t.Errorf("%s: token %d refused by its own grammar in %q", name, tok, text)
			return
		}
	}
	switch r.end.Reason {
	case scheduler.FinishStop:
		var v map[string]any
		if err := json.Unmarshal([]byte(text), &v); err != nil || !req.Constraint.Accepting(s) {
			t.Errorf("%s: stopped with %q: %v", name, text, err)
		}
	case scheduler.FinishLength:
	default:
		t.Errorf("%s: ended %q (%v)", name, r.end.Reason, r.end.Err)
	}
}

// TestConstrainedDraftedEqualsUndrafted: under a grammar, replies with MTP and n-gram drafts in
// shared rounds, and alone on the lone driver, equal the undrafted serial ones, greedy and
// sampled; every reply is JSON, or a prefix of it where the token limit cut it.
func TestConstrainedDraftedEqualsUndrafted(t *testing.T) {
	m := loadBundled(t, 4*512)
	reqs := constrainedRequests(t, m, 6)
	want := solo(t, m, reqs)
	stopped := 0
	for i, r := range want {
		checkJSON(t, m, fmt.Sprintf("solo %d", i), reqs[i], r)
		if r.end.Reason == scheduler.FinishStop {
			stopped++
		}
		t.Logf("stream %d: %s %q", i, r.end.Reason, m.Tokenizer().Decode(r.tokens))
	}
	if stopped == 0 {
		t.Fatal("no reply finished its JSON: the test proves nothing about stopping")
	}
	h, err := scheduler.NewShared(m, schedulertest.Equip(m, scheduler.SharedOptions{Layout: slices.Repeat([]int{512}, 4)}))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	chans := submitAll(t, h, reqs, scheduler.Drafts{MTP: 3, NGram: 4})
	drafted := 0
	for i, r := range drainAll(chans) {
		sameReply(t, fmt.Sprintf("stream %d (sampled %v)", i, !reqs[i].Sampling.Greedy()), r, want[i])
		drafted += r.end.Drafted
	}
	for i := range 2 { // alone: the lone driver, greedy then sampled
		req := reqs[i]
		req.Drafts = scheduler.Drafts{MTP: 3, NGram: 4}
		events, err := h.Submit(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		r := drain(events)
		sameReply(t, fmt.Sprintf("stream %d alone", i), r, want[i])
		drafted += r.end.Drafted
	}
	if drafted == 0 {
		t.Fatal("no drafts were proposed: the test proves nothing about drafts")
	}
}

// TestConstrainedMigratedEqualsSolo: constrained streams that outgrow small sessions and move
// mid-reply keep their grammar's state, so their replies equal the serial ones.
func TestConstrainedMigratedEqualsSolo(t *testing.T) {
	m := loadBundled(t, 2*48+512+256)
	reqs := constrainedRequests(t, m, 3)
	want := solo(t, m, reqs)
	h, err := scheduler.NewShared(m, schedulertest.Equip(m, scheduler.SharedOptions{Layout: []int{48, 48, 512, 256}, Grow: 4}))
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
	moved := false
	for i, r := range drainAll(chans) {
		sameReply(t, fmt.Sprintf("stream %d", i), r, want[i])
		checkJSON(t, m, fmt.Sprintf("stream %d", i), reqs[i], r)
		moved = moved || len(reqs[i].Prompt)+len(r.tokens) > 48
	}
	if !moved {
		t.Fatal("no reply outgrew the small sessions: the test proves nothing about moving")
	}
}
