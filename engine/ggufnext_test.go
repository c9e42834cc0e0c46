package engine_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"tfd/batch"
	"tfd/compute"
	"tfd/compute/computetest"
	"tfd/engine"
	"tfd/engine/enginetest"
	"tfd/engine/gguf"
	"tfd/engine/safetensors"
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

// TestGGUFQwen3NextQ8_0: llama.cpp's Q8_0 file of the fixture (Q8_0 matrices whose rows the loader
// moves: in_proj_qkvz's halves, in_proj_ba, q_proj's queries and gates, the MTP fc's halves; the
// experts' gate and up stacks in Q8_0, their down stacks, of rows of 48, in F16) runs, head
// included, and every position's logits are, bit for bit, those of the same file on a backend
// that computes each quantized product, the experts' a pair at a time, with package quant's
// reference; its 64-token greedy runs are compared with the oracle's as far as they agree
// (quantizing flips routing decisions the fixture keeps only 0.002 apart, so they part).
func TestGGUFQwen3NextQ8_0(t *testing.T) {
	o := enginetest.Read(t, "qwen3next")
	path := nextGGUF(t, "q8_0")
	m := load(t, openCPU(t), engine.Source{Dir: path})
	ref := newRefBackend(t)
	mr := load(t, deltaRefBackend{ref, ref.Backend.(compute.DeltaNet)}, engine.Source{Dir: path})
	if len(ref.experts) != 5*2 {
		t.Errorf("%d stacks of experts are quantized, want the gate and up stacks of 4 layers and the MTP block", len(ref.experts))
	}
	var prompts [][]int32
	for _, c := range o.Cases {
		prompts = append(prompts, c.Prompt)
	}
	got, want := allLogits(t, m, prompts), allLogits(t, mr, prompts)
	for i := range got {
		computetest.SameBits(t, fmt.Sprintf("case %d's logits against quant's reference", i), got[i], want[i])
	}
	var agreed []int
	for _, c := range o.Cases {
		got := enginetest.Greedy(t, m, c.Prompt, len(c.Greedy))
		n := 0
		for n < len(got) && got[n] == c.Greedy[n] {
			n++
		}
		agreed = append(agreed, n)
		for _, d := range promptDrafts(t, m, c.Prompt) {
			if math.IsNaN(float64(d)) || math.IsInf(float64(d), 0) {
				t.Fatalf("a draft logit is %v", d)
			}
		}
	}
	t.Logf("Q8_0: greedy runs agree with the oracle's for the first %v of %d tokens", agreed, len(o.Cases[0].Greedy))
}

// deltaRefBackend is refBackend with the cpu backend's DeltaNet ops, for a hybrid model.
type deltaRefBackend struct {
	*refBackend
	compute.DeltaNet
}

// TestGGUFQwen3NextRefusals: what tfd does not run in a qwen3next file is refused, naming the
// tensor or key.
func TestGGUFQwen3NextRefusals(t *testing.T) {
	b := openCPU(t)
	path := nextGGUF(t, "q8_0")
	if _, err := engine.Load(context.Background(), engine.Source{Dir: path}, b, engine.Options{Context: 64}); err != nil {
		t.Fatalf("the file the cases edit does not load: %v", err)
	}
	edit := func(f func(kv map[string]gguf.Value, ts map[string]tensorEdit)) string { return rewrite(t, path, f) }
	// attention.recurrent_layers, where a file has it, says which layers are DeltaNet layers
	// before full_attention_interval does, as llama.cpp reads it.
	listed := edit(func(kv map[string]gguf.Value, ts map[string]tensorEdit) {
		kv["qwen3next.attention.recurrent_layers"] = gguf.Bools([]bool{true, true, true, false, false})
		kv["qwen3next.full_attention_interval"] = gguf.Uint32(2)
	})
	if m, err := engine.Load(context.Background(), engine.Source{Dir: listed}, b, engine.Options{Context: 64}); err != nil {
		t.Errorf("a file listing its recurrent layers: %v", err)
	} else {
		if got := m.Config().Next.Linear; !slices.Equal(got, []bool{true, true, true, false}) {
			t.Errorf("recurrent_layers read as %v", got)
		}
		m.Close()
	}
	for _, tt := range []struct {
		name string
		path string
		want string
	}{
		{"an MTP head alone", edit(func(kv map[string]gguf.Value, ts map[string]tensorEdit) {
			delete(ts, "blk.0.attn_norm.weight")
		}), "an MTP head alone (convert_hf_to_gguf.py --mtp) is no model to serve"},
		{"no model beside the head", edit(func(kv map[string]gguf.Value, ts map[string]tensorEdit) {
			kv["qwen3next.nextn_predict_layers"] = gguf.Uint32(5)
		}), "qwen3next.nextn_predict_layers is 5 of qwen3next.block_count 5"},
		{"half of in_proj_qkvz", edit(func(kv map[string]gguf.Value, ts map[string]tensorEdit) {
			delete(ts, "blk.1.attn_gate.weight")
		}), "has blk.1.attn_qkv.weight but no blk.1.attn_gate.weight"},
		{"a positive ssm_a", edit(func(kv map[string]gguf.Value, ts map[string]tensorEdit) {
			a := ts["blk.2.ssm_a"]
			data := slices.Clone(a.data)
			binary.LittleEndian.PutUint32(data, math.Float32bits(0.5))
			ts["blk.2.ssm_a"] = tensorEdit{a.typ, a.shape, data}
		}), "tensor blk.2.ssm_a: ssm_a[0] is 0.5; −exp(A_log) is negative and finite"},
		{"odd rotary dimensions", edit(func(kv map[string]gguf.Value, ts map[string]tensorEdit) {
			kv["qwen3next.rope.dimension_count"] = gguf.Uint32(3)
		}), "qwen3next.rope.dimension_count is 3; tfd wants an even number of rotary dimensions up to the head size 16"},
		{"an MTP block marked recurrent", edit(func(kv map[string]gguf.Value, ts map[string]tensorEdit) {
			kv["qwen3next.attention.recurrent_layers"] = gguf.Bools([]bool{true, true, true, false, true})
		}), "qwen3next.attention.recurrent_layers marks an MTP block recurrent"},
		{"layer kinds of the wrong count", edit(func(kv map[string]gguf.Value, ts map[string]tensorEdit) {
			kv["qwen3next.attention.recurrent_layers"] = gguf.Bools([]bool{true, true, true, false})
		}), "qwen3next.attention.recurrent_layers is"},
		{"a missing ssm key", edit(func(kv map[string]gguf.Value, ts map[string]tensorEdit) {
			delete(kv, "qwen3next.ssm.inner_size")
		}), "the metadata has no qwen3next.ssm.inner_size"},
		{"the head's own embeddings", edit(func(kv map[string]gguf.Value, ts map[string]tensorEdit) {
			ts["blk.4.nextn.embed_tokens.weight"] = tensorEdit{gguf.F32, []int{512, 64}, make([]byte, 512*64*4)}
		}), "holds tensors that qwen3next does not have (blk.4.nextn.embed_tokens.weight)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := engine.Load(context.Background(), engine.Source{Dir: tt.path}, b, engine.Options{Context: 64})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Load = %v\nwant an error saying %q", err, tt.want)
			}
		})
	}
	var buf strings.Builder
	err := engine.ExportGGUF(engine.Source{Dir: filepath.Join(enginetest.RepoRoot(t), "engine", "testdata", "oracle", "qwen3next")}, compute.F32, &buf)
	if err == nil || !strings.Contains(err.Error(), "convert_hf_to_gguf.py") {
		t.Errorf("ExportGGUF of a Qwen3-Next folder = %v; want a refusal naming llama.cpp's converter", err)
	}
}

// TestGGUFQwen3NextLegacySSMIn: files from llama.cpp's converter before it split in_proj_qkvz hold
// it whole as ssm_in, in the Hub's order; the F32 fixture with its attn_qkv and attn_gate replaced
// by the folder's in_proj_qkvz as ssm_in gives the same logits bit for bit.
func TestGGUFQwen3NextLegacySSMIn(t *testing.T) {
	path := nextGGUF(t, "f32")
	folder, err := safetensors.Open(filepath.Join(enginetest.RepoRoot(t), "engine", "testdata", "oracle", "qwen3next"))
	if err != nil {
		t.Fatal(err)
	}
	defer folder.Close()
	legacy := rewrite(t, path, func(kv map[string]gguf.Value, ts map[string]tensorEdit) {
		for i := range 3 { // the DeltaNet layers
			blk := fmt.Sprintf("blk.%d.", i)
			qkvz, ok := folder.Tensor(fmt.Sprintf("model.layers.%d.linear_attn.in_proj_qkvz.weight", i))
			if !ok || ts[blk+"attn_qkv.weight"].data == nil {
				t.Fatalf("layer %d is no DeltaNet layer of the fixture", i)
			}
			delete(ts, blk+"attn_qkv.weight")
			delete(ts, blk+"attn_gate.weight")
			ts[blk+"ssm_in.weight"] = tensorEdit{gguf.F32, qkvz.Shape, qkvz.Data}
		}
	})
	b := openCPU(t)
	o := enginetest.Read(t, "qwen3next")
	var prompts [][]int32
	for _, c := range o.Cases {
		prompts = append(prompts, c.Prompt)
	}
	w := allLogits(t, load(t, b, engine.Source{Dir: path}), prompts)
	g := allLogits(t, load(t, b, engine.Source{Dir: legacy}), prompts)
	for i := range w {
		if !slices.EqualFunc(w[i], g[i], func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }) {
			t.Fatalf("case %d: the file with ssm_in gives other logits than the one with attn_qkv and attn_gate", i)
		}
	}
}
