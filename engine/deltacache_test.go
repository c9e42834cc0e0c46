package engine_test

import (
	"bytes"
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"tfd/batch"
	"tfd/engine"
	"tfd/engine/enginetest"
	"tfd/promptcache"
)

// TestQwen3NextBlockStates: a hybrid model's cache block carries the DeltaNet states after its
// second-to-last position. A session fed in chunks that run past a block's boundary keeps that
// state in a snapshot; a session fed to exactly the boundary holds it in its ring; both save the
// same bits, the bits a session fed one position a forward computes. A session restored from the
// blocks holds that state again, and fed on from the last restored position it gives the logits
// of the session that computed everything. A snapshot taken over by a later boundary's is gone,
// and the block is no longer saveable.
func TestQwen3NextBlockStates(t *testing.T) {
	if engine.StateBlockTokens != promptcache.BlockTokens {
		t.Fatalf("sessions snapshot states every %d positions, the cache's blocks are %d", engine.StateBlockTokens, promptcache.BlockTokens)
	}
	o := enginetest.Read(t, "qwen3next")
	const (
		depth  = 4
		tokens = engine.StateBlockTokens
		n      = 3*tokens + 8 // three blocks and a few positions after them
		span   = 256          // slots a session takes
	)
	m := enginetest.Load(t, openCPU(t), o.Model, engine.Options{MaxRows: 32, Slots: 4 * span, Sessions: 4, StateDepth: depth})
	ctx := context.Background()
	r := rand.New(rand.NewPCG(3, 4))
	prompt := make([]int32, n)
	for i := range prompt {
		prompt[i] = int32(r.IntN(m.Vocab()))
	}
	forward := func(base, from, to int) []float32 { // positions from … to−1, every row's logits
		t.Helper()
		var rows []batch.Row
		for p := from; p < to; p++ {
			rows = append(rows, batch.Row{Base: base, Pos: p, Token: prompt[p], Logits: true})
		}
		logits, err := m.Forward(ctx, rows)
		if err != nil {
			t.Fatal(err)
		}
		return append([]float32(nil), logits...)
	}
	store, err := m.NewBlockStore(12, tokens)
	if err != nil {
		t.Fatal(err)
	}
	read := func(block int) []byte {
		t.Helper()
		b := make([]byte, store.BlockBytes())
		if err := store.Read(block, b); err != nil {
			t.Fatal(err)
		}
		return b
	}
	save := func(block, base, pos int) {
		t.Helper()
		if !store.Saveable(base, pos) {
			t.Fatalf("block at %d of the session at slot %d is not saveable", pos, base)
		}
		if err := store.Save(block, base, pos); err != nil {
			t.Fatal(err)
		}
	}

	// Chunks of 30 run past every boundary (62, 126, 190) by more than the ring's depth: the
	// states come from snapshots. Each block is saved after the forward that fed it, as the
	// scheduler offers them.
	const chunked = 0
	var want []float32 // every position's logits
	for from := 0; from < n; from += 30 {
		to := min(from+30, n)
		want = append(want, forward(chunked*span, from, to)...)
		for b := range 3 {
			if b*tokens+tokens <= to && store.Saveable(chunked*span, b*tokens) {
				save(b, chunked*span, b*tokens)
			}
		}
	}
	if store.Saveable(chunked*span, 0) {
		t.Error("block 0 is still saveable after the snapshot of position 190 took its snapshot's place")
	}

	// One position a forward, each block saved once its last position is fed: the states come
	// from the ring, which holds the position before it.
	const single = 1
	for p := range n {
		forward(single*span, p, p+1)
		if (p+1)%tokens == 0 {
			save(3+p/tokens, single*span, p/tokens*tokens)
		}
	}
	for b := range 3 {
		got, fresh := read(b), read(3+b)
		if !bytes.Equal(got, fresh) {
			t.Fatalf("block %d saved from a chunked session differs from one fed a position a forward", b)
		}
	}

	// Restored into a session of its own, then fed on from the last restored position.
	const restored = 2
	for b := range 3 {
		if err := store.Restore(restored*span, b*tokens, b); err != nil {
			t.Fatal(err)
		}
	}
	save(6, restored*span, 2*tokens)
	if !bytes.Equal(read(6), read(2)) {
		t.Fatal("the block saved again from the restored session differs from the one restored")
	}
	if got := m.States().Resumable(restored*span, 3*tokens-1); got != 3*tokens-1 {
		t.Fatalf("Resumable after a restore of three blocks = %d, want %d", got, 3*tokens-1)
	}
	v := m.Vocab()
	for p := 3*tokens - 1; p < n; p++ {
		got := forward(restored*span, p, p+1)
		for i := range v {
			if math.Float32bits(got[i]) != math.Float32bits(want[p*v+i]) {
				t.Fatalf("restored: position %d: logit %d is %v, %v computed fresh", p, i, got[i], want[p*v+i])
			}
		}
	}

	// Through the host: a block read and written back restores the same bits.
	if err := store.Write(7, read(1)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(read(7), read(1)) {
		t.Fatal("a block written from the host reads back otherwise")
	}
}
