package enginetest

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"tfd/batch"
	"tfd/engine"
)

// CheckPicks runs forwards of rows of three sessions in which each row asks at random for its
// logits, its greedy pick or neither, and checks them against the same forward with every row
// asking for logits: each logits row the same bits, each pick batch.Argmax of its row. The first
// forward asks for picks alone, the last for nothing. m needs 600 KV slots and 24 rows a forward.
func CheckPicks(t *testing.T, m *engine.Model) {
	t.Helper()
	r := rand.New(rand.NewPCG(7, 8))
	v := m.Vocab()
	const forwards = 6
	for f := range forwards {
		var rows []batch.Row
		for s := range 3 {
			for pos := range 1 + r.IntN(8) {
				rows = append(rows, batch.Row{Base: 200 * s, Pos: pos, Token: int32(r.IntN(v))})
			}
		}
		all := slices.Clone(rows)
		for i := range all {
			all[i].Logits = true
		}
		want, err := m.Forward(context.Background(), all)
		if err != nil {
			t.Fatal(err)
		}
		want = slices.Clone(want)
		for i := range rows {
			switch k := r.IntN(3); {
			case f == forwards-1:
			case f == 0 || k == 0:
				rows[i].Pick = true
			case k == 1:
				rows[i].Logits = true
			}
		}
		logits, picks, err := m.ForwardPicks(context.Background(), rows)
		if err != nil {
			t.Fatal(err)
		}
		l, p := 0, 0
		for i, row := range rows {
			w := want[i*v : (i+1)*v]
			switch {
			case row.Logits:
				if l < len(logits)/v && !sameBits(logits[l*v:(l+1)*v], w) {
					t.Errorf("forward %d, row %d (session %d, position %d): logits differ from the forward that asked every row's", f, i, row.Base/200, row.Pos)
				}
				l++
			case row.Pick:
				if p < len(picks) && picks[p] != batch.Argmax(w) {
					t.Errorf("forward %d, row %d (session %d, position %d): pick %d, the logits' argmax %d", f, i, row.Base/200, row.Pos, picks[p], batch.Argmax(w))
				}
				p++
			}
		}
		if len(logits) != l*v || len(picks) != p {
			t.Errorf("forward %d: %d logits rows and %d picks, want %d and %d", f, len(logits)/v, len(picks), l, p)
		}
	}
}

// sameBits reports whether a and b hold the same float32 bits.
func sameBits(a, b []float32) bool {
	return slices.EqualFunc(a, b, func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) })
}
