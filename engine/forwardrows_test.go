package engine

import (
	"context"
	"strings"
	"testing"

	"tfd/batch"
	"tfd/compute"
	"tfd/compute/computetest"
	_ "tfd/cpu"
	"tfd/models"
)

// sizedBackend is a backend that states the rows its forwards should take.
type sizedBackend struct {
	compute.Backend
	rows int
}

func (b sizedBackend) ForwardRows() int { return b.rows }

// TestForwardRows: a backend's preferred rows a forward, only for models whose sessions keep
// nothing sized by a forward's rows.
func TestForwardRows(t *testing.T) {
	dense := Config{Layers: 2}
	sliding := Config{Layers: 2, Sliding: []bool{true, false}, SlidingWindow: 128}
	hybrid := Config{Layers: 2, Next: NextConfig{Enabled: true, Linear: []bool{true, false}, VHeads: 2, KDim: 8, VDim: 8}}
	for _, c := range []struct {
		name string
		b    compute.Backend
		cfg  Config
		want int
	}{
		{"dense, 512 preferred", sizedBackend{rows: 512}, dense, 512},
		{"dense, no preference", sizedBackend{rows: 512}.Backend, dense, DefaultMaxRows},
		{"sliding window, 512 preferred", sizedBackend{rows: 512}, sliding, DefaultMaxRows},
		{"hybrid, 512 preferred", sizedBackend{rows: 512}, hybrid, DefaultMaxRows},
	} {
		if got := ForwardRows(c.b, c.cfg); got != c.want {
			t.Errorf("%s: %d rows a forward, want %d", c.name, got, c.want)
		}
	}
}

// TestLogitRowsBound: a forward of more rows than may ask for logits (Options.LogitRows) gives
// the rows that ask the bits of a model whose every row may, and one that asks for more is refused
// with an error that names the limit.
func TestLogitRowsBound(t *testing.T) {
	b, err := compute.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	load := func(logitRows int) *Model {
		m, err := Load(context.Background(), Source{FS: models.FS(), Name: models.Name}, b, Options{Context: 256, MaxRows: 40, LogitRows: logitRows, Slots: 256})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.Close)
		return m
	}
	rows := func(m *Model, ask int) []batch.Row {
		rows := make([]batch.Row, m.MaxRows())
		for p := range rows {
			rows[p] = batch.Row{Pos: p, Token: int32(p*37) % int32(m.Vocab()), Logits: p >= len(rows)-ask}
		}
		return rows
	}
	few, all := load(4), load(0)
	if few.LogitRows() != 4 || all.LogitRows() != all.MaxRows() {
		t.Fatalf("LogitRows %d and %d, want 4 and MaxRows (%d)", few.LogitRows(), all.LogitRows(), all.MaxRows())
	}
	got, err := few.Forward(context.Background(), rows(few, 4))
	if err != nil {
		t.Fatal(err)
	}
	want, err := all.Forward(context.Background(), rows(all, 4))
	if err != nil {
		t.Fatal(err)
	}
	computetest.SameBits(t, "the last 4 rows' logits with LogitRows 4 against LogitRows MaxRows", got, want)
	if _, err := few.Forward(context.Background(), rows(few, 5)); err == nil || !strings.Contains(err.Error(), "at most 4 may (Options.LogitRows)") {
		t.Errorf("5 rows asking for logits with LogitRows 4: %v, want an error naming the limit", err)
	}
}
