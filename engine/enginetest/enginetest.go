// Package enginetest holds the engine's checks against the transformers oracle of
// engine/testdata/oracle, written once for every backend: logits within tolerance, greedy
// continuations token for token, forwards that mix sessions bit for bit equal to solo ones, and
// shared, drafted replies equal to solo ones; and the block store's restores, bit for bit
// (blockstore.go). The engine's tests run them on the CPU backend, the cuda and metal packages'
// on the GPU.
package enginetest

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"tfd/batch"
	"tfd/compute"
	"tfd/engine"
)

// Models are the oracle's checkpoints: tiny random-init Llama (llama3 rope, untied), Qwen2
// (attention bias), Qwen3 (q/k norm), Qwen3-MoE (8 experts, top-2, one dense layer), Gemma 3
// (sliding window 8 and one global layer, soft-capped logits), Qwen3-Next (three gated
// DeltaNet layers and one gated attention layer, experts with a shared one) and GPT-OSS (sliding
// window 8 every other layer, sinks, YaRN, 8 experts top-2 with biases and the clamped SwiGLU;
// its experts as transformers saves them, and as MXFP4 in gptoss-mxfp4 with the same oracle), and
// the bundled model.
var Models = []string{"llama", "qwen2", "qwen3", "qwen3moe", "gemma3", "qwen3next", "gptoss", "gptoss-mxfp4", "gopher"}

// Oracle is engine/testdata/oracle/NAME, made by tools/fixtures/make_fixtures.py: transformers'
// f32 logits at every prompt position and its 64-token greedy continuation.
type Oracle struct {
	Model        string `json:"model"` // checkpoint folder, relative to the repository root
	Architecture string `json:"architecture"`
	Vocab        int    `json:"vocab"`
	Cases        []struct {
		Prompt       []int32 `json:"prompt"`
		LogitsOffset int     `json:"logits_offset"` // index into Logits
		Greedy       []int32 `json:"greedy"`
		MinGap       float64 `json:"min_gap"` // the smallest top-2 logit gap along Greedy
	} `json:"cases"`
	Logits []float32 `json:"-"` // every case's [len(prompt), vocab] logits, one after another
}

// Read reads the oracle of one checkpoint.
func Read(t testing.TB, name string) *Oracle {
	t.Helper()
	dir := filepath.Join(RepoRoot(t), "engine", "testdata", "oracle", name)
	raw, err := os.ReadFile(filepath.Join(dir, "oracle.json"))
	if err != nil {
		t.Fatalf("oracle fixture missing (tools/fixtures makes it): %v", err)
	}
	var o Oracle
	if err := json.Unmarshal(raw, &o); err != nil {
		t.Fatalf("%s/oracle.json: %v", dir, err)
	}
	bin, err := os.ReadFile(filepath.Join(dir, "logits.f32"))
	if err != nil {
		t.Fatal(err)
	}
	o.Logits = make([]float32, len(bin)/4)
	for i := range o.Logits {
		o.Logits[i] = math.Float32frombits(binary.LittleEndian.Uint32(bin[4*i:]))
	}
	return &o
}

// Load loads a model folder, given relative to the repository root, on b; the model is closed
// when the test ends.
func Load(t testing.TB, b compute.Backend, dir string, opts engine.Options) *engine.Model {
	t.Helper()
	m, err := engine.Load(context.Background(), engine.Source{Dir: filepath.Join(RepoRoot(t), dir)}, b, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

// Tolerance is how far, as a share of a row's largest logit, an engine's logits may be from the
// oracle's, for every family. (The Qwen3-Next oracle's logits are transformers' in float64: its
// float32 chunked prefill of the DeltaNet layers rounds to 1.25e-4 of a row's largest by itself;
// tools/fixtures/make_qwen3next_fixture.py.)
const Tolerance = 1e-4

// CheckLogits runs each oracle prompt (in chunks of MaxRows) and compares every position's logits
// with transformers' to Tolerance of the row's largest magnitude; it returns the worst ratio seen.
func CheckLogits(t *testing.T, m *engine.Model, o *Oracle) float64 {
	t.Helper()
	return CheckLogitsWithin(t, m, o, Tolerance)
}

// CheckLogitsWithin is CheckLogits with the tolerance tol.
func CheckLogitsWithin(t *testing.T, m *engine.Model, o *Oracle, tol float64) float64 {
	t.Helper()
	if m.Vocab() != o.Vocab {
		t.Fatalf("vocab %d, the oracle has %d", m.Vocab(), o.Vocab)
	}
	var worstRel float64
	for ci, c := range o.Cases {
		var got []float32
		for start := 0; start < len(c.Prompt); start += m.MaxRows() {
			// A prompt longer than a forward takes goes in chunks, as the scheduler feeds it.
			var rows []batch.Row
			for i := start; i < min(len(c.Prompt), start+m.MaxRows()); i++ {
				rows = append(rows, batch.Row{Pos: i, Token: c.Prompt[i], Logits: true})
			}
			logits, err := m.Forward(context.Background(), rows)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, logits...)
		}
		want := o.Logits[c.LogitsOffset : c.LogitsOffset+len(c.Prompt)*o.Vocab]
		for p := range c.Prompt {
			g, w := got[p*o.Vocab:(p+1)*o.Vocab], want[p*o.Vocab:(p+1)*o.Vocab]
			var scale, worst float64
			for i := range w {
				scale = max(scale, math.Abs(float64(w[i])))
				worst = max(worst, math.Abs(float64(g[i]-w[i])))
			}
			worstRel = max(worstRel, worst/scale)
			if worst > tol*scale {
				t.Errorf("case %d position %d: max |Δlogit| = %.3g, over %g × %.3g", ci, p, worst, tol, scale)
			}
		}
	}
	return worstRel
}

// CheckGreedy decodes each oracle prompt's continuation greedily, one row per forward as the
// serial host does, and demands transformers' tokens.
func CheckGreedy(t *testing.T, m *engine.Model, o *Oracle) {
	t.Helper()
	for ci, c := range o.Cases {
		got := Greedy(t, m, c.Prompt, len(c.Greedy))
		if !slices.Equal(got, c.Greedy) {
			t.Errorf("case %d (smallest top-2 gap in the oracle %.3g):\n got %v\nwant %v", ci, c.MinGap, got, c.Greedy)
		}
	}
}

// CheckChain decodes the first 32 tokens of each oracle continuation as greedy chains on the
// device (engine.Model.Chains) and demands transformers' tokens: one chain of 16 steps, each
// enqueued while the one before it waits untaken, as the lone driver runs them; then a chain from
// the 16th token whose second step is enqueued and never taken, which the next chain drops; then
// that next chain, from the same token, one step at a time. It skips when the backend runs no
// chains.
func CheckChain(t *testing.T, m *engine.Model, o *Oracle) {
	t.Helper()
	chains := m.Chains()
	if chains == nil {
		t.Skip("the model runs no greedy chains on this backend")
	}
	steps := func(row batch.Row, n, ahead int) []int32 {
		t.Helper()
		if err := chains.StartChain(context.Background(), row); err != nil {
			t.Fatal(err)
		}
		var got []int32
		for enqueued := 0; len(got) < n; {
			for ; enqueued < min(len(got)+ahead, n); enqueued++ {
				if err := chains.Step(); err != nil {
					t.Fatal(err)
				}
			}
			tok, err := chains.Token()
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, tok)
		}
		return got
	}
	for ci, c := range o.Cases {
		last := len(c.Prompt) - 1
		rows := make([]batch.Row, last)
		for i, tok := range c.Prompt[:last] {
			rows[i] = batch.Row{Pos: i, Token: tok}
		}
		if last > 0 {
			if _, err := m.Forward(context.Background(), rows); err != nil {
				t.Fatal(err)
			}
		}
		got := steps(batch.Row{Pos: last, Token: c.Prompt[last]}, 16, batch.ChainAhead)
		next := batch.Row{Pos: last + 16, Token: got[len(got)-1]}
		if err := chains.StartChain(context.Background(), next); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if err := chains.Step(); err != nil {
				t.Fatal(err)
			}
		}
		if tok, err := chains.Token(); err != nil || tok != c.Greedy[16] {
			t.Errorf("case %d: a chain's first step gave %d (%v), want %d", ci, tok, err, c.Greedy[16])
		}
		got = append(got, steps(next, 16, 1)...) // drops the second step above
		if want := c.Greedy[:len(got)]; !slices.Equal(got, want) {
			t.Errorf("case %d: chains gave\n %v\nwant %v", ci, got, want)
		}
	}
}

// Greedy prefills prompt at session base 0, in one forward or, longer than a forward takes, in
// chunks of MaxRows, and decodes n tokens by argmax.
func Greedy(t testing.TB, m *engine.Model, prompt []int32, n int) []int32 {
	t.Helper()
	var logits []float32
	for start := 0; start < len(prompt); start += m.MaxRows() {
		var rows []batch.Row
		for i := start; i < min(len(prompt), start+m.MaxRows()); i++ {
			rows = append(rows, batch.Row{Pos: i, Token: prompt[i], Logits: i == len(prompt)-1})
		}
		var err error
		if logits, err = m.Forward(context.Background(), rows); err != nil {
			t.Fatal(err)
		}
	}
	var out []int32
	var err error
	for pos := len(prompt); len(out) < n; pos++ {
		tok := batch.Argmax(logits)
		out = append(out, tok)
		if logits, err = m.Forward(context.Background(), []batch.Row{{Pos: pos, Token: tok, Logits: true}}); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// CheckBatchInvariance feeds random token sequences of three sessions once each on its own, one
// row per forward, and once interleaved in random chunks that mix sessions and positions in one
// shuffled forward; every (session, position) must give the same logits, bit for bit. m needs
// 600 KV slots and 48 rows a forward.
func CheckBatchInvariance(t *testing.T, m *engine.Model) {
	t.Helper()
	r := rand.New(rand.NewPCG(5, 6))
	type session struct {
		base   int
		tokens []int32
	}
	sessions := []session{{base: 0}, {base: 200}, {base: 400}}
	for i := range sessions {
		for range 20 + 15*i {
			sessions[i].tokens = append(sessions[i].tokens, int32(r.IntN(m.Vocab())))
		}
	}
	solo := make([][][]float32, len(sessions)) // [session][position] logits
	for i, s := range sessions {
		for pos, tok := range s.tokens {
			logits, err := m.Forward(context.Background(), []batch.Row{{Base: s.base, Pos: pos, Token: tok, Logits: true}})
			if err != nil {
				t.Fatal(err)
			}
			solo[i] = append(solo[i], slices.Clone(logits))
		}
	}
	next := make([]int, len(sessions))
	for forwards, left := 0, true; left; forwards++ {
		var rows []batch.Row
		var owner []int
		left = false
		for i, s := range sessions {
			for range min(r.IntN(12), len(s.tokens)-next[i]) {
				rows = append(rows, batch.Row{Base: s.base, Pos: next[i], Token: s.tokens[next[i]], Logits: true})
				owner = append(owner, i)
				next[i]++
			}
			left = left || next[i] < len(s.tokens)
		}
		if len(rows) == 0 {
			continue
		}
		r.Shuffle(len(rows), func(a, b int) { rows[a], rows[b] = rows[b], rows[a]; owner[a], owner[b] = owner[b], owner[a] })
		logits, err := m.Forward(context.Background(), rows)
		if err != nil {
			t.Fatal(err)
		}
		v := m.Vocab()
		for j, row := range rows {
			want, got := solo[owner[j]][row.Pos], logits[j*v:(j+1)*v]
			for k := range want {
				if math.Float32bits(got[k]) != math.Float32bits(want[k]) {
					t.Fatalf("forward %d: session %d position %d token %d: %v among %d rows, %v alone",
						forwards, owner[j], row.Pos, k, got[k], len(rows), want[k])
				}
			}
		}
	}
}

// RepoRoot finds the module root above the working directory: the package folder under go test,
// the repository root when a compiled test binary runs there.
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the working directory: run the tests inside the repository")
		}
		dir = parent
	}
}

// BenchPrefill runs a prompt of n tokens in one forward of m per iteration and reports prompt
// tokens per second: the prefill benchmark of every backend.
func BenchPrefill(b *testing.B, m *engine.Model, n int) {
	rows := make([]batch.Row, n)
	for i := range rows {
		rows[i] = batch.Row{Pos: i, Token: int32(i % m.Vocab()), Logits: i == len(rows)-1}
	}
	b.ResetTimer()
	for range b.N {
		if _, err := m.Forward(context.Background(), rows); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(rows)*b.N)/b.Elapsed().Seconds(), "tok/s")
}

// CheckBackend runs every oracle check on backend b, as subtests: each oracle model's logits
// within Tolerance of the row's largest logit (CheckLogits, the worst logged), its 64-token greedy
// run (CheckGreedy) and greedy chains on the device (CheckChain) equal transformers', the
// bundled model's drafted chains on the device equal the host's steps (CheckDraftChain), and
// forwards that mix sessions and positions give each row the bits it gets alone
// (CheckBatchInvariance). The engine's tests run it on the CPU, cuda's and metal's on their GPUs.
func CheckBackend(t *testing.T, b compute.Backend) {
	load := func(t *testing.T, name string, opts engine.Options) (*engine.Model, *Oracle) {
		o := Read(t, name)
		if _, ok := b.(compute.DeltaNet); !ok && o.Architecture == "Qwen3NextForCausalLM" {
			t.Skipf("the %s backend has no DeltaNet ops for %s", b.Name(), name)
		}
		return Load(t, b, o.Model, opts), o
	}
	for _, name := range Models {
		t.Run("logits/"+name, func(t *testing.T) {
			m, o := load(t, name, engine.Options{MaxRows: 64})
			t.Logf("%s: worst max|Δlogit| / max|logit| over all positions: %.3g", name, CheckLogits(t, m, o))
		})
		t.Run("greedy/"+name, func(t *testing.T) {
			m, o := load(t, name, engine.Options{MaxRows: 64})
			CheckGreedy(t, m, o)
		})
		t.Run("chain/"+name, func(t *testing.T) {
			m, o := load(t, name, engine.Options{MaxRows: 64})
			CheckChain(t, m, o)
		})
	}
	t.Run("draftchain/gopher", func(t *testing.T) {
		m, o := load(t, "gopher", engine.Options{Context: 256, MaxRows: 64, Slots: 256})
		CheckDraftChain(t, m, o.Cases[0].Prompt, 64)
	})
	for _, name := range []string{"qwen2", "qwen3moe", "gemma3", "qwen3next", "gptoss", "gptoss-mxfp4", "gopher"} {
		t.Run("invariance/"+name, func(t *testing.T) {
			m, _ := load(t, name, engine.Options{MaxRows: 48, Slots: 600})
			CheckBatchInvariance(t, m)
		})
	}
	// The last layer for the rows asked for alone, in models without an MTP head (whose head
	// reads every row): a dense one, a mixture, and GPT-OSS's sinks on its full-attention last
	// layer.
	for _, name := range []string{"llama", "qwen3moe", "gptoss"} {
		t.Run("pruned/"+name, func(t *testing.T) {
			m, _ := load(t, name, engine.Options{MaxRows: 64, Slots: 2 * 200})
			CheckPrunedLastLayer(t, m, 200, 64)
		})
	}
	// Picks (CheckPicks feeds positions twice, which a hybrid's recurrent state does not take);
	// Gemma 3 caps its logits on the host, so its picks are the engine's.
	for _, name := range []string{"qwen3moe", "gemma3", "gptoss", "gopher"} {
		t.Run("picks/"+name, func(t *testing.T) {
			m, _ := load(t, name, engine.Options{MaxRows: 24, Slots: 600})
			CheckPicks(t, m)
		})
	}
}

// CheckDraftChain decodes n tokens after prompt as drafted chains on the device
// (engine.Model.DraftChains) at MTP depths 1 to 4. Each step's verdict (the tokens it accepted
// and the head's next drafts) must equal what the host makes of the same step with Forward's
// logits and the head's Draft calls, and the tokens must be a greedy decode's, one row per
// forward. The chain starts as the lone driver starts one, after the prompt is fed and the head
// drafts from its end on the host; its steps run ChainAhead enqueued; and in a second run a step
// is enqueued halfway and never taken, and a new chain starts from the last verdict, as the lone
// driver's next chain does after a handoff. m needs an MTP head, a session at slot 0 of
// len(prompt)+n+16 positions, and rows for the prompt; the test skips when the backend runs no
// drafted chains.
func CheckDraftChain(t *testing.T, m *engine.Model, prompt []int32, n int) {
	t.Helper()
	chains := m.DraftChains()
	if chains == nil {
		t.Skip("the model runs no drafted chains on this backend")
	}
	want := Greedy(t, m, prompt, n)
	for depth := 1; depth <= 4; depth++ {
		host := hostDraftSteps(t, m, prompt, n, depth)
		for _, restart := range []bool{false, true} {
			first, drafts := feedAndDraft(t, m, prompt, depth)
			got := []int32{first}
			start := func(drafts []int32) {
				t.Helper()
				if err := chains.StartDraftChain(context.Background(), batch.Row{Pos: len(prompt) + len(got) - 1, Token: got[len(got)-1]}, drafts); err != nil {
					t.Fatal(err)
				}
			}
			start(drafts)
			landed, steps, enqueued, restarted := 0, 0, 0, !restart
			for i := 0; len(got) < n; i++ {
				for ; enqueued-steps < batch.ChainAhead; enqueued++ {
					if err := chains.Step(); err != nil {
						t.Fatal(err)
					}
				}
				accepted, next, err := chains.Verdict()
				if err != nil {
					t.Fatal(err)
				}
				steps++
				if h := host[i]; !slices.Equal(accepted, h.accepted) || !slices.Equal(next, h.next) {
					t.Fatalf("depth %d, step %d: the device accepted %v and drafted %v; the host %v and %v", depth, i, accepted, next, h.accepted, h.next)
				}
				landed += len(accepted) - 1
				got = append(got, accepted...)
				if !restarted && len(got) >= n/2 {
					// The step enqueued after this one is dropped: a new chain from this verdict.
					restarted = true
					start(slices.Clone(next))
					steps, enqueued = 0, 0
				}
			}
			if got = got[:n]; !slices.Equal(got, want) {
				t.Errorf("depth %d (restarted %v): drafted chains gave\n %v\nwant %v", depth, restart, got, want)
			}
			if !restart {
				t.Logf("depth %d: %d drafts landed over %d tokens", depth, landed, n)
			}
		}
	}
}

// draftStep is one step of a drafted chain: the tokens it accepted and the head's next drafts.
type draftStep struct{ accepted, next []int32 }

// feedAndDraft feeds prompt at session base 0 and returns its first greedy token and the MTP
// head's depth drafts after it, drafted on the host with the head's Draft calls.
func feedAndDraft(t testing.TB, m *engine.Model, prompt []int32, depth int) (int32, []int32) {
	t.Helper()
	rows := make([]batch.Row, len(prompt))
	for i, tok := range prompt {
		rows[i] = batch.Row{Pos: i, Token: tok, Logits: i == len(prompt)-1}
	}
	logits, err := m.Forward(context.Background(), rows)
	if err != nil {
		t.Fatal(err)
	}
	first := batch.Argmax(logits)
	next := append(slices.Clone(prompt[1:]), first)
	draftRows := make([]batch.DraftRow, len(prompt))
	for i, tok := range next {
		draftRows[i] = batch.DraftRow{Pos: i, Token: tok, Source: i, Logits: i == len(prompt)-1}
	}
	return first, headChain(t, m, draftRows, len(prompt), depth)
}

// headChain runs the MTP head over rows (after a Forward) and chains it to depth drafts by
// argmax; pos is the position of the token the first draft follows.
func headChain(t testing.TB, m *engine.Model, rows []batch.DraftRow, pos, depth int) []int32 {
	t.Helper()
	var drafts []int32
	for len(drafts) < depth {
		dl, err := m.MTP().Draft(context.Background(), rows)
		if err != nil {
			t.Fatal(err)
		}
		drafts = append(drafts, batch.Argmax(dl))
		rows = []batch.DraftRow{{Pos: pos + len(drafts) - 1, Token: drafts[len(drafts)-1], Source: 0, Logits: true, Chained: true}}
	}
	return drafts
}

// hostDraftSteps runs what a drafted chain's steps do with Forward, the host's argmax and the
// head's Draft calls, until n tokens are made: each step feeds the newest token and its drafts,
// accepts the drafts that equal the argmax before them and the argmax after the last, and runs
// the head over the positions that stood and on from there.
func hostDraftSteps(t testing.TB, m *engine.Model, prompt []int32, n, depth int) []draftStep {
	t.Helper()
	newest, drafts := feedAndDraft(t, m, prompt, depth)
	pos, made := len(prompt), 1
	var steps []draftStep
	for made < n {
		rows := []batch.Row{{Pos: pos, Token: newest, Logits: true}}
		for i, tok := range drafts {
			rows = append(rows, batch.Row{Pos: pos + 1 + i, Token: tok, Logits: true})
		}
		logits, err := m.Forward(context.Background(), rows)
		if err != nil {
			t.Fatal(err)
		}
		var accepted []int32
		for i := range rows {
			tok := batch.Argmax(logits[i*m.Vocab() : (i+1)*m.Vocab()])
			accepted = append(accepted, tok)
			if i == len(drafts) || tok != drafts[i] {
				break
			}
		}
		draftRows := make([]batch.DraftRow, len(accepted))
		for i, tok := range accepted {
			draftRows[i] = batch.DraftRow{Pos: pos + i, Token: tok, Source: i, Logits: i == len(accepted)-1}
		}
		pos += len(accepted)
		drafts = headChain(t, m, draftRows, pos, depth)
		newest, made = accepted[len(accepted)-1], made+len(accepted)
		steps = append(steps, draftStep{accepted, drafts})
	}
	return steps
}
