package engine_test

import (
	"context"
	"math"
	"slices"
	"testing"

	"tfd/batch"
	"tfd/engine"
	"tfd/models"
)

// bundledMTP loads the bundled model, which has an MTP head, with two sessions of 128 slots.
func bundledMTP(t *testing.T) (*engine.Model, batch.Drafter) {
	t.Helper()
	m, err := engine.Load(context.Background(), engine.Source{FS: models.FS(), Name: models.Name}, openCPU(t),
		engine.Options{Context: 128, MaxRows: 64, Slots: 256})
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

// chainStep feeds two prompts (sessions at 0 and 128) through the backbone and the head's first
// step, then runs one chained step for the streams in which (0, 1 or both, in that order) and
// returns its logits, one row per stream.
func chainStep(t *testing.T, m *engine.Model, d batch.Drafter, prompts [2][]int32, which []int) []float32 {
	t.Helper()
	ctx := context.Background()
	var rows []batch.Row
	var drafts []batch.DraftRow
	for s, p := range prompts {
		for i, tok := range p {
			rows = append(rows, batch.Row{Base: 128 * s, Pos: i, Token: tok})
		}
	}
	if _, err := m.Forward(ctx, rows); err != nil {
		t.Fatal(err)
	}
	row := 0
	for s, p := range prompts {
		for i := range len(p) - 1 {
			drafts = append(drafts, batch.DraftRow{Base: 128 * s, Pos: i, Token: p[i+1], Source: row + i, Logits: i == len(p)-2})
		}
		row += len(p)
	}
	if _, err := d.Draft(ctx, drafts); err != nil {
		t.Fatal(err)
	}
	var chained []batch.DraftRow
	for _, s := range which {
		p := prompts[s]
		// The head's draft after the prompt, taken as if it were 7: the chain's next step is at
		// the prompt's last position and reads the head's own output before it.
		chained = append(chained, batch.DraftRow{Base: 128 * s, Pos: len(p) - 1, Token: 7, Source: s, Logits: true, Chained: true})
	}
	logits, err := d.Draft(ctx, chained)
	if err != nil {
		t.Fatal(err)
	}
	return slices.Clone(logits)
}

// TestMTPChainIsBatchInvariant: a chained step of the MTP head gives each stream the same bits
// whether it ran beside another stream's step or alone, and it reads its own stream's output
// (two streams at the same position with the same token but different histories differ).
func TestMTPChainIsBatchInvariant(t *testing.T) {
	m, d := bundledMTP(t)
	tok := m.Tokenizer()
	prompts := [2][]int32{tok.Encode("func main() {\n\tfmt.Println("), tok.Encode("type Reader interface {\n\tRead")}
	n := min(len(prompts[0]), len(prompts[1])) // the same positions, so only the histories differ
	prompts[0], prompts[1] = prompts[0][:n], prompts[1][:n]
	vocab := m.Vocab()
	both := chainStep(t, m, d, prompts, []int{0, 1})
	for s := range 2 {
		alone := chainStep(t, m, d, prompts, []int{s})
		for i, v := range alone {
			if math.Float32bits(v) != math.Float32bits(both[s*vocab+i]) {
				t.Fatalf("stream %d: chained logit %d is %v alone and %v beside the other stream", s, i, v, both[s*vocab+i])
			}
		}
	}
	if slices.Equal(both[:vocab], both[vocab:]) {
		t.Fatal("two streams with different histories drafted the same chained logits: the chain reads no stream's own output")
	}
}

// TestMTPChainRefusesWhatItCannotRead: chained rows need a draft before them with logits rows to
// read, and do not mix with rows after a forward.
func TestMTPChainRefusesWhatItCannotRead(t *testing.T) {
	m, d := bundledMTP(t)
	ctx := context.Background()
	if _, err := m.Forward(ctx, []batch.Row{{Pos: 0, Token: 1}, {Pos: 1, Token: 2}}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Draft(ctx, []batch.DraftRow{{Pos: 1, Token: 3, Source: 0, Chained: true}}); err == nil {
		t.Error("a chained row right after a forward ran")
	}
	if _, err := d.Draft(ctx, []batch.DraftRow{{Pos: 0, Token: 2, Source: 0}, {Pos: 1, Token: 3, Source: 0, Chained: true}}); err == nil {
		t.Error("a call mixing chained rows with rows after a forward ran")
	}
	if _, err := d.Draft(ctx, []batch.DraftRow{{Pos: 0, Token: 2, Source: 0, Logits: true}}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Draft(ctx, []batch.DraftRow{{Pos: 1, Token: 3, Source: 1, Chained: true}}); err == nil {
		t.Error("a chained row read past the last draft's one logits row")
	}
	if _, err := d.Draft(ctx, []batch.DraftRow{{Pos: 1, Token: 3, Source: 0, Chained: true, Logits: true}}); err != nil {
		t.Errorf("a chained row after a draft with logits: %v", err)
	}
}

// TestDraftChainRefusesWhatItCannotRun: a drafted chain refuses a start without drafts or with
// more rows than a forward takes, a step before a start, a third untaken step, a step that could
// pass the context, and a verdict with no step enqueued.
func TestDraftChainRefusesWhatItCannotRun(t *testing.T) {
	m, _ := bundledMTP(t)
	c := m.DraftChains()
	if c == nil {
		t.Fatal("the bundled model on the CPU should run drafted chains")
	}
	ctx := context.Background()
	if err := c.Step(); err == nil {
		t.Error("Step before StartDraftChain: no error")
	}
	if err := c.StartDraftChain(ctx, batch.Row{Pos: 3, Token: 5}, nil); err == nil {
		t.Error("a chain without drafts: no error")
	}
	if err := c.StartDraftChain(ctx, batch.Row{Pos: 3, Token: 5}, make([]int32, 64)); err == nil {
		t.Error("a chain of 65 rows a step, past MaxRows 64: no error")
	}
	if _, _, err := c.Verdict(); err == nil {
		t.Error("Verdict with no step: no error")
	}
	if err := c.StartDraftChain(ctx, batch.Row{Pos: 3, Token: 5}, []int32{1, 2}); err != nil {
		t.Fatal(err)
	}
	for range batch.ChainAhead {
		if err := c.Step(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Step(); err == nil {
		t.Errorf("a step past %d untaken: no error", batch.ChainAhead)
	}
	// Context 128: a step of 2 drafts at 121 has its head's rows reach 124, with RoPE at 125; the
	// step after it starts at up to 124 and could reach 128.
	if err := c.StartDraftChain(ctx, batch.Row{Pos: 121, Token: 5}, []int32{1, 2}); err != nil {
		t.Fatal(err)
	}
	if err := c.Step(); err != nil {
		t.Fatalf("a step whose head reaches 125 of 128: %v", err)
	}
	if err := c.Step(); err == nil {
		t.Error("a step that could reach position 128: no error")
	}
}

// TestStepShareCountsTheHeadsWeights: the bundled model's head reads one decoder layer, the fc
// joining embedding and hidden state, three norms and the (tied) output head in a step, against
// eight layers, the final norm and the output head in a forward of one row; StepShare, counted
// from the tensors loaded, equals that count from the config.
func TestStepShareCountsTheHeadsWeights(t *testing.T) {
	m, d := bundledMTP(t)
	c := m.Config()
	h, q, kv := c.Hidden, c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	layer := h*q + 2*h*kv + q*h + 2*c.HeadDim + 3*h*c.Intermediate + 2*h // q, k, v, o, q and k norms, mlp, two norms
	head := c.Vocab * h
	want := float64(layer+2*h*h+3*h+head) / float64(c.Layers*layer+h+head)
	got := d.(batch.StepSharer).StepShare()
	if math.Abs(got-want) > 1e-12 {
		t.Errorf("StepShare %v, the config's count %v", got, want)
	}
	t.Logf("a step of the head reads %.3f of a forward's weights", got)
}
