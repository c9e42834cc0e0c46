package engine_test

import (
	"context"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"tfd/compute"
	"tfd/engine"
	"tfd/engine/enginetest"
	"tfd/engine/gguf"
	"tfd/engine/tokenizer"
)

// TestGGUFQwen3MoEMatchesSafetensors: the Qwen3-MoE fixture (8 experts, top 2, layer 1 dense)
// written as a qwen3moe GGUF in F32, each layer's experts stacked as llama.cpp's ffn_*_exps, and
// loaded back gives every position's logits of the safetensors load bit for bit, with the same
// mixture of experts read from the metadata and the tensors (the dense layer has no router).
func TestGGUFQwen3MoEMatchesSafetensors(t *testing.T) {
	b := openCPU(t)
	src := engine.Source{Dir: filepath.Join(enginetest.RepoRoot(t), "engine", "testdata", "oracle", "qwen3moe")}
	want := load(t, b, src)
	got := load(t, b, engine.Source{Dir: exportGGUF(t, src, compute.F32)})
	wm, gm := want.Config().MoE, got.Config().MoE
	if gm.Experts != wm.Experts || gm.PerToken != wm.PerToken || gm.Intermediate != wm.Intermediate || gm.NormTopK != wm.NormTopK ||
		gm.SparseLayers(got.Config().Layers) != wm.SparseLayers(want.Config().Layers) || gm.Sparse(1) || !gm.Sparse(0) {
		t.Fatalf("GGUF's mixture of experts %+v; the folder's %+v", gm, wm)
	}
	if !got.Config().QKNorm {
		t.Error("the GGUF model has no q/k norms")
	}
	var prompts [][]int32
	for _, p := range ggufPrompts {
		prompts = append(prompts, want.Tokenizer().Encode(p))
	}
	w, g := allLogits(t, want, prompts), allLogits(t, got, prompts)
	for i := range w {
		if slices.Max(w[i]) == slices.Min(w[i]) {
			t.Fatalf("prompt %d: flat logits", i)
		}
		for j := range w[i] {
			if math.Float32bits(w[i][j]) != math.Float32bits(g[i][j]) {
				t.Fatalf("prompt %d, position %d, token %d: GGUF logit %v, safetensors %v", i, j/got.Vocab(), j%got.Vocab(), g[i][j], w[i][j])
			}
		}
	}
}

// TestGGUFGemma3MatchesSafetensors: the Gemma 3 fixture (window 8, layers sliding, sliding,
// global, sliding: a period of 3; linear rope scaling on the global layers; a soft-cap; a
// query_pre_attn_scalar of 24, which llama.cpp's rule would not give) written as a gemma3 GGUF
// in F32 and loaded back gives every position's logits of the safetensors load bit for bit, its
// norms stored as 1 + w as llama.cpp's converter stores them.
func TestGGUFGemma3MatchesSafetensors(t *testing.T) {
	b := openCPU(t)
	src := engine.Source{Dir: filepath.Join(enginetest.RepoRoot(t), "engine", "testdata", "oracle", "gemma3")}
	want := load(t, b, src)
	got := load(t, b, engine.Source{Dir: exportGGUF(t, src, compute.F32)})
	wc, gc := want.Config(), got.Config()
	if !slices.Equal(gc.Sliding, wc.Sliding) || gc.SlidingWindow != wc.SlidingWindow ||
		gc.Gemma.FinalSoftcap != wc.Gemma.FinalSoftcap || gc.Gemma.LocalRope.Theta != wc.Gemma.LocalRope.Theta ||
		gc.Rope.Type != wc.Rope.Type || gc.Rope.Factor != wc.Rope.Factor || !gc.TieEmbeddings {
		t.Fatalf("GGUF's config %+v\nthe folder's %+v", gc, wc)
	}
	var prompts [][]int32
	for _, p := range ggufPrompts {
		prompts = append(prompts, want.Tokenizer().Encode(p))
	}
	w, g := allLogits(t, want, prompts), allLogits(t, got, prompts)
	for i := range w {
		if slices.Max(w[i]) == slices.Min(w[i]) {
			t.Fatalf("prompt %d: flat logits", i)
		}
		for j := range w[i] {
			if math.Float32bits(w[i][j]) != math.Float32bits(g[i][j]) {
				t.Fatalf("prompt %d, position %d, token %d: GGUF logit %v, safetensors %v", i, j/got.Vocab(), j%got.Vocab(), g[i][j], w[i][j])
			}
		}
	}
}

// TestGGUFGptOssMatchesSafetensors: the GPT-OSS fixtures (8 experts, top 2, biases and sinks,
// window 8 on layers 0 and 2, YaRN with truncate false), their experts as transformers saves them
// and as openai's MXFP4, written as llama.cpp's gpt-oss GGUF in F32 (gate, up and down stacked
// apart; the MXFP4 experts as ggml's MXFP4 blocks) and loaded back give every position's logits of
// the safetensors load bit for bit, with the same config read from the metadata.
func TestGGUFGptOssMatchesSafetensors(t *testing.T) {
	b := openCPU(t)
	for _, fixture := range []string{"gptoss", "gptoss-mxfp4"} {
		t.Run(fixture, func(t *testing.T) {
			src := engine.Source{Dir: filepath.Join(enginetest.RepoRoot(t), "engine", "testdata", "oracle", fixture)}
			want := load(t, b, src)
			got := load(t, b, engine.Source{Dir: exportGGUF(t, src, compute.F32)})
			wc, gc := want.Config(), got.Config()
			wm, gm := wc.MoE, gc.MoE
			if gm.Experts != wm.Experts || gm.PerToken != wm.PerToken || gm.Intermediate != wm.Intermediate || gm.NormTopK != wm.NormTopK ||
				!gm.Biases || gm.SwiGLULimit != wm.SwiGLULimit || gm.MXFP4 != wm.MXFP4 || gm.SparseLayers(gc.Layers) != gc.Layers {
				t.Fatalf("GGUF's mixture of experts %+v; the folder's %+v", gm, wm)
			}
			if !slices.Equal(gc.Sliding, wc.Sliding) || gc.SlidingWindow != wc.SlidingWindow || !gc.AttentionSinks ||
				!gc.AttentionBias || !gc.OutputBias || gc.QKNorm || gc.TieEmbeddings || gc.HeadDim != wc.HeadDim {
				t.Fatalf("GGUF's config %+v\nthe folder's %+v", gc, wc)
			}
			if wr, gr := wc.Rope, gc.Rope; gr.Type != "yarn" || gr.Factor != wr.Factor || gr.Theta != wr.Theta || gr.Truncate ||
				gr.OriginalMaxPositionEmbs != wr.OriginalMaxPositionEmbs || gr.AttentionFactor != wr.AttentionFactor ||
				gr.BetaFast != wr.BetaFast || gr.BetaSlow != wr.BetaSlow {
				t.Fatalf("GGUF's rope %+v; the folder's %+v", gr, wr)
			}
			var prompts [][]int32
			for _, p := range ggufPrompts {
				prompts = append(prompts, want.Tokenizer().Encode(p))
			}
			if len(prompts[0]) <= gc.SlidingWindow {
				t.Fatalf("prompt 0 has %d tokens, no more than the window %d: the sliding layers are not tested", len(prompts[0]), gc.SlidingWindow)
			}
			w, g := allLogits(t, want, prompts), allLogits(t, got, prompts)
			for i := range w {
				if slices.Max(w[i]) == slices.Min(w[i]) {
					t.Fatalf("prompt %d: flat logits", i)
				}
				for j := range w[i] {
					if math.Float32bits(w[i][j]) != math.Float32bits(g[i][j]) {
						t.Fatalf("prompt %d, position %d, token %d: GGUF logit %v, safetensors %v", i, j/got.Vocab(), j%got.Vocab(), g[i][j], w[i][j])
					}
				}
			}
		})
	}
}

// TestGGUFGptOssAsLlamaCpp: a gpt-oss file read as llama.cpp's converter writes it: tokenizer.ggml.pre
// "gpt-4o" splits by o200k's pattern; a sliding rope of its own, and MXFP4 outside the experts,
// which tfd does not run, are refused by name.
func TestGGUFGptOssAsLlamaCpp(t *testing.T) {
	b := openCPU(t)
	path := exportGGUF(t, engine.Source{Dir: filepath.Join(enginetest.RepoRoot(t), "engine", "testdata", "oracle", "gptoss-mxfp4")}, compute.F32)
	o200k := rewrite(t, path, func(kv map[string]gguf.Value, ts map[string]tensorEdit) {
		kv["tokenizer.ggml.pre"] = gguf.String("gpt-4o")
	})
	if spec, err := load(t, b, engine.Source{Dir: o200k}).Tokenizer().Spec(); err != nil || spec.Pre != tokenizer.PreO200K {
		t.Errorf("tokenizer.ggml.pre gpt-4o splits by %v (%v); want %v", spec.Pre, err, tokenizer.PreO200K)
	}
	for _, tt := range []struct {
		name string
		edit func(kv map[string]gguf.Value, ts map[string]tensorEdit)
		want string
	}{
		{"a sliding rope of its own", func(kv map[string]gguf.Value, ts map[string]tensorEdit) {
			kv["gpt-oss.rope.freq_base_swa"] = gguf.Float32(10000)
		}, "gpt-oss.rope.freq_base_swa is 10000, gpt-oss.rope.freq_base 150000"},
		{"MXFP4 outside the experts", func(kv map[string]gguf.Value, ts map[string]tensorEdit) {
			q := ts["blk.0.attn_q.weight"] // [64, 64]: 2 blocks a row
			ts["blk.0.attn_q.weight"] = tensorEdit{gguf.MXFP4, q.shape, make([]byte, 64*2*17)}
		}, "tensor blk.0.attn_q.weight is MXFP4, which this build of tfd does not run"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := engine.Load(context.Background(), engine.Source{Dir: rewrite(t, path, tt.edit)}, b, engine.Options{Context: 64})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Load = %v\nwant an error saying %q", err, tt.want)
			}
		})
	}
}
