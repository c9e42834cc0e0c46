package engine_test

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"tfd/batch"
	"tfd/engine"
	"tfd/engine/enginetest"
)

// nextGGUF returns the path of the Qwen3-Next fixture written as GGUF of dtype by llama.cpp's
// converter (tools/fixtures/make_qwen3next_gguf.py), skipping the test when the file is absent.
func nextGGUF(t *testing.T, dtype string) string {
	t.Helper()
	path := filepath.Join(enginetest.RepoRoot(t), "engine", "testdata", "qwen3next-gguf", "qwen3next-"+dtype+".gguf")
	if _, err := os.Stat(path); err != nil {
		t.Skipf("%v: tools/fixtures/make_qwen3next_gguf.py writes it with llama.cpp's converter", err)
	}
	return path
}

// TestGGUFQwen3NextMatchesSafetensors: the Qwen3-Next fixture written as an F32 qwen3next GGUF by
// llama.cpp's own converter (in_proj_qkvz split into attn_qkv and attn_gate, A_log stored as
// −exp(A_log), the norms as 1 + w, the MTP head as block 4's nextn tensors) loads with the
// folder's config, gives every position's logits of the safetensors load bit for bit, the MTP
// head's drafts bit for bit, and the oracle's 64-token greedy runs.
func TestGGUFQwen3NextMatchesSafetensors(t *testing.T) {
	path := nextGGUF(t, "f32")
	b := openCPU(t)
	o := enginetest.Read(t, "qwen3next")
	want := load(t, b, engine.Source{Dir: filepath.Join(enginetest.RepoRoot(t), o.Model)})
	got := load(t, b, engine.Source{Dir: path})
	wc, gc := want.Config(), got.Config()
	wn, gn := wc.Next, gc.Next
	if !gn.Enabled || !slices.Equal(gn.Linear, wn.Linear) || gn.KHeads != wn.KHeads || gn.VHeads != wn.VHeads ||
		gn.KDim != wn.KDim || gn.VDim != wn.VDim || gn.ConvKernel != wn.ConvKernel || gn.RotaryDim != wn.RotaryDim ||
		gn.SharedIntermediate != wn.SharedIntermediate {
		t.Fatalf("GGUF's Qwen3-Next config %+v; the folder's %+v", gn, wn)
	}
	if wm, gm := wc.MoE, gc.MoE; gm.Experts != wm.Experts || gm.PerToken != wm.PerToken || gm.Intermediate != wm.Intermediate ||
		gm.NormTopK != wm.NormTopK || gm.SparseLayers(gc.Layers) != wm.SparseLayers(wc.Layers) {
		t.Fatalf("GGUF's mixture of experts %+v; the folder's %+v", gm, wm)
	}
	if gc.Layers != wc.Layers || gc.MTPLayers != wc.MTPLayers || gc.HeadDim != wc.HeadDim || gc.Heads != wc.Heads ||
		gc.KVHeads != wc.KVHeads || gc.Rope.Theta != wc.Rope.Theta || !gc.QKNorm || gc.TieEmbeddings != wc.TieEmbeddings {
		t.Fatalf("GGUF's config %+v\nthe folder's %+v", gc, wc)
	}
	var prompts [][]int32
	for _, c := range o.Cases {
		prompts = append(prompts, c.Prompt)
	}
	w, g := allLogits(t, want, prompts), allLogits(t, got, prompts)
	for i := range w {
		if slices.Max(w[i]) == slices.Min(w[i]) {
			t.Fatalf("case %d: flat logits", i)
		}
		for j := range w[i] {
			if math.Float32bits(w[i][j]) != math.Float32bits(g[i][j]) {
				t.Fatalf("case %d, position %d, token %d: GGUF logit %v, safetensors %v", i, j/got.Vocab(), j%got.Vocab(), g[i][j], w[i][j])
			}
		}
	}
	for i, p := range prompts {
		wd, gd := promptDrafts(t, want, p), promptDrafts(t, got, p)
		if !slices.Equal(wd, gd) {
			t.Fatalf("case %d: the GGUF head's draft logits differ from the folder's", i)
		}
	}
	t.Logf("worst logit error against the oracle: %.3g of the row's largest", enginetest.CheckLogits(t, got, o))
	enginetest.CheckGreedy(t, got, o)
}

// promptDrafts feeds prompt and returns the MTP head's draft logits at every position.
func promptDrafts(t *testing.T, m *engine.Model, prompt []int32) []float32 {
	t.Helper()
	if m.MTP() == nil {
		t.Fatal("the model has no MTP head")
	}
	rows := make([]batch.Row, len(prompt))
	drafts := make([]batch.DraftRow, len(prompt)-1)
	for i, tok := range prompt {
		rows[i] = batch.Row{Pos: i, Token: tok, Logits: i == len(prompt)-1}
		if i > 0 {
			drafts[i-1] = batch.DraftRow{Pos: i - 1, Token: tok, Source: i - 1, Logits: true}
		}
	}
	if _, err := m.Forward(context.Background(), rows); err != nil {
		t.Fatal(err)
	}
	if len(drafts) == 0 {
		return nil
	}
	logits, err := m.MTP().Draft(context.Background(), drafts)
	if err != nil {
		t.Fatal(err)
	}
	return slices.Clone(logits)
}
