package enginetest

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"tfd/batch"
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
