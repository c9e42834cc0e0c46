package enginetest

import (
	"bytes"
	"context"
	"math/rand/v2"
	"slices"
	"testing"

	"tfd/batch"
	"tfd/compute"
	"tfd/compute/computetest"
	"tfd/engine"
	"tfd/promptcache"
)

const blockTokens = promptcache.BlockTokens

// randomTokens returns n tokens of the model's vocabulary.
func randomTokens(m *engine.Model, seed uint64, n int) []int32 {
	r := rand.New(rand.NewPCG(seed, 1))
	toks := make([]int32, n)
	for i := range toks {
		toks[i] = int32(r.IntN(m.Vocab()))
	}
	return toks
}

// prefill feeds tokens to the session at base from position 0, through the backbone and the
// MTP head (whose entry at the last position waits for the next token, as in a stream).
func prefill(t *testing.T, m *engine.Model, d batch.Drafter, base int, tokens []int32) {
	t.Helper()
	ctx := context.Background()
	rows := make([]batch.Row, len(tokens))
	drafts := make([]batch.DraftRow, len(tokens)-1)
	for i, tok := range tokens {
		rows[i] = batch.Row{Base: base, Pos: i, Token: tok}
		if i > 0 {
			drafts[i-1] = batch.DraftRow{Base: base, Pos: i - 1, Token: tok, Source: i - 1}
		}
	}
	if _, err := m.Forward(ctx, rows); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Draft(ctx, drafts); err != nil {
		t.Fatal(err)
	}
}

// nextStep runs the step after a prefix of pos positions of the session at base, as a stream
// would: the last position fed again with the next token, and the head's entries for both; it
// returns the logits at pos and the head's draft logits for pos+2, which read every layer's keys
// and values (the MTP layer's included) over the prefix.
func nextStep(t *testing.T, m *engine.Model, d batch.Drafter, base, pos int, last, next, after int32) (logits, draft []float32) {
	t.Helper()
	ctx := context.Background()
	l, err := m.Forward(ctx, []batch.Row{{Base: base, Pos: pos - 1, Token: last}, {Base: base, Pos: pos, Token: next, Logits: true}})
	if err != nil {
		t.Fatal(err)
	}
	logits = slices.Clone(l)
	l, err = d.Draft(ctx, []batch.DraftRow{{Base: base, Pos: pos - 1, Token: next, Source: 0}, {Base: base, Pos: pos, Token: after, Source: 1, Logits: true}})
	if err != nil {
		t.Fatal(err)
	}
	return logits, slices.Clone(l)
}

// CheckBlockStore checks engine.BlockStore on the bundled model (with its MTP head) on backend:
// two blocks saved from a prefilled session and restored into another session's same positions
// (over a history of its own, which gives other logits) make the next step there the same bits
// as in the first session: the logits, and the MTP head's draft, which reads the MTP layer's keys
// and values. The blocks read to the host and written into a fresh store restore the same bits
// into a third session. The engine's tests run it on the CPU, cuda's and metal's on their GPUs.
func CheckBlockStore(t *testing.T, backend compute.Backend) {
	m := Load(t, backend, "models/gopher", engine.Options{Context: 256, MaxRows: 2 * blockTokens, Slots: 768})
	d := m.MTP()
	if d == nil {
		t.Fatal("the bundled model should load its MTP head")
	}
	const a, b, c = 0, 256, 512 // the sessions' first slots
	const n = 2 * blockTokens
	prompt := randomTokens(m, 1, n+2)
	last, next, after := prompt[n-1], prompt[n], prompt[n+1]
	prefill(t, m, d, a, prompt[:n])
	prefill(t, m, d, b, randomTokens(m, 2, n))
	prefill(t, m, d, c, randomTokens(m, 3, n))
	wantLogits, wantDraft := nextStep(t, m, d, a, n, last, next, after)
	if l, _ := nextStep(t, m, d, b, n, last, next, after); slices.Equal(l, wantLogits) {
		t.Fatal("premise: session b's own history should give other logits at the same step")
	}

	store, err := m.NewBlockStore(4, blockTokens)
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{store.Save(3, a, 0), store.Save(1, a, blockTokens),
		store.Restore(b, 0, 3), store.Restore(b, blockTokens, 1)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	logits, draft := nextStep(t, m, d, b, n, last, next, after)
	computetest.SameBits(t, "logits after the restore", logits, wantLogits)
	computetest.SameBits(t, "draft logits after the restore", draft, wantDraft)

	// Through the host, into a fresh store, into session c.
	fresh, err := m.NewBlockStore(2, blockTokens)
	if err != nil {
		t.Fatal(err)
	}
	for i, block := range []int{3, 1} {
		host := make([]byte, store.BlockBytes())
		if err := store.Read(block, host); err != nil {
			t.Fatal(err)
		}
		if bytes.Equal(host, make([]byte, len(host))) {
			t.Fatalf("premise: block %d read back as zeros", block)
		}
		if err := fresh.Write(i, host); err != nil {
			t.Fatal(err)
		}
		back := make([]byte, fresh.BlockBytes())
		if err := fresh.Read(i, back); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(back, host) {
			t.Fatalf("block %d written to a fresh store reads back other bytes", block)
		}
		if err := fresh.Restore(c, i*blockTokens, i); err != nil {
			t.Fatal(err)
		}
	}
	logits, draft = nextStep(t, m, d, c, n, last, next, after)
	computetest.SameBits(t, "logits after a restore through the host", logits, wantLogits)
	computetest.SameBits(t, "draft logits after a restore through the host", draft, wantDraft)
}
