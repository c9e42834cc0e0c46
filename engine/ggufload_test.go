package engine_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"tfd/batch"
	"tfd/compute"
	"tfd/engine"
	"tfd/engine/chattemplate"
	"tfd/engine/enginetest"
	"tfd/engine/gguf"
	"tfd/engine/safetensors"
	"tfd/models"
)

// bundled is the embedded model as a Source.
var bundled = engine.Source{FS: models.FS(), Name: models.Name}

// exportGGUF writes src as a GGUF file of dtype in a temporary folder and returns its path.
func exportGGUF(t testing.TB, src engine.Source, dtype compute.DType) string {
	t.Helper()
	var buf bytes.Buffer
	if err := engine.ExportGGUF(src, dtype, &buf); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "model.gguf")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// convertedFolder writes the bundled model as a Hugging Face folder whose tensors are converted
// as ExportGGUF converts them (matrices to dtype, 1-D tensors to F32): the safetensors model the
// GGUF one must equal bit for bit.
func convertedFolder(t testing.TB, dtype compute.DType) string {
	t.Helper()
	dir := t.TempDir()
	fsys := models.FS()
	for _, name := range []string{"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"} {
		data, err := fs.ReadFile(fsys, name)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ckpt, err := safetensors.OpenFS(fsys)
	if err != nil {
		t.Fatal(err)
	}
	defer ckpt.Close()
	type entry struct {
		DType   string `json:"dtype"`
		Shape   []int  `json:"shape"`
		Offsets [2]int `json:"data_offsets"`
	}
	header := map[string]entry{}
	var data []byte
	for _, name := range ckpt.Names() {
		tn, _ := ckpt.Tensor(name)
		to := dtype
		if len(tn.Shape) == 1 {
			to = compute.F32
		}
		converted := engine.ConvertFloats(tn.Data, compute.BF16, to)
		header[name] = entry{to.String(), tn.Shape, [2]int{len(data), len(data) + len(converted)}}
		data = append(data, converted...)
	}
	head, err := json.Marshal(header)
	if err != nil {
		t.Fatal(err)
	}
	file := binary.LittleEndian.AppendUint64(nil, uint64(len(head)))
	file = append(append(file, head...), data...)
	if err := os.WriteFile(filepath.Join(dir, safetensors.SingleFile), file, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func load(t testing.TB, b compute.Backend, src engine.Source) *engine.Model {
	t.Helper()
	m, err := engine.Load(context.Background(), src, b, engine.Options{Context: 512})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

// ggufPrompts are texts of the bundled model's kind.
var ggufPrompts = []string{
	"package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(",
	"// Copyright 2009 The Go Authors. All rights reserved.\n",
	"func (b *Buffer) Write(p []byte) (n int, err error) {",
}

// allLogits runs each prompt in one forward and returns every position's logits.
func allLogits(t testing.TB, m *engine.Model, prompts [][]int32) [][]float32 {
	t.Helper()
	var out [][]float32
	for _, p := range prompts {
		rows := make([]batch.Row, len(p))
		for i, tok := range p {
			rows[i] = batch.Row{Pos: i, Token: tok, Logits: true}
		}
		logits, err := m.Forward(context.Background(), rows)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, slices.Clone(logits))
	}
	return out
}

// TestGGUFMatchesSafetensors: the bundled model written as GGUF in F32, F16 and BF16 and loaded
// back gives, at every position of every prompt, the logits of the safetensors model of the same
// weights bit for bit (for BF16 the bundled model itself; for F32 and F16 a folder converted the
// same way), and has no MTP head, which GGUF cannot name.
func TestGGUFMatchesSafetensors(t *testing.T) {
	skipShort(t)
	b := openCPU(t)
	for _, dtype := range []compute.DType{compute.F32, compute.F16, compute.BF16} {
		t.Run(dtype.String(), func(t *testing.T) {
			ref := bundled
			if dtype != compute.BF16 {
				ref = engine.Source{Dir: convertedFolder(t, dtype)}
			}
			want := load(t, b, ref)
			got := load(t, b, engine.Source{Dir: exportGGUF(t, bundled, dtype)})
			if got.Config().MTPLayers != 0 || want.Config().MTPLayers != 1 {
				t.Errorf("MTP layers: GGUF %d, safetensors %d; want 0 and 1", got.Config().MTPLayers, want.Config().MTPLayers)
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
						t.Fatalf("prompt %d, position %d, token %d: GGUF logit %v, safetensors %v",
							i, j/got.Vocab(), j%got.Vocab(), g[i][j], w[i][j])
					}
				}
			}
		})
	}
}

// TestGGUFMetadataMatchesFolder: the tokenizer built from the GGUF metadata encodes texts
// (Unicode, digits, runs of spaces and newlines, special tokens, text not in NFC, and every text
// of the tokenizer oracle) to the ids the tokenizer.json one gives and marks the same tokens
// special; the chat template renders a conversation the same; generation ends at the same ids.
func TestGGUFMetadataMatchesFolder(t *testing.T) {
	b := openCPU(t)
	folder := load(t, b, bundled)
	g := load(t, b, engine.Source{Dir: exportGGUF(t, bundled, compute.F16)})
	texts := []string{
		"", " ", "a", "x := 12345678 + 0.25e-3", "héllo wörld — naïve café", "日本語のテキスト 🙂🚀",
		"e\u0301 vs é", "tabs\t\tand  spaces   \n\n\n  end", "\r\n\r\n", "<|im_start|>user\nhi<|im_end|>\n",
		"<|endoftext|><|endoftext|>", "not<|im_end|>special", "'s 're 'VE", "if err != nil {\n\t\treturn err\n\t}",
	}
	raw, err := os.ReadFile(filepath.Join(enginetest.RepoRoot(t), "engine", "testdata", "oracle", "tokenizer", "encodings.json"))
	if err != nil {
		t.Fatal(err)
	}
	var oracle []struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &oracle); err != nil {
		t.Fatal(err)
	}
	for _, c := range oracle {
		texts = append(texts, c.Text)
	}
	ft, gt := folder.Tokenizer(), g.Tokenizer()
	for _, s := range texts {
		if got, want := gt.Encode(s), ft.Encode(s); !slices.Equal(got, want) {
			t.Errorf("Encode(%q): GGUF %v, tokenizer.json %v", s, got, want)
		}
	}
	if gt.VocabSize() != ft.VocabSize() {
		t.Errorf("VocabSize: GGUF %d, tokenizer.json %d", gt.VocabSize(), ft.VocabSize())
	}
	for id := range int32(ft.VocabSize()) {
		if gt.IsSpecial(id) != ft.IsSpecial(id) || !bytes.Equal(gt.TokenBytes(id), ft.TokenBytes(id)) {
			t.Fatalf("token %d: GGUF special %t %q, tokenizer.json %t %q", id, gt.IsSpecial(id), gt.TokenBytes(id), ft.IsSpecial(id), ft.TokenBytes(id))
		}
	}
	if got, want := g.Generation().EOS, folder.Generation().EOS; !slices.Equal(got, want) {
		t.Errorf("EOS: GGUF %v, generation_config.json %v", got, want)
	}
	gen := g.Generation()
	if gen.Temperature != 0.7 || gen.TopK != 40 || gen.TopP != 0.95 || gen.RepetitionPenalty != 1 {
		t.Errorf("sampling defaults from general.sampling.*: %+v", gen)
	}
	if g.Template() == nil || folder.Template() == nil {
		t.Fatal("no chat template")
	}
	messages := []chattemplate.Message{
		{Role: "system", Content: "You write Go."},
		{Role: "user", Content: "Reverse a slice."},
		{Role: "assistant", Content: "", ToolCalls: json.RawMessage(`[{"type":"function","function":{"name":"run","arguments":"{\"code\":\"x\"}"}}]`)},
		{Role: "tool", Content: "ok"},
		{Role: "user", Content: "Thanks — and a map?"},
	}
	opts := chattemplate.Options{AddGenerationPrompt: true, Tools: []json.RawMessage{json.RawMessage(`{"type":"function","function":{"name":"run","parameters":{"type":"object"}}}`)}}
	want, err := folder.Template().Render(messages, opts)
	if err != nil {
		t.Fatal(err)
	}
	got, err := g.Template().Render(messages, opts)
	if err != nil || got != want {
		t.Errorf("chat template: GGUF renders %q (%v), the folder %q", got, err, want)
	}
}

// TestGGUFLlamaMatchesTransformers: llama's q and k rows, permuted for llama.cpp's interleaved
// RoPE by the writer as convert_hf_to_gguf.py permutes them, are put back by the loader, and
// Llama 3's rope scaling survives as rope_freqs: the tiny Llama checkpoint from GGUF gives
// transformers' logits within the oracle's tolerance and its greedy runs. The tiny Qwen2 (q/k/v
// biases) and Qwen3 (q/k norms) ones, whose rows GGUF keeps in order, give the safetensors
// model's logits bit for bit.
func TestGGUFLlamaMatchesTransformers(t *testing.T) {
	b := openCPU(t)
	root := enginetest.RepoRoot(t)
	dir := filepath.Join(root, "engine", "testdata", "oracle", "llama")
	m := load(t, b, engine.Source{Dir: exportGGUF(t, engine.Source{Dir: dir}, compute.F32)})
	if m.Config().Rope.FreqFactors == nil {
		t.Fatal("the llama GGUF lost its rope scaling")
	}
	o := enginetest.Read(t, "llama")
	t.Logf("worst logit error against transformers: %.3g of the row's largest", enginetest.CheckLogits(t, m, o))
	enginetest.CheckGreedy(t, m, o)

	for _, name := range []string{"qwen2", "qwen3"} {
		t.Run(name, func(t *testing.T) {
			src := engine.Source{Dir: filepath.Join(root, "engine", "testdata", "oracle", name)}
			want, got := load(t, b, src), load(t, b, engine.Source{Dir: exportGGUF(t, src, compute.F32)})
			o := enginetest.Read(t, name)
			var prompts [][]int32
			for _, c := range o.Cases {
				prompts = append(prompts, c.Prompt)
			}
			w, g := allLogits(t, want, prompts), allLogits(t, got, prompts)
			for i := range w {
				if !slices.Equal(w[i], g[i]) {
					t.Fatalf("case %d: GGUF logits differ from safetensors", i)
				}
			}
		})
	}
}

// tensorEdit is a tensor of a GGUF file being rewritten.
type tensorEdit struct {
	typ   gguf.Type
	shape []int
	data  []byte
}

// rewrite writes a GGUF file like the one at path with edit applied to its metadata and tensors
// (keys and tensors keep their order; new ones go last, sorted), and returns the new file's path.
func rewrite(t *testing.T, path string, edit func(kv map[string]gguf.Value, tensors map[string]tensorEdit)) string {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	kv, tensors := map[string]gguf.Value{}, map[string]tensorEdit{}
	for _, p := range f.KV {
		kv[p.Key] = p.Value
	}
	for _, tn := range f.Tensors {
		tensors[tn.Name] = tensorEdit{tn.Type, tn.Shape(), tn.Data}
	}
	edit(kv, tensors)
	w := gguf.NewWriter()
	keys := f.Keys()
	for _, k := range slices.Sorted(maps.Keys(kv)) {
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		if v, ok := kv[k]; ok {
			w.Set(k, v)
		}
	}
	names := f.TensorNames()
	for _, n := range slices.Sorted(maps.Keys(tensors)) {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	for _, n := range names {
		if te, ok := tensors[n]; ok {
			w.AddTensor(n, te.typ, te.shape, te.data)
		}
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "edited.gguf")
	if err := os.WriteFile(out, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestGGUFRefusals(t *testing.T) {
	b := openCPU(t)
	path := exportGGUF(t, bundled, compute.F16)
	twoFiles := t.TempDir()
	for _, name := range []string{"a.gguf", "b.gguf"} {
		if err := os.WriteFile(filepath.Join(twoFiles, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	notGGUF := filepath.Join(t.TempDir(), "model.bin")
	if err := os.WriteFile(notGGUF, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	truncated := filepath.Join(t.TempDir(), "cut.gguf")
	if err := os.WriteFile(truncated, data[:len(data)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		path string
		want string
	}{
		{"a type tfd does not run", rewrite(t, path, func(kv map[string]gguf.Value, ts map[string]tensorEdit) {
			d := ts["blk.0.ffn_down.weight"] // [384, 1024]: rows of 4 Q5_K blocks of 256
			ts["blk.0.ffn_down.weight"] = tensorEdit{gguf.Q5_K, d.shape, make([]byte, d.shape[0]*d.shape[1]/256*176)}
		}), "tensor blk.0.ffn_down.weight is Q5_K, which this build of tfd does not run (it runs F32, F16, BF16, Q8_0, Q4_0, Q4_K and Q6_K, and MXFP4 for gpt-oss's experts)"},
		{"another architecture", rewrite(t, path, func(kv map[string]gguf.Value, ts map[string]tensorEdit) {
			kv["general.architecture"] = gguf.String("phi3")
		}), `architecture "phi3" (general.architecture) is not one tfd runs; it runs gemma3, gpt-oss, llama, qwen2, qwen3, qwen3moe, qwen3next`},
		{"a tensor qwen3 lacks", rewrite(t, path, func(kv map[string]gguf.Value, ts map[string]tensorEdit) {
			ts["cls_out.weight"] = tensorEdit{gguf.F32, []int{2, 384}, make([]byte, 2*384*4)}
		}), "holds tensors that qwen3 does not have (cls_out.weight)"},
		{"a missing key", rewrite(t, path, func(kv map[string]gguf.Value, ts map[string]tensorEdit) {
			delete(kv, "qwen3.block_count")
		}), "the metadata has no qwen3.block_count"},
		{"a missing tensor", rewrite(t, path, func(kv map[string]gguf.Value, ts map[string]tensorEdit) {
			delete(ts, "blk.3.ffn_up.weight")
		}), "the checkpoint has no tensor blk.3.ffn_up.weight"},
		{"a tensor of the wrong shape", rewrite(t, path, func(kv map[string]gguf.Value, ts map[string]tensorEdit) {
			d := ts["blk.1.ffn_down.weight"]
			ts["blk.1.ffn_down.weight"] = tensorEdit{d.typ, []int{384, 512}, d.data[:384*512*2]}
		}), "tensor blk.1.ffn_down.weight has shape [384 512], the GGUF metadata implies [384 1024]"},
		{"a SentencePiece tokenizer", rewrite(t, path, func(kv map[string]gguf.Value, ts map[string]tensorEdit) {
			kv["tokenizer.ggml.model"] = gguf.String("llama")
		}), `tokenizer "llama" (tokenizer.ggml.model) is not one tfd runs`},
		{"an unknown pre-tokenizer", rewrite(t, path, func(kv map[string]gguf.Value, ts map[string]tensorEdit) {
			kv["tokenizer.ggml.pre"] = gguf.String("falcon")
		}), `pre-tokenizer "falcon" (tokenizer.ggml.pre) is not one tfd runs; it runs deepseek-r1-qwen, gpt-2, gpt-4o, llama-bpe, llama-v3, llama3, qwen2`},
		{"yarn rope scaling", rewrite(t, path, func(kv map[string]gguf.Value, ts map[string]tensorEdit) {
			kv["qwen3.rope.scaling.type"] = gguf.String("yarn")
		}), `rope scaling "yarn" (qwen3.rope.scaling.type) is not supported`},
		{"a truncated file", truncated, "the file is corrupt or truncated"},
		{"two GGUF files in a folder", twoFiles, "holds 2 GGUF files (a.gguf, b.gguf) and no config.json: name the one to serve in model.path"},
		{"a file that is not GGUF", notGGUF, "is a file but not a .gguf file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := engine.Load(context.Background(), engine.Source{Dir: tt.path}, b, engine.Options{Context: 64})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Load = %v\nwant an error saying %q", err, tt.want)
			}
		})
	}
}

// TestGGUFFolderAndInspect: a folder holding one GGUF file (and no config.json) is that model,
// served under the folder's name, with the file's identity, and Inspect sizes it from its
// headers alone.
func TestGGUFFolderAndInspect(t *testing.T) {
	path := exportGGUF(t, bundled, compute.F16)
	dir := filepath.Join(t.TempDir(), "gopher-gguf")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path, filepath.Join(dir, "gopher-f16.gguf")); err != nil {
		t.Fatal(err)
	}
	b := openCPU(t)
	m := load(t, b, engine.Source{Dir: dir})
	if m.Name() != "gopher-gguf" || m.Vocab() != 8192 {
		t.Errorf("name %q, vocab %d", m.Name(), m.Vocab())
	}
	// The identity hashes the file's header and tensors: the same file named either way gives
	// the same, and it is not the folder's it was written from.
	direct := load(t, b, engine.Source{Dir: filepath.Join(dir, "gopher-f16.gguf")})
	if m.Identity() == "" || direct.Identity() != m.Identity() || m.Identity() == load(t, b, bundled).Identity() {
		t.Errorf("identities: through the folder %q, the file %q", m.Identity(), direct.Identity())
	}
	cfg, info, err := engine.Inspect(engine.Source{Dir: dir}, engine.NoQuantization)
	if err != nil {
		t.Fatal(err)
	}
	want, wantInfo, err := engine.Inspect(bundled, engine.NoQuantization)
	if err != nil {
		t.Fatal(err)
	}
	want.MTPLayers = 0 // GGUF has no names for the MTP head
	want.AttentionBias, want.OutputBias, want.MLPBias = false, false, false
	if !equalConfigs(cfg, want) {
		t.Errorf("Inspect config:\n got %+v\nwant %+v", cfg, want)
	}
	// F16 matrices and F32 norms; the bundled count less the MTP head's parameters.
	if !slices.Equal(info.DTypes, []string{"F16", "F32"}) || info.Params >= wantInfo.Params || info.Params < wantInfo.Params*8/10 {
		t.Errorf("Inspect: %+v, the folder %+v", info, wantInfo)
	}
}

func equalConfigs(a, b engine.Config) bool {
	if !slices.Equal(a.Rope.FreqFactors, b.Rope.FreqFactors) {
		return false
	}
	a.Rope.FreqFactors, b.Rope.FreqFactors = nil, nil
	return reflect.DeepEqual(a, b)
}
