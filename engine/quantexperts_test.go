package engine_test

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"tfd/compute"
	"tfd/compute/computetest"
	"tfd/engine"
	"tfd/engine/enginetest"
	"tfd/engine/gguf"
)

// TestQuantizedExpertsGGUF: the Qwen3-MoE fixture written as a GGUF file in Q8_0 and Q4_0
// (ExportGGUF quantizes the experts' gate and up stacks; the down stacks' rows of 48 elements are
// no whole number of blocks and stay F32) loads with its experts quantized as stored, and gives
// every position's logits of the folder quantized at load (model.quantize) bit for bit; Inspect
// counts the bytes of the file's types, experts included; and a forward that mixes sessions gives
// each row its solo bits. (The fixture's random weights make any rounding move its logits by as
// much as their size, quantizing q, k, v and o alone included, so its distance from the F32
// model says nothing: TestQuantizedExpertsNearF32 measures that on trained weights.)
func TestQuantizedExpertsGGUF(t *testing.T) {
	b := openCPU(t)
	src := engine.Source{Dir: filepath.Join(enginetest.RepoRoot(t), "engine", "testdata", "oracle", "qwen3moe")}
	var prompts [][]int32
	for _, p := range ggufPrompts {
		prompts = append(prompts, load(t, b, src).Tokenizer().Encode(p))
	}
	for _, c := range []struct {
		q    engine.Quantization
		file compute.DType
		typ  gguf.Type
	}{{engine.QuantizeQ8, compute.Q8_0, gguf.Q8_0}, {engine.QuantizeQ4, compute.Q4_0, gguf.Q4_0}} {
		t.Run(string(c.q), func(t *testing.T) {
			path := exportGGUF(t, src, c.file)
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			var size int64
			for _, w := range f.Tensors {
				size += int64(len(w.Data))
			}
			for _, name := range []string{"blk.0.ffn_gate_exps.weight", "blk.2.ffn_up_exps.weight"} {
				if w, ok := f.Tensor(name); !ok || w.Type != c.typ {
					t.Errorf("%s is %v (there: %v), want %v", name, w.Type, ok, c.typ)
				}
			}
			f.Close()
			_, info, err := engine.Inspect(engine.Source{Dir: path}, c.q)
			if err != nil {
				t.Fatal(err)
			}
			if info.Bytes != size {
				t.Errorf("Inspect counts %d bytes as loaded, the file's tensors hold %d", info.Bytes, size)
			}

			opts := engine.Options{Context: 512, MaxRows: 48, Quantize: c.q}
			atLoad := enginetest.Load(t, b, "engine/testdata/oracle/qwen3moe", opts)
			file := loadOpts(t, b, engine.Source{Dir: path}, engine.Options{Context: 512, MaxRows: 48})
			got, folder := allLogits(t, file, prompts), allLogits(t, atLoad, prompts)
			for i := range got {
				computetest.SameBits(t, fmt.Sprintf("prompt %d: the file's logits against the folder quantized at load", i), got[i], folder[i])
			}
			enginetest.CheckBatchInvariance(t, loadOpts(t, b, engine.Source{Dir: path}, engine.Options{MaxRows: 48, Slots: 600}))
		})
	}
}

// loadOpts loads src on b with opts; the model is closed when the test ends.
func loadOpts(t testing.TB, b compute.Backend, src engine.Source, opts engine.Options) *engine.Model {
	t.Helper()
	m, err := engine.Load(context.Background(), src, b, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

// expertsNearF32 bounds how far TestQuantizedExpertsNearF32's logits, quantized (at load by
// model.quantize, or as GGUF files of K-quants), may be from the model's own, as a share of the
// row's largest logit: a little over what docs/choices.md gives for the bundled model quantized
// (1.9% with q8, 15.5% with q4), which the mixture made of it should match, its experts being the
// bundled model's MLP. Measured: 1.81% (q8), 13.3% (q4), 6.7% (Q4_K), 2.3% (Q6_K).
var expertsNearF32 = map[string]float64{"q8": 0.03, "q4": 0.2, "Q4_K": 0.1, "Q6_K": 0.04}

// TestQuantizedExpertsNearF32: a Qwen3-MoE checkpoint made of the bundled model (GopherMoE: each
// layer's MLP as 4 experts, top 2), quantized at load with its experts, gives logits within
// expertsNearF32 of the same checkpoint unquantized, at every position of three prompts (every
// layer's three stacks of experts quantized, as a backend that records its uploads counts). Its
// K-quant GGUF files (ExportGGUF: the experts' down stacks in Q4_K or Q6_K, their gate and up,
// whose rows of 384 are no whole super-block, in Q8_0) load and are held to their bounds, and the
// Q4_K one's rows are their solo bits in forwards that mix sessions.
func TestQuantizedExpertsNearF32(t *testing.T) {
	skipShort(t)
	b := openCPU(t)
	dir := enginetest.GopherMoE(t, 4)
	m := loadOpts(t, b, engine.Source{Dir: dir}, engine.Options{MaxRows: 64})
	var prompts [][]int32
	for _, p := range ggufPrompts {
		prompts = append(prompts, m.Tokenizer().Encode(p))
	}
	want := allLogits(t, m, prompts)
	check := func(t *testing.T, q *engine.Model, bound float64) {
		t.Helper()
		got := allLogits(t, q, prompts)
		var worst float64
		v := m.Vocab()
		for i := range got {
			for p := range len(got[i]) / v {
				g, w := got[i][p*v:(p+1)*v], want[i][p*v:(p+1)*v]
				var scale, d float64
				for j := range w {
					scale = max(scale, math.Abs(float64(w[j])))
					d = max(d, math.Abs(float64(g[j]-w[j])))
				}
				worst = max(worst, d/scale)
				if !(d <= bound*scale) {
					t.Errorf("prompt %d position %d: max |Δlogit| %.3g, over %g × %.3g", i, p, d, bound, scale)
				}
			}
		}
		t.Logf("logits against the unquantized model: worst max|Δ|/max|logit| %.3g", worst)
	}
	// The premise: unquantized, the mixture is the bundled model but for the rounding of its sums.
	t.Run("the bundled model", func(t *testing.T) {
		check(t, enginetest.Load(t, b, "models/gopher", engine.Options{MaxRows: 64}), 1e-4)
	})
	for _, q := range []engine.Quantization{engine.QuantizeQ8, engine.QuantizeQ4} {
		t.Run(string(q), func(t *testing.T) {
			opts := engine.Options{MaxRows: 64, Quantize: q}
			ref := newRefBackend(t)
			loadOpts(t, ref, engine.Source{Dir: dir}, opts)
			if len(ref.experts) != 8*3 {
				t.Errorf("%d stacks of experts quantized, want 24", len(ref.experts))
			}
			check(t, loadOpts(t, b, engine.Source{Dir: dir}, opts), expertsNearF32[string(q)])
		})
	}
	for _, dt := range []compute.DType{compute.Q4_K, compute.Q6_K} {
		t.Run(dt.String(), func(t *testing.T) {
			path := exportGGUF(t, engine.Source{Dir: dir}, dt)
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]gguf.Type{"blk.3.ffn_gate_exps.weight": gguf.Q8_0, "blk.3.ffn_down_exps.weight": gguf.Q4_K}
			if dt == compute.Q6_K {
				want["blk.3.ffn_down_exps.weight"] = gguf.Q6_K
			}
			for name, typ := range want {
				if w, ok := f.Tensor(name); !ok || w.Type != typ {
					t.Errorf("%s is %v (there: %v), want %v", name, w.Type, ok, typ)
				}
			}
			f.Close()
			check(t, loadOpts(t, b, engine.Source{Dir: path}, engine.Options{MaxRows: 64}), expertsNearF32[dt.String()])
			if dt == compute.Q4_K {
				// Q8_0 and Q4_K experts, gate and up over the tokens' rows, down over the pairs'.
				enginetest.CheckBatchInvariance(t, loadOpts(t, b, engine.Source{Dir: path}, engine.Options{MaxRows: 48, Slots: 600}))
			}
		})
	}
}

// TestQuantizedExpertsGptOss: the GPT-OSS fixture (experts in transformers' form, with biases)
// written as a GGUF file in Q8_0 and Q4_0 has its experts' stacks quantized, loads, and gives
// every position's logits, bit for bit, of the same file on a backend that computes each quantized
// product, the experts' a pair at a time with their biases, with package quant's reference; a
// forward that mixes sessions gives each row its solo bits.
func TestQuantizedExpertsGptOss(t *testing.T) {
	b := openCPU(t)
	src := engine.Source{Dir: filepath.Join(enginetest.RepoRoot(t), "engine", "testdata", "oracle", "gptoss")}
	for _, c := range []struct {
		dt  compute.DType
		typ gguf.Type
	}{{compute.Q8_0, gguf.Q8_0}, {compute.Q4_0, gguf.Q4_0}} {
		t.Run(c.dt.String(), func(t *testing.T) {
			path := exportGGUF(t, src, c.dt)
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{"blk.0.ffn_gate_exps.weight", "blk.1.ffn_up_exps.weight", "blk.2.ffn_down_exps.weight"} {
				if w, ok := f.Tensor(name); !ok || w.Type != c.typ {
					t.Errorf("%s is %v (there: %v), want %v", name, w.Type, ok, c.typ)
				}
			}
			f.Close()
			m := load(t, b, engine.Source{Dir: path})
			ref := newRefBackend(t)
			mr := load(t, ref, engine.Source{Dir: path})
			if want := 3 * m.Config().Layers; len(ref.experts) != want {
				t.Errorf("%d stacks of experts quantized, want %d", len(ref.experts), want)
			}
			var prompts [][]int32
			for _, p := range ggufPrompts {
				prompts = append(prompts, m.Tokenizer().Encode(p))
			}
			got, want := allLogits(t, m, prompts), allLogits(t, mr, prompts)
			for i := range got {
				computetest.SameBits(t, fmt.Sprintf("prompt %d's logits against quant's reference", i), got[i], want[i])
			}
			enginetest.CheckBatchInvariance(t, loadOpts(t, b, engine.Source{Dir: path}, engine.Options{MaxRows: 48, Slots: 600}))
		})
	}
}
