package cuda

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

	"tfd/compute"
	"tfd/engine"
	"tfd/scheduler"
)

// The engine end to end on the GPU, against the transformers oracle of engine/testdata/oracle
// (see engine/oracle_test.go): logits, greedy continuations, and mixed batches against solo rows.

// oracle is engine/testdata/oracle/NAME: transformers' f32 logits for each prompt position and
// its 64-token greedy continuation.
type oracle struct {
	Model string `json:"model"`
	Vocab int    `json:"vocab"`
	Cases []struct {
		Prompt       []int32 `json:"prompt"`
		LogitsOffset int     `json:"logits_offset"`
		Greedy       []int32 `json:"greedy"`
		MinGap       float64 `json:"min_gap"`
	} `json:"cases"`
	logits []float32
}

var oracleModels = []string{"llama", "qwen2", "qwen3", "gopher"}

func readOracle(t testing.TB, name string) *oracle {
	t.Helper()
	dir := filepath.Join(repoRoot(t), "engine", "testdata", "oracle", name)
	raw, err := os.ReadFile(filepath.Join(dir, "oracle.json"))
	if err != nil {
		t.Fatal(err)
	}
	var o oracle
	if err := json.Unmarshal(raw, &o); err != nil {
		t.Fatalf("%s/oracle.json: %v", dir, err)
	}
	bin, err := os.ReadFile(filepath.Join(dir, "logits.f32"))
	if err != nil {
		t.Fatal(err)
	}
	o.logits = make([]float32, len(bin)/4)
	for i := range o.logits {
		o.logits[i] = math.Float32frombits(binary.LittleEndian.Uint32(bin[4*i:]))
	}
	return &o
}

// loadModel loads a model folder (relative to the repository root) on a new backend.
func loadModel(t testing.TB, b compute.Backend, dir string, opts engine.Options) *engine.Model {
	t.Helper()
	m, err := engine.Load(context.Background(), engine.Source{Dir: filepath.Join(repoRoot(t), dir)}, b, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

// TestEngineLogitsMatchOracle compares every prompt position's logits with transformers' f32
// logits to 1e-4 of the row's largest magnitude, the CPU backend's own bound. gopher's weights are
// BF16 on disk; the oracle upcast them to F32, which is exactly what the kernels do as they load
// them.
func TestEngineLogitsMatchOracle(t *testing.T) {
	b := openCUDA(t)
	for _, name := range oracleModels {
		t.Run(name, func(t *testing.T) {
			o := readOracle(t, name)
			m := loadModel(t, b, o.Model, engine.Options{MaxRows: 64})
			worstRel := 0.0
			for ci, c := range o.Cases {
				rows := make([]scheduler.Row, len(c.Prompt))
				for i, tok := range c.Prompt {
					rows[i] = scheduler.Row{Pos: i, Token: tok, Logits: true}
				}
				got, err := m.Forward(context.Background(), rows)
				if err != nil {
					t.Fatal(err)
				}
				want := o.logits[c.LogitsOffset : c.LogitsOffset+len(c.Prompt)*o.Vocab]
				for p := range c.Prompt {
					g, w := got[p*o.Vocab:(p+1)*o.Vocab], want[p*o.Vocab:(p+1)*o.Vocab]
					var scale, worst float64
					for i := range w {
						scale = max(scale, math.Abs(float64(w[i])))
						worst = max(worst, math.Abs(float64(g[i]-w[i])))
					}
					worstRel = max(worstRel, worst/scale)
					if worst > 1e-4*scale {
						t.Errorf("case %d position %d: max |Δlogit| = %.3g, over 1e-4 × %.3g", ci, p, worst, scale)
					}
				}
			}
			t.Logf("%s: worst max|Δlogit| / max|logit| over all positions: %.3g", name, worstRel)
		})
	}
}

// TestEngineGreedyMatchesOracle decodes 64 tokens greedily, one row per forward as the serial
// host does, and demands transformers' tokens; on a mismatch it says where they part and how
// close the oracle's top two were.
func TestEngineGreedyMatchesOracle(t *testing.T) {
	b := openCUDA(t)
	for _, name := range oracleModels {
		t.Run(name, func(t *testing.T) {
			o := readOracle(t, name)
			m := loadModel(t, b, o.Model, engine.Options{MaxRows: 64})
			for ci, c := range o.Cases {
				got := greedy(t, m, c.Prompt, len(c.Greedy))
				if i := firstDiff(got, c.Greedy); i >= 0 {
					t.Errorf("case %d parts from the oracle at token %d (smallest top-2 gap in the oracle %.3g):\n got %v\nwant %v",
						ci, i, c.MinGap, got, c.Greedy)
				}
			}
		})
	}
}

func firstDiff(a, b []int32) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

func greedy(t testing.TB, m *engine.Model, prompt []int32, n int) []int32 {
	t.Helper()
	rows := make([]scheduler.Row, len(prompt))
	for i, tok := range prompt {
		rows[i] = scheduler.Row{Pos: i, Token: tok, Logits: i == len(prompt)-1}
	}
	logits, err := m.Forward(context.Background(), rows)
	if err != nil {
		t.Fatal(err)
	}
	var out []int32
	for pos := len(prompt); len(out) < n; pos++ {
		tok := argmax(logits)
		out = append(out, tok)
		if logits, err = m.Forward(context.Background(), []scheduler.Row{{Pos: pos, Token: tok, Logits: true}}); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func argmax(logits []float32) int32 {
	best := 0
	for i, l := range logits {
		if l > logits[best] {
			best = i
		}
	}
	return int32(best)
}

// TestEngineForwardIsBatchInvariant feeds three sessions' tokens once each on its own, one row
// per forward, and once interleaved in random chunks that mix sessions and positions in one
// forward (shuffled); every (session, position) must give the same logits, bit for bit.
func TestEngineForwardIsBatchInvariant(t *testing.T) {
	b := openCUDA(t)
	for _, name := range []string{"qwen2", "gopher"} {
		t.Run(name, func(t *testing.T) {
			o := readOracle(t, name)
			m := loadModel(t, b, o.Model, engine.Options{MaxRows: 48, Slots: 600})
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
			solo := make([][][]float32, len(sessions))
			for i, s := range sessions {
				for pos, tok := range s.tokens {
					logits, err := m.Forward(context.Background(), []scheduler.Row{{Base: s.base, Pos: pos, Token: tok, Logits: true}})
					if err != nil {
						t.Fatal(err)
					}
					solo[i] = append(solo[i], slices.Clone(logits))
				}
			}
			next := make([]int, len(sessions))
			for forwards := 0; ; forwards++ {
				var rows []scheduler.Row
				var owner []int
				for i, s := range sessions {
					for range min(r.IntN(12), len(s.tokens)-next[i]) {
						rows = append(rows, scheduler.Row{Base: s.base, Pos: next[i], Token: s.tokens[next[i]], Logits: true})
						owner = append(owner, i)
						next[i]++
					}
				}
				if len(rows) == 0 {
					done := true
					for i, s := range sessions {
						done = done && next[i] == len(s.tokens)
					}
					if done {
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
					want, got := solo[owner[j]][row.Pos], logits[j*v:(j+1)*v]
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
