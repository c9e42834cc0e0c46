package engine_test

import (
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"tfd/batch"
	"tfd/engine"
	"tfd/engine/enginetest"
)

// TestQwen3NextStates: a hybrid model's DeltaNet states follow each session's positions. A
// forward that verifies drafts keeps the states behind them, so the session resumes after a
// rejected draft with the bits of a run that never saw it; a session moved with MoveKV takes its
// states along; a position whose state the session no longer keeps, or a session evicted to make
// room for others, is refused rather than computed from a wrong state, and Resumable says where
// a session can be fed from.
func TestQwen3NextStates(t *testing.T) {
	o := enginetest.Read(t, "qwen3next")
	const depth = 4
	m := enginetest.Load(t, openCPU(t), o.Model, engine.Options{MaxRows: 32, Slots: 400, Sessions: 3, StateDepth: depth})
	ctx := context.Background()
	r := rand.New(rand.NewPCG(7, 8))
	tokens := make([]int32, 40)
	for i := range tokens {
		tokens[i] = int32(r.IntN(m.Vocab()))
	}
	forward := func(rows ...batch.Row) []float32 {
		t.Helper()
		logits, err := m.Forward(ctx, rows)
		if err != nil {
			t.Fatal(err)
		}
		return logits
	}
	row := func(base, pos int) batch.Row {
		return batch.Row{Base: base, Pos: pos, Token: tokens[pos], Logits: true}
	}
	var want [][]float32 // one position a forward, at base 0
	for pos := range tokens {
		want = append(want, append([]float32(nil), forward(row(0, pos))...))
	}
	same := func(what string, pos int, got []float32) {
		t.Helper()
		for i, g := range got[:m.Vocab()] {
			if math.Float32bits(g) != math.Float32bits(want[pos][i]) {
				t.Fatalf("%s: position %d: logit %d is %v, %v fed one position a forward", what, pos, i, g, want[pos][i])
			}
		}
	}

	// Drafts rejected: the newest token at 20 and three wrong drafts, then 21 on.
	var prompt []batch.Row
	for pos := range 20 {
		prompt = append(prompt, row(100, pos))
	}
	forward(prompt...)
	wrong := func(pos int) batch.Row {
		return batch.Row{Base: 100, Pos: pos, Token: (tokens[pos] + 1) % int32(m.Vocab()), Logits: true}
	}
	same("the newest token before drafts", 20, forward(row(100, 20), wrong(21), wrong(22), wrong(23)))
	for pos := 21; pos < 30; pos++ {
		same("after rejected drafts", pos, forward(row(100, pos)))
	}
	// Drafts partly right: two land, the third does not, and 33 follows.
	got := forward(row(100, 30), row(100, 31), row(100, 32), wrong(33))
	for i := range 3 {
		same("landed drafts", 30+i, got[i*m.Vocab():])
	}
	for pos := 33; pos < len(tokens); pos++ {
		same("after a draft rejected behind landed ones", pos, forward(row(100, pos)))
	}

	// Moved: fed in chunks of 7 at base 200, moved to 300, fed on there.
	for pos := 0; pos < 25; pos += 7 {
		var chunk []batch.Row
		for p := pos; p < min(pos+7, 25); p++ {
			chunk = append(chunk, row(200, p))
		}
		got := forward(chunk...)
		for i := range chunk {
			same("chunked", pos+i, got[i*m.Vocab():])
		}
	}
	if err := m.MoveKV(300, 200, 25); err != nil {
		t.Fatal(err)
	}
	for pos := 25; pos < len(tokens); pos++ {
		same("moved", pos, forward(row(300, pos)))
	}

	states := m.States()
	for _, c := range []struct{ base, want, got int }{
		{100, 30, 0}, {100, 38, 38}, {100, 45, 40}, {300, 40, 40}, {999, 12, 0},
	} {
		if got := states.Resumable(c.base, c.want); got != c.got {
			t.Errorf("Resumable(%d, %d) = %d, want %d", c.base, c.want, got, c.got)
		}
	}
	refused := func(what, says string, rows ...batch.Row) {
		t.Helper()
		if _, err := m.Forward(ctx, rows); err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("%s: Forward = %v, want an error saying %q", what, err, says)
		}
	}
	refused("a position whose state is gone", "no DeltaNet state after position 29", row(100, 30))
	// Base 0 was the least recently used of four sessions in three blocks: moving to 300 took its.
	refused("an evicted session", "the session at slot 0 has no DeltaNet state", row(0, 5))
	refused("four sessions in one forward", "more than 3 sessions", row(100, 0), row(200, 0), row(300, 0), batch.Row{Base: 350, Token: 1})
	refused("a gap in a session's positions", "without gaps", row(100, 0), row(100, 2))
	// A refused forward takes no session's states: 100 was evicted for 0 while it was staged.
	if got := states.Resumable(100, 40); got != 40 {
		t.Errorf("after refused forwards, Resumable(100, 40) = %d, want 40", got)
	}
}
