package enginetest

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"tfd/batch"
	"tfd/compute"
	"tfd/engine"
)

// QuantizedLogitsBound bounds, for CheckQuantized, how far a quantized model's logits on a GPU
// may be from the same model's on the cpu backend, as a share of the row's largest logit. The
// matrix products are the same bits on both, but attention, norms and RoPE round differently in
// the last bit, and an activation that lands on the other side of a rounding boundary takes the
// next quant, a step of 1/127 of its block's largest value.
const QuantizedLogitsBound = 0.02

// CheckQuantized runs the bundled model quantized, at load (model.quantize q8 and q4) and as GGUF
// files in Q8_0 and Q4_0 (ExportGGUF), on backend b, against the same model on cpu (the cpu
// backend):
//
//   - a GGUF file gives on b the logits of the folder quantized at load on b, bit for bit (the
//     same weights make the same blocks);
//   - forwards that mix sessions and positions give each row its solo bits on b
//     (CheckBatchInvariance);
//   - each oracle prompt's logits at every position are within QuantizedLogitsBound of the cpu's;
//   - each oracle prompt's 64-token greedy continuation is decoded on both, and the tokens they
//     agree on from the start are logged (a tie broken the other way may part them).
//
// GGUF files in Q4_K and Q6_K (which model.quantize does not make) are compared with the cpu in
// the same two ways. A mixture made of the bundled model (GopherMoE), quantized at load with its
// experts, is held to the same bound against the cpu, and to CheckBatchInvariance on b; and its
// Q4_K file (the experts' down stacks Q4_K, their gate and up Q8_0) is compared with the cpu.
func CheckQuantized(t *testing.T, b, cpu compute.Backend) {
	o := Read(t, "gopher")
	for _, c := range []struct {
		q    engine.Quantization
		file compute.DType
	}{{engine.QuantizeQ8, compute.Q8_0}, {engine.QuantizeQ4, compute.Q4_0}} {
		t.Run(string(c.q), func(t *testing.T) {
			opts := engine.Options{MaxRows: 64, Quantize: c.q}
			m, mc := Load(t, b, o.Model, opts), Load(t, cpu, o.Model, opts)
			worst := checkQuantizedLogits(t, m, mc, o)
			t.Logf("%s on %s against cpu: logits worst max|Δ|/max|logit| %.3g; greedy runs of %d tokens agree for the first %v tokens",
				c.q, b.Name(), worst, len(o.Cases[0].Greedy), greedyAgreement(t, m, mc, o))

			gguf := loadGGUF(t, b, o.Model, c.file, opts)
			for ci, cs := range o.Cases {
				g, w := promptLogits(t, gguf, cs.Prompt), promptLogits(t, m, cs.Prompt)
				if !slices.EqualFunc(g, w, func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }) {
					t.Errorf("case %d: the %v GGUF file's logits differ from the folder quantized at load (%s)", ci, c.file, c.q)
				}
			}
		})
		t.Run(string(c.q)+"/invariance", func(t *testing.T) {
			CheckBatchInvariance(t, Load(t, b, o.Model, engine.Options{MaxRows: 48, Slots: 600, Quantize: c.q}))
		})
	}
	moe := GopherMoE(t, 4)
	for _, q := range []engine.Quantization{engine.QuantizeQ8, engine.QuantizeQ4} {
		t.Run("moe/"+string(q), func(t *testing.T) {
			opts := engine.Options{MaxRows: 64, Quantize: q}
			m, mc := loadSource(t, b, engine.Source{Dir: moe}, opts), loadSource(t, cpu, engine.Source{Dir: moe}, opts)
			worst := checkQuantizedLogits(t, m, mc, o)
			t.Logf("a mixture quantized at load (%s) on %s against cpu: logits worst max|Δ|/max|logit| %.3g; greedy runs of %d tokens agree for the first %v tokens",
				q, b.Name(), worst, len(o.Cases[0].Greedy), greedyAgreement(t, m, mc, o))
			CheckBatchInvariance(t, loadSource(t, b, engine.Source{Dir: moe}, engine.Options{MaxRows: 48, Slots: 600, Quantize: q}))
		})
	}
	t.Run("moe/Q4_K", func(t *testing.T) {
		var buf bytes.Buffer
		if err := engine.ExportGGUF(engine.Source{Dir: moe}, compute.Q4_K, &buf); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "moe-q4_k.gguf")
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		opts := engine.Options{MaxRows: 64}
		m, mc := loadSource(t, b, engine.Source{Dir: path}, opts), loadSource(t, cpu, engine.Source{Dir: path}, opts)
		t.Logf("a mixture's Q4_K file on %s against cpu: logits worst max|Δ|/max|logit| %.3g", b.Name(), checkQuantizedLogits(t, m, mc, o))
	})
	for _, dt := range []compute.DType{compute.Q4_K, compute.Q6_K} {
		t.Run(dt.String(), func(t *testing.T) {
			opts := engine.Options{MaxRows: 64}
			m, mc := loadGGUF(t, b, o.Model, dt, opts), loadGGUF(t, cpu, o.Model, dt, opts)
			worst := checkQuantizedLogits(t, m, mc, o)
			t.Logf("a %v GGUF file on %s against cpu: logits worst max|Δ|/max|logit| %.3g; greedy runs of %d tokens agree for the first %v tokens",
				dt, b.Name(), worst, len(o.Cases[0].Greedy), greedyAgreement(t, m, mc, o))
		})
	}
}

// greedyAgreement decodes each oracle prompt's continuation greedily on m and on mc and returns,
// for each, how many tokens from the start the two agree on.
func greedyAgreement(t *testing.T, m, mc *engine.Model, o *Oracle) []int {
	t.Helper()
	var agreed []int
	for _, c := range o.Cases {
		got, want := Greedy(t, m, c.Prompt, len(c.Greedy)), Greedy(t, mc, c.Prompt, len(c.Greedy))
		n := 0
		for n < len(got) && got[n] == want[n] {
			n++
		}
		agreed = append(agreed, n)
	}
	return agreed
}

// checkQuantizedLogits compares every oracle prompt position's logits of m and mc within
// QuantizedLogitsBound and returns the worst ratio seen.
func checkQuantizedLogits(t *testing.T, m, mc *engine.Model, o *Oracle) float64 {
	t.Helper()
	var worstRel float64
	for ci, c := range o.Cases {
		got, want := promptLogits(t, m, c.Prompt), promptLogits(t, mc, c.Prompt)
		for p := range c.Prompt {
			g, w := got[p*o.Vocab:(p+1)*o.Vocab], want[p*o.Vocab:(p+1)*o.Vocab]
			var scale, worst float64
			for i := range w {
				scale = max(scale, math.Abs(float64(w[i])))
				worst = max(worst, math.Abs(float64(g[i]-w[i])))
			}
			worstRel = max(worstRel, worst/scale)
			if !(worst <= QuantizedLogitsBound*scale) {
				t.Errorf("case %d position %d: max |Δlogit| = %.3g, over %g × %.3g", ci, p, worst, QuantizedLogitsBound, scale)
			}
		}
	}
	return worstRel
}

// promptLogits runs prompt in one forward at session base 0 and returns a copy of every
// position's logits.
func promptLogits(t testing.TB, m *engine.Model, prompt []int32) []float32 {
	t.Helper()
	rows := make([]batch.Row, len(prompt))
	for i, tok := range prompt {
		rows[i] = batch.Row{Pos: i, Token: tok, Logits: true}
	}
	logits, err := m.Forward(context.Background(), rows)
	if err != nil {
		t.Fatal(err)
	}
	return slices.Clone(logits)
}

// loadSource loads src on b; the model is closed when the test ends.
func loadSource(t testing.TB, b compute.Backend, src engine.Source, opts engine.Options) *engine.Model {
	t.Helper()
	m, err := engine.Load(context.Background(), src, b, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

// loadGGUF writes the model folder dir (relative to the repository root) as a GGUF file of
// dtype and loads it on b; the model is closed when the test ends.
func loadGGUF(t testing.TB, b compute.Backend, dir string, dtype compute.DType, opts engine.Options) *engine.Model {
	t.Helper()
	var buf bytes.Buffer
	if err := engine.ExportGGUF(engine.Source{Dir: filepath.Join(RepoRoot(t), dir)}, dtype, &buf); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), fmt.Sprintf("model-%v.gguf", dtype))
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := engine.Load(context.Background(), engine.Source{Dir: path}, b, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}
