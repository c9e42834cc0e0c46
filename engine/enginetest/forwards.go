package enginetest

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"tfd/batch"
	"tfd/compute/computetest"
	"tfd/engine"
)

// CheckForwardSizes runs one prompt of n random tokens in forwards of each of sizes rows in turn
// (the last forward of each taking what is left), every row's logits read, and requires every
// row to get the bits it got in forwards of sizes[0] rows: a prompt's logits, and the keys and
// values each forward leaves for the next, must not depend on how many rows a forward takes, up
// to the model's MaxRows. m needs n KV slots.
func CheckForwardSizes(t *testing.T, m *engine.Model, n int, sizes []int) {
	t.Helper()
	r := rand.New(rand.NewPCG(7, 8))
	rows := make([]batch.Row, n)
	for i := range rows {
		rows[i] = batch.Row{Pos: i, Token: int32(r.IntN(m.Vocab())), Logits: true}
	}
	v := m.Vocab()
	var want []float32
	for _, size := range sizes {
		if size > m.MaxRows() {
			t.Fatalf("forwards of %d rows: the model takes at most %d", size, m.MaxRows())
		}
		got := make([]float32, 0, n*v)
		for start := 0; start < n; start += size {
			logits, err := m.Forward(context.Background(), rows[start:min(start+size, n)])
			if err != nil {
				t.Fatalf("forwards of %d rows, rows %d on: %v", size, start, err)
			}
			got = append(got, logits...)
		}
		if want == nil {
			want = got
			continue
		}
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("position %d token %d: %v in forwards of %d rows, %v in forwards of %d",
					i/v, i%v, got[i], size, want[i], sizes[0])
			}
		}
	}
}

// CheckPrunedLastLayer feeds one prompt of n random tokens twice, each in forwards of size rows:
// once with every row's logits read (no row's last layer is left out), and once as a server feeds
// a prompt, where a forward asks for the logits of a few rows or of none and its last layer runs
// for those alone after every row's keys are written (engine's prune.go). Each row asked for
// must get the bits it got the first time, its pick must be their argmax, and the keys and values
// the pruned forwards leave must serve the next forward's rows as well. m must keep its last
// layer for the rows asked for (no MTP head) and needs 2n KV slots.
func CheckPrunedLastLayer(t *testing.T, m *engine.Model, n, size int) {
	t.Helper()
	r := rand.New(rand.NewPCG(9, 10))
	tokens := make([]int32, n)
	for i := range tokens {
		tokens[i] = int32(r.IntN(m.Vocab()))
	}
	v := m.Vocab()
	feed := func(base int, ask func(pos int) (logits, pick bool)) (map[int][]float32, map[int]int32) {
		logits, picks := map[int][]float32{}, map[int]int32{}
		for start := 0; start < n; start += size {
			rows := make([]batch.Row, 0, size)
			for pos := start; pos < min(start+size, n); pos++ {
				l, p := ask(pos)
				rows = append(rows, batch.Row{Base: base, Pos: pos, Token: tokens[pos], Logits: l, Pick: p})
			}
			got, picked, err := m.ForwardPicks(context.Background(), rows)
			if err != nil {
				t.Fatalf("forward of rows %d on: %v", start, err)
			}
			k, j := 0, 0
			for _, row := range rows {
				if row.Logits {
					logits[row.Pos] = append([]float32(nil), got[k*v:(k+1)*v]...)
					k++
				}
			}
			for _, row := range rows {
				if row.Pick {
					picks[row.Pos] = picked[j]
					j++
				}
			}
		}
		return logits, picks
	}
	all, _ := feed(0, func(int) (bool, bool) { return true, false })
	// Some forwards ask for no row (the first), others for a row or two and a pick.
	logits, picks := feed(n, func(pos int) (bool, bool) {
		at := pos % size
		return pos >= size && (at == size-1 || at == size/3), pos >= size && at == size/2
	})
	if len(logits) == 0 || len(picks) == 0 {
		t.Fatalf("prompt of %d in forwards of %d: no row asked for its logits or pick", n, size)
	}
	for pos, got := range logits {
		computetest.SameBits(t, fmt.Sprintf("position %d's logits asked for among few rows against every row's", pos), got, all[pos])
	}
	for pos, p := range picks {
		if want := batch.Argmax(all[pos]); p != want {
			t.Fatalf("position %d: pick %d asked for among few rows, the argmax of every row's logits %d", pos, p, want)
		}
	}
}
