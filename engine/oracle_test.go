package engine

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"tfd/compute"
	_ "tfd/cpu"
	"tfd/scheduler"
)

// The oracle: logits and greedy continuations recorded with Hugging Face transformers in f32 by
// tools/fixtures/make_fixtures.py, for tiny random-init checkpoints of each family and for the
// bundled model.
type oracle struct {
	Model string `json:"model"` // checkpoint folder, relative to the repository root
	Vocab int    `json:"vocab"`
	Cases []struct {
		Prompt       []int32 `json:"prompt"`
		LogitsOffset int     `json:"logits_offset"` // index into logits.f32, in floats
		Greedy       []int32 `json:"greedy"`
		MinGap       float64 `json:"min_gap"`
	} `json:"cases"`
	logits []float32
}

var oracleModels = []string{"llama", "qwen2", "qwen3", "gopher"}

func readOracle(t *testing.T, name string) *oracle {
	t.Helper()
	dir := filepath.Join("testdata", "oracle", name)
	raw, err := os.ReadFile(filepath.Join(dir, "oracle.json"))
	if err != nil {
		t.Fatalf("oracle fixture missing (make it with tools/fixtures): %v", err)
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

func loadCPU(t testing.TB, dir string, opts Options) *Model {
	t.Helper()
	b, err := compute.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	m, err := Load(context.Background(), Source{Dir: dir}, b, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

// TestLogitsMatchTransformers compares every position's logits with transformers' f32 logits to
// 1e-4 of the row's largest magnitude.
func TestLogitsMatchTransformers(t *testing.T) {
	for _, name := range oracleModels {
		t.Run(name, func(t *testing.T) {
			o := readOracle(t, name)
			m := loadCPU(t, filepath.Join("..", o.Model), Options{MaxRows: 64})
			if m.Vocab() != o.Vocab {
				t.Fatalf("vocab %d, oracle has %d", m.Vocab(), o.Vocab)
			}
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
					if worst > 1e-4*scale {
						t.Errorf("case %d position %d: max |Δlogit| = %.3g, over 1e-4 × %.3g", ci, p, worst, scale)
					}
				}
			}
		})
	}
}

// TestGreedyMatchesTransformers decodes 64 tokens greedily, one row per forward as the serial host
// does, and demands transformers' tokens exactly.
func TestGreedyMatchesTransformers(t *testing.T) {
	for _, name := range oracleModels {
		t.Run(name, func(t *testing.T) {
			o := readOracle(t, name)
			m := loadCPU(t, filepath.Join("..", o.Model), Options{MaxRows: 64})
			for ci, c := range o.Cases {
				got := greedy(t, m, c.Prompt, len(c.Greedy))
				if !slices.Equal(got, c.Greedy) {
					t.Errorf("case %d (smallest top-2 gap in the oracle %.3g):\n got %v\nwant %v", ci, c.MinGap, got, c.Greedy)
				}
			}
		})
	}
}

func greedy(t testing.TB, m *Model, prompt []int32, n int) []int32 {
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
		tok := argmaxRow(logits)
		out = append(out, tok)
		if logits, err = m.Forward(context.Background(), []scheduler.Row{{Pos: pos, Token: tok, Logits: true}}); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func argmaxRow(logits []float32) int32 {
	best := 0
	for i, l := range logits {
		if l > logits[best] {
			best = i
		}
	}
	return int32(best)
}
