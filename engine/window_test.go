package engine_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"tfd/batch"
	"tfd/engine"
	"tfd/engine/enginetest"
	"tfd/promptcache"
)

// The Gemma 3 fixture has a window of 8 over 512 positions: with MaxRows 64 its sliding layers
// keep rings of 71 positions (142 slots a session), and with MaxRows 256 they would take 526, more
// than the context, so that model keeps every position. The two must give the same bits.

const gemma3 = "engine/testdata/oracle/gemma3"

// windowModels loads the fixture twice: with rings (ringed) and keeping every position (whole).
func windowModels(t *testing.T, opts engine.Options) (ringed, whole *engine.Model) {
	t.Helper()
	b := openCPU(t)
	opts.MaxRows = 64
	ringed = enginetest.Load(t, b, gemma3, opts)
	opts.MaxRows = 256
	whole = enginetest.Load(t, b, gemma3, opts)
	if ringed.States() == nil || ringed.Rings() == 0 {
		t.Fatal("the fixture with MaxRows 64 keeps no rings: the test would prove nothing")
	}
	if whole.States() != nil {
		t.Fatal("the fixture with MaxRows 256 keeps rings")
	}
	return ringed, whole
}

// feed runs tokens at positions from … of the session at base in forwards of the given chunk
// sizes (the last repeated), and returns every row's logits.
func feed(t *testing.T, m *engine.Model, base, from int, tokens []int32, chunks ...int) [][]float32 {
	t.Helper()
	var out [][]float32
	for i, c := 0, 0; i < len(tokens); c = min(c+1, len(chunks)-1) {
		n := min(chunks[c], len(tokens)-i)
		rows := make([]batch.Row, n)
		for j := range rows {
			rows[j] = batch.Row{Base: base, Pos: from + i + j, Token: tokens[i+j], Logits: true}
		}
		logits, err := m.Forward(context.Background(), rows)
		if err != nil {
			t.Fatalf("forward of positions %d…%d: %v", from+i, from+i+n-1, err)
		}
		for j := range n {
			out = append(out, slices.Clone(logits[j*m.Vocab():(j+1)*m.Vocab()]))
		}
		i += n
	}
	return out
}

func randomTokens(seed uint64, n, vocab int) []int32 {
	r := rand.New(rand.NewPCG(seed, 2))
	toks := make([]int32, n)
	for i := range toks {
		toks[i] = int32(r.IntN(vocab))
	}
	return toks
}

// sameLogits fails unless got and want are the same bits, row by row.
func sameLogits(t *testing.T, what string, from int, got, want [][]float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d rows, want %d", what, len(got), len(want))
	}
	for i := range got {
		if !slices.Equal(got[i], want[i]) {
			t.Fatalf("%s: position %d's logits differ from the model that keeps every position", what, from+i)
		}
	}
}

// TestWindowRingsEqualEveryPosition: a session whose sliding layers keep a ring gives the bits
// of one that keeps every position, over 500 positions (the ring wrapped seven times), fed in
// chunks of every size up to MaxRows, beside another session, and after drafts rejected.
func TestWindowRingsEqualEveryPosition(t *testing.T) {
	ringed, whole := windowModels(t, engine.Options{Slots: 1024})
	toks := randomTokens(1, 500, ringed.Vocab())
	want := feed(t, whole, 0, 0, toks, 256)
	for _, chunks := range [][]int{{64}, {1}, {7, 64, 3, 1, 29}, {63, 1}} {
		sameLogits(t, fmt.Sprint("chunks ", chunks), 0, feed(t, ringed, 512, 0, toks, chunks...), want)
	}

	// A verification of 20 drafts at 300…319 of which only 5 land, and the stream goes on
	// from 305 with other tokens: the rejected drafts' keys are overwritten before being read.
	other := randomTokens(2, 20, ringed.Vocab())
	for _, m := range []*engine.Model{ringed, whole} {
		feed(t, m, 0, 0, toks[:300], 64)
		feed(t, m, 0, 300, other, 20)
	}
	cont := randomTokens(3, 100, ringed.Vocab())
	sameLogits(t, "after rejected drafts", 305, feed(t, ringed, 0, 305, cont, 1, 3, 40), feed(t, whole, 0, 305, cont, 100))
}

// TestWindowRingsRefuseWhatIsGone: a row whose window the ring no longer holds is refused, not
// computed from other keys; Resumable says where a session can be fed again; and a session
// whose ring went to others (more sessions than rings) can only start over.
func TestWindowRingsRefuseWhatIsGone(t *testing.T) {
	ringed, _ := windowModels(t, engine.Options{Slots: 2048, Sessions: 2})
	toks := randomTokens(4, 300, ringed.Vocab())
	feed(t, ringed, 0, 0, toks, 64)
	// The ring holds positions 229…299 (71 of them): position p can be fed again when its window
	// p−7 … p−1 is there, so from 236 on.
	for _, c := range []struct{ want, got int }{{1000, 300}, {300, 300}, {236, 236}, {235, 0}, {50, 0}, {0, 0}} {
		if got := ringed.Resumable(0, c.want); got != c.got {
			t.Errorf("Resumable(0, %d) = %d, want %d", c.want, got, c.got)
		}
	}
	if _, err := ringed.Forward(context.Background(), []batch.Row{{Base: 0, Pos: 100, Token: 1, Logits: true}}); err == nil {
		t.Error("a row at position 100, whose window the ring overwrote, ran")
	}
	if _, err := ringed.Forward(context.Background(), []batch.Row{{Base: 0, Pos: 302, Token: 1, Logits: true}}); err == nil {
		t.Error("a row at position 302, after a gap, ran")
	}
	feed(t, ringed, 0, 236, toks[236:240], 4) // from where Resumable allows

	// Two more sessions take both rings: the first session's is gone.
	feed(t, ringed, 512, 0, toks[:10], 10)
	feed(t, ringed, 1024, 0, toks[:10], 10)
	if got := ringed.Resumable(0, 240); got != 0 {
		t.Errorf("Resumable of a session whose ring was taken = %d, want 0", got)
	}
	if _, err := ringed.Forward(context.Background(), []batch.Row{{Base: 0, Pos: 240, Token: 1, Logits: true}}); err == nil {
		t.Error("a session whose ring was taken was fed at position 240")
	}
	// Three sessions in one forward with two rings: refused whole.
	rows := []batch.Row{{Base: 0, Pos: 0, Token: 1}, {Base: 512, Pos: 10, Token: 1}, {Base: 1024, Pos: 10, Token: 1, Logits: true}}
	if _, err := ringed.Forward(context.Background(), rows); err == nil {
		t.Error("a forward of three sessions ran on two rings")
	}
	if got := ringed.Resumable(512, 10); got != 10 {
		t.Errorf("a refused forward changed the rings: Resumable(512, 10) = %d, want 10", got)
	}
}

// TestWindowRingsMoveAndRestore: a session moved to another (MoveKV) and one restored from the
// prompt cache's blocks go on with the bits of a model that keeps every position; a block is
// saveable only while the ring holds it.
func TestWindowRingsMoveAndRestore(t *testing.T) {
	ringed, whole := windowModels(t, engine.Options{Slots: 2048})
	toks := randomTokens(5, 400, ringed.Vocab())
	want := feed(t, whole, 0, 0, toks, 256)

	feed(t, ringed, 0, 0, toks[:250], 64)
	if err := ringed.MoveKV(1024, 0, 250); err != nil {
		t.Fatal(err)
	}
	sameLogits(t, "moved", 250, feed(t, ringed, 1024, 250, toks[250:], 9), want[250:])

	const tokens = promptcache.BlockTokens
	store, err := ringed.NewBlockStore(4, tokens)
	if err != nil {
		t.Fatal(err)
	}
	feed(t, ringed, 512, 0, toks[:tokens], tokens)
	if !store.Saveable(512, 0) {
		t.Fatal("the ring holds positions 0…63 and block 0 is not saveable")
	}
	if err := store.Save(0, 512, 0); err != nil {
		t.Fatal(err)
	}
	feed(t, ringed, 512, tokens, toks[tokens:3*tokens], 64)
	if store.Saveable(512, 0) {
		t.Error("block 0 is saveable after the ring went on to position 191")
	}
	if err := store.Save(1, 512, 0); err == nil {
		t.Error("Save of positions the ring no longer holds succeeded")
	}
	// Blocks 1 and 2 as the ring holds them: fed again from the start, then on.
	feed(t, ringed, 512, 0, toks[:2*tokens], 64)
	if err := store.Save(1, 512, tokens); err != nil {
		t.Fatal(err)
	}
	feed(t, ringed, 512, 2*tokens, toks[2*tokens:3*tokens], 64)
	if err := store.Save(2, 512, 2*tokens); err != nil {
		t.Fatal(err)
	}
	// Through the host and back, as the spill folder moves a block.
	buf := make([]byte, store.BlockBytes())
	if err := store.Read(2, buf); err != nil {
		t.Fatal(err)
	}
	if err := store.Write(3, buf); err != nil {
		t.Fatal(err)
	}
	for i, block := range []int{0, 1, 3} {
		if err := store.Restore(1536, i*tokens, block); err != nil {
			t.Fatal(err)
		}
	}
	// Fed again from 143 (a kept prefix shorter than the cache's): the windows of 142…148 read
	// position 142 from the ring's second copy, which the restore wrote.
	const from = 143
	sameLogits(t, "restored", from, feed(t, ringed, 1536, from, toks[from:], 17), want[from:])
}
