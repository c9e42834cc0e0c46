package engine_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"tfd/compute"
	"tfd/compute/computetest"
	"tfd/engine"
	"tfd/engine/enginetest"
	"tfd/engine/gguf"
)

// TestGGUFQuantizedMatchesQuantizeAtLoad: the bundled model and the llama oracle (whose q and k
// rows ExportGGUF permutes, here as whole quantized rows) written as Q8_0 and Q4_0 GGUF and
// loaded as they are give, bit for bit, the logits of the same weights quantized at load with q8
// and q4 (the bundled model's safetensors folder; the llama oracle's F32 GGUF file): the same
// quantizer under the same rule makes the same blocks. The files
// hold F32 1-D tensors, the embedding table and head in Q8_0 under Q4_0, and Inspect counts
// their bytes as stored, whatever model.quantize says (a quantized file loads as it is).
func TestGGUFQuantizedMatchesQuantizeAtLoad(t *testing.T) {
	skipShort(t)
	llama := filepath.Join(enginetest.RepoRoot(t), "engine", "testdata", "oracle", "llama")
	for _, c := range []struct {
		dtype compute.DType
		q     engine.Quantization
	}{{compute.Q8_0, engine.QuantizeQ8}, {compute.Q4_0, engine.QuantizeQ4}} {
		t.Run(c.dtype.String(), func(t *testing.T) {
			opts := engine.Options{MaxRows: 64, Quantize: c.q}
			// The bundled model: a prompt and 4 decoded tokens, one forward each.
			folder := enginetest.Load(t, openCPU(t), "models/gopher", opts)
			path := exportGGUF(t, bundled, c.dtype)
			checkQuantizedGGUF(t, path, c.dtype)
			file := load(t, openCPU(t), engine.Source{Dir: path})
			tokens, prompt := quantTokens(t, folder, 4)
			want, got := runLogits(t, folder, tokens, prompt), runLogits(t, file, tokens, prompt)
			for i := range got {
				computetest.SameBits(t, fmt.Sprintf("bundled, row %d's logits", i), got[i], want[i])
			}

			// The llama oracle, every position of its prompts, against its F32 GGUF quantized at
			// load: its folder's rotary frequencies are computed from Llama 3's scaling where a
			// GGUF file's come from the F32 divisors, which differ in the last bits whatever the
			// weights are.
			src := engine.Source{Dir: llama}
			path = exportGGUF(t, src, c.dtype)
			checkQuantizedGGUF(t, path, c.dtype)
			ref, err := engine.Load(context.Background(), engine.Source{Dir: exportGGUF(t, src, compute.F32)}, openCPU(t), opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(ref.Close)
			file = load(t, openCPU(t), engine.Source{Dir: path})
			var prompts [][]int32
			for _, oc := range enginetest.Read(t, "llama").Cases {
				prompts = append(prompts, oc.Prompt)
			}
			w, g := allLogits(t, ref, prompts), allLogits(t, file, prompts)
			for i := range w {
				computetest.SameBits(t, fmt.Sprintf("llama, prompt %d's logits", i), g[i], w[i])
			}

			// Inspect: the file's bytes as stored, under any model.quantize; they are the folder's
			// quantized at load and the rope_freqs divisors (F32, one a frequency) the file adds.
			_, folderInfo, err := engine.Inspect(src, c.q)
			if err != nil {
				t.Fatal(err)
			}
			for _, q := range []engine.Quantization{engine.NoQuantization, engine.QuantizeQ8, engine.QuantizeQ4} {
				_, info, err := engine.Inspect(engine.Source{Dir: path}, q)
				if err != nil {
					t.Fatal(err)
				}
				if wantBytes := folderInfo.Bytes + int64(ref.Config().HeadDim/2*4); info.Bytes != wantBytes || info.FileBytes != wantBytes {
					t.Errorf("Inspect(%q) of the llama GGUF: %d bytes loaded, %d in the file; want %d for both", q, info.Bytes, info.FileBytes, wantBytes)
				}
			}
		})
	}
}

// checkQuantizedGGUF checks the tensor types of a GGUF file ExportGGUF wrote in dtype (Q8_0 or
// Q4_0): 1-D tensors F32, the embedding table and head Q8_0, the other matrices dtype.
func checkQuantizedGGUF(t *testing.T, path string, dtype compute.DType) {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	matrix := map[compute.DType]gguf.Type{compute.Q8_0: gguf.Q8_0, compute.Q4_0: gguf.Q4_0}[dtype]
	var types []string
	for _, w := range f.Tensors {
		want := matrix
		switch {
		case len(w.Dims) == 1:
			want = gguf.F32
		case w.Name == "token_embd.weight" || w.Name == "output.weight":
			want = gguf.Q8_0
		}
		if w.Type != want {
			t.Errorf("%s: tensor %s is %s, want %s", filepath.Base(path), w.Name, w.Type, want)
		}
		if !slices.Contains(types, w.Type.String()) {
			types = append(types, w.Type.String())
		}
	}
	if !slices.Contains(types, matrix.String()) {
		t.Errorf("the file holds %v, no %s", types, matrix)
	}
}

// noQuantBackend is the cpu backend refusing quantized weights as the GPU backends do today.
type noQuantBackend struct{ compute.Backend }

func (b noQuantBackend) Upload(dtype compute.DType, shape []int, data []byte) (compute.Tensor, error) {
	if dtype.Quantized() {
		return nil, fmt.Errorf("test: %v: %w", dtype, compute.ErrNoQuantizedKernels)
	}
	return b.Backend.Upload(dtype, shape, data)
}

// TestQuantizedOnABackendWithoutKernels: a backend without quantized kernels refuses a model
// quantized at load with the setting that did it, and a checkpoint that is quantized itself with
// what to serve instead.
func TestQuantizedOnABackendWithoutKernels(t *testing.T) {
	b := noQuantBackend{openCPU(t)}
	_, err := engine.Load(context.Background(), bundled, b, engine.Options{MaxRows: 16, Quantize: engine.QuantizeQ8})
	if err == nil || !strings.Contains(err.Error(), "leave model.quantize empty") {
		t.Errorf("quantized at load: %v, want the way out through model.quantize", err)
	}
	path := exportGGUF(t, bundled, compute.Q8_0)
	_, err = engine.Load(context.Background(), engine.Source{Dir: path}, b, engine.Options{MaxRows: 16})
	if err == nil || strings.Contains(err.Error(), "model.quantize") || !strings.Contains(err.Error(), "quantized checkpoint") {
		t.Errorf("a Q8_0 GGUF file: %v, want the way out for a checkpoint quantized itself", err)
	}
}

// TestGGUFKQuants: the bundled model written as Q4_K and Q6_K GGUF (ExportGGUF: ggml's reference
// quantizers; the bundled model's rows of 384 are not whole super-blocks, so only ffn_down, rows of
// 1024, is in the K-quant and the other matrices are Q8_0) loads as it is, its logits are bit for
// bit those of package quant's dot products (the reference backend), and close to the
// unquantized model's.
func TestGGUFKQuants(t *testing.T) {
	skipShort(t)
	unquantized := enginetest.Load(t, openCPU(t), "models/gopher", engine.Options{MaxRows: 64})
	tokens, prompt := quantTokens(t, unquantized, 4)
	f32 := runLogits(t, unquantized, tokens, prompt)
	for _, c := range []struct {
		dtype compute.DType
		bound float64 // of max|Δ| / max|logit| in any row
	}{{compute.Q4_K, 0.1}, {compute.Q6_K, 0.05}} {
		t.Run(c.dtype.String(), func(t *testing.T) {
			path := exportGGUF(t, bundled, c.dtype)
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range f.Tensors {
				want := map[compute.DType]gguf.Type{compute.Q4_K: gguf.Q4_K, compute.Q6_K: gguf.Q6_K}[c.dtype]
				switch {
				case len(w.Dims) == 1:
					want = gguf.F32
				case !strings.HasSuffix(w.Name, "ffn_down.weight"):
					want = gguf.Q8_0
				}
				if w.Type != want {
					t.Errorf("tensor %s is %s, want %s", w.Name, w.Type, want)
				}
			}
			f.Close()
			got := runLogits(t, load(t, openCPU(t), engine.Source{Dir: path}), tokens, prompt)
			ref := newRefBackend(t)
			want := runLogits(t, load(t, ref, engine.Source{Dir: path}), tokens, prompt)
			kquant := 0
			for _, m := range ref.refs {
				if m.dtype == c.dtype {
					kquant++
				}
			}
			if kquant == 0 {
				t.Fatalf("the reference backend saw no %v weights", c.dtype)
			}
			for i := range got {
				computetest.SameBits(t, fmt.Sprintf("row %d's logits", i), got[i], want[i])
			}
			worst, mean, agree := closeness(got, f32)
			t.Logf("%v GGUF against the unquantized model over %d rows: max|Δ|/max|logit| worst %.4f, mean %.4f; argmax agrees in %.0f%%", c.dtype, len(got), worst, mean, 100*agree)
			if worst > c.bound {
				t.Errorf("max|Δ|/max|logit| reaches %.4f, above the bound %.2f", worst, c.bound)
			}
		})
	}
}
