package engine_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"tfd/batch"
	"tfd/compute/computetest"
	"tfd/engine"
	"tfd/models"
	"tfd/promptcache"
)

var _ promptcache.Store = (*engine.BlockStore)(nil)

const blockTokens = promptcache.BlockTokens

// bundledForStore loads the bundled model (with its MTP head) with room for three sessions of
// 256 slots, at 0, 256 and 512, and forwards of two blocks.
func bundledForStore(t *testing.T) (*engine.Model, batch.Drafter) {
	t.Helper()
	m, err := engine.Load(context.Background(), engine.Source{FS: models.FS(), Name: models.Name}, openCPU(t),
		engine.Options{Context: 256, MaxRows: 2 * blockTokens, Slots: 768})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	d := m.MTP()
	if d == nil {
		t.Fatal("the bundled model should load its MTP head")
	}
	return m, d
}

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

// TestBlockStoreRestoresExactly: two blocks saved from a prefilled session and restored into
// another session's same positions (over a history of its own, which gives other logits) make
// the next step there the same bits as in the first session: the logits, and the MTP head's draft,
// which reads the MTP layer's keys and values. The blocks read to the host and written into a
// fresh store restore the same bits into a third session.
func TestBlockStoreRestoresExactly(t *testing.T) {
	m, d := bundledForStore(t)
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

// TestBlockStoreResize: Resize keeps the blocks it is told to, in the order given, and zeroes the
// rest; it can shrink to nothing and grow again; bad arguments are errors that name the numbers,
// and the store is as it was after one.
func TestBlockStoreResize(t *testing.T) {
	m, _ := bundledForStore(t)
	store, err := m.NewBlockStore(4, blockTokens)
	if err != nil {
		t.Fatal(err)
	}
	size := store.BlockBytes()
	if want := 2 * 9 * 2 * 64 * 4 * blockTokens; size != want { // 8 layers and the MTP layer, 2 KV heads of 64
		t.Fatalf("BlockBytes = %d, want %d", size, want)
	}
	r := rand.New(rand.NewPCG(4, 5))
	content := make([][]byte, 4)
	for i := range content {
		content[i] = make([]byte, size)
		for j := range content[i] {
			content[i][j] = byte(r.Uint32())
		}
		if err := store.Write(i, content[i]); err != nil {
			t.Fatal(err)
		}
	}
	zero := make([]byte, size)
	expect := func(what string, want ...[]byte) {
		t.Helper()
		if store.Blocks() != len(want) {
			t.Fatalf("%s: %d blocks, want %d", what, store.Blocks(), len(want))
		}
		got := make([]byte, size)
		for i, w := range want {
			if err := store.Read(i, got); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, w) {
				t.Errorf("%s: block %d holds other bytes than it should", what, i)
			}
		}
	}
	for _, step := range []struct {
		blocks int
		keep   []int
		want   [][]byte
	}{
		{6, []int{2, 0, 1}, [][]byte{content[2], content[0], content[1], zero, zero, zero}},
		{1, []int{2}, [][]byte{content[1]}},
		{0, nil, nil},
		{2, nil, [][]byte{zero, zero}},
	} {
		if err := store.Resize(step.blocks, step.keep); err != nil {
			t.Fatal(err)
		}
		expect(fmt.Sprintf("after Resize(%d, %v)", step.blocks, step.keep), step.want...)
	}

	for _, tc := range []struct {
		err  error
		want string
	}{
		{store.Resize(3, []int{0, 2}), "keep[1] is block 2 of 2"},
		{store.Resize(1, []int{0, 1}), "resize a block store to 1 blocks: the 2 blocks to keep do not fit"},
		{store.Resize(-1, nil), "to -1 blocks"},
		{store.Save(2, 0, 0), "save block 2 of a block store of 2 blocks"},
		{store.Restore(700, 5, 1), "restore block 1 at positions 5…68 of the session at slot 700: slots 705…768 are outside the KV pool of 768"},
		{store.Save(0, 0, -1), "slots -1…62 are outside"},
		{store.Read(0, make([]byte, size-1)), "a block is"},
		{store.Write(0, make([]byte, size+1)), "a block is"},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("error %v, want one saying %q", tc.err, tc.want)
		}
	}
	expect("after the refused calls", zero, zero)
	if err := store.Restore(700, 4, 1); err != nil {
		t.Errorf("restore into the pool's last 64 slots: %v", err)
	}

	m.Close() // closes the store too
	if err := store.Read(0, make([]byte, size)); err == nil || store.Blocks() != 0 {
		t.Errorf("after the model's Close: Read = %v, Blocks = %d; want an error and 0", err, store.Blocks())
	}
}
