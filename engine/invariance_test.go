package engine

import (
	"context"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"tfd/scheduler"
)

// TestForwardIsBatchInvariant feeds the same token sequences of three sessions once each on its
// own, one row per forward, and once interleaved in random chunks that mix sessions and
// positions in one forward; every (session, position) must give the same logits, bit for bit.
func TestForwardIsBatchInvariant(t *testing.T) {
	for _, name := range []string{"qwen2", "gopher"} {
		t.Run(name, func(t *testing.T) {
			o := readOracle(t, name)
			m := loadCPU(t, filepath.Join("..", o.Model), Options{MaxRows: 48, Slots: 600})
			r := rand.New(rand.NewPCG(5, 6))
			type session struct {
				base   int
				tokens []int32
			}
			sessions := []session{{base: 0}, {base: 200}, {base: 400}}
			for i := range sessions {
				n := 20 + 15*i
				for range n {
					sessions[i].tokens = append(sessions[i].tokens, int32(r.IntN(m.Vocab())))
				}
			}
			solo := make([][][]float32, len(sessions)) // [session][pos] logits
			for i, s := range sessions {
				for pos, tok := range s.tokens {
					logits, err := m.Forward(context.Background(), []scheduler.Row{{Base: s.base, Pos: pos, Token: tok, Logits: true}})
					if err != nil {
						t.Fatal(err)
					}
					solo[i] = append(solo[i], append([]float32(nil), logits...))
				}
			}
			next := make([]int, len(sessions))
			for forwards := 0; ; forwards++ {
				var rows []scheduler.Row
				var owner []int
				for i, s := range sessions {
					take := min(r.IntN(12), len(s.tokens)-next[i])
					for range take {
						rows = append(rows, scheduler.Row{Base: s.base, Pos: next[i], Token: s.tokens[next[i]], Logits: true})
						owner = append(owner, i)
						next[i]++
					}
				}
				if len(rows) == 0 {
					if next[0] == len(sessions[0].tokens) && next[1] == len(sessions[1].tokens) && next[2] == len(sessions[2].tokens) {
						break
					}
					continue
				}
				r.Shuffle(len(rows), func(a, b int) { rows[a], rows[b] = rows[b], rows[a]; owner[a], owner[b] = owner[b], owner[a] })
				logits, err := m.Forward(context.Background(), rows)
				if err != nil {
					t.Fatal(err)
				}
				v := m.Vocab()
				for j, row := range rows {
					want := solo[owner[j]][row.Pos]
					got := logits[j*v : (j+1)*v]
					for k := range want {
						if math.Float32bits(got[k]) != math.Float32bits(want[k]) {
							t.Fatalf("forward %d: session %d position %d token %d: %v among %d rows, %v alone",
								forwards, owner[j], row.Pos, k, got[k], len(rows), want[k])
						}
					}
				}
			}
		})
	}
}
