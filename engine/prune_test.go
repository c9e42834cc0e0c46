package engine

import (
	"context"
	"testing"

	"tfd/batch"
	"tfd/compute"
	"tfd/compute/computetest"
	"tfd/models"
)

// TestPrunedHeadKeepsBits feeds the bundled model's MTP head as the scheduler does (a prompt's
// every position, the logits of a few; then chained calls from those) with its layer run for the
// rows asked for alone and for every row, and demands the same logits bit for bit, the chained
// calls' included, which read the pruned call's outputs. (enginetest.CheckPrunedLastLayer checks
// the backbone's last layer the same way, from outside: a model without a head prunes it.)
func TestPrunedHeadKeepsBits(t *testing.T) {
	b, err := compute.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	m, err := Load(context.Background(), Source{FS: models.FS(), Name: models.Name}, b, Options{Context: 256, MaxRows: 64, Slots: 256})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if !m.plainHead() {
		t.Fatal("the bundled model's head is not one prunesHead takes")
	}
	const n = 60
	rows := make([]batch.Row, n)
	for i := range rows {
		rows[i] = batch.Row{Pos: i, Token: int32(i*31+7) % int32(m.Vocab()), Logits: i == n-1}
	}
	head, v := m.MTP(), m.Vocab()
	run := func(prune bool) [][]float32 {
		m.headPlain = prune
		var out [][]float32
		if _, err := m.Forward(context.Background(), rows); err != nil {
			t.Fatal(err)
		}
		var draft []batch.DraftRow
		for p := 0; p < n-1; p++ {
			draft = append(draft, batch.DraftRow{Pos: p, Token: rows[p+1].Token, Source: p, Logits: p%7 == 3 || p == n-2})
		}
		logits, err := head.Draft(context.Background(), draft)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, append([]float32(nil), logits...))
		var chained []batch.DraftRow
		k := 0
		for _, d := range draft {
			if d.Logits {
				tok := batch.Argmax(logits[k*v : (k+1)*v])
				chained = append(chained, batch.DraftRow{Pos: d.Pos + 1, Token: tok, Source: k, Logits: true, Chained: true})
				k++
			}
		}
		if logits, err = head.Draft(context.Background(), chained); err != nil {
			t.Fatal(err)
		}
		return append(out, append([]float32(nil), logits...))
	}
	want, got := run(false), run(true)
	for c, name := range []string{"the prompt's call", "the chained call"} {
		computetest.SameBits(t, name+"'s logits with the head's layer pruned against without", got[c], want[c])
	}
}
