package engine

import (
	"cmp"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"math"
	"slices"
	"strings"

	"tfd/compute"
	"tfd/engine/chattemplate"
	"tfd/engine/gguf"
	"tfd/engine/safetensors"
	"tfd/engine/tokenizer"
	"tfd/quant"
)

// ExportGGUF writes the Hugging Face model of src to out as a GGUF file, as llama.cpp's
// convert_hf_to_gguf.py writes one for its architecture (llama, qwen2, qwen3, qwen3moe, gemma3 or
// gpt-oss; ggufgemma3.go says where Gemma 3 needs a key llama.cpp does not read, ggufgptoss.go how
// GPT-OSS's experts are written): the config as
// "{arch}.*" metadata, the tokenizer as "gpt2" with the pre-tokenizer named for its pattern, the
// special token ids, add_bos_token and the chat template from tokenizer_config.json, the sampling
// defaults of generation_config.json, and the tensors renamed, llama's q and k rows permuted for
// llama.cpp's interleaved RoPE, Llama 3's rope scaling as rope_freqs, a mixture of experts'
// projections stacked a layer at a time (ffn_*_exps), and Gemma's norms as 1 + w.
//
// Matrices are written in dtype, and 1-D tensors (norms, biases) in F32, as the converter does.
// Q4_K and Q6_K follow exportKQuant, with ggml's reference quantizers too.
// F32, F16 and BF16 round to nearest even as numpy rounds. Q8_0 and Q4_0 quantize each row with
// ggml's reference quantizers (package quant), as convert_hf_to_gguf.py --outtype q8_0 and
// llama-quantize's reference do, under model.quantize's rule (Quantization.dtypeFor): Q4_0 keeps
// the embedding table and the head in Q8_0, as model.quantize = "q4" does (llama-quantize would
// make the head Q6_K, which tfd does not run), and a matrix whose rows are not whole blocks stays
// in its checkpoint dtype (the converter would write F16), so that the file loads into exactly the
// weights the folder loads into under model.quantize. An MTP head is left out: GGUF's
// llama, qwen2 and qwen3 have no names for it, so the file's model has none. Qwen3-Next is
// refused: tfd reads llama.cpp's qwen3next (ggufnext.go) but writes none, its files coming from
// llama.cpp's converter. It is for tests and comparisons with llama.cpp (tools/gguf); tfd serves
// what it writes the way it serves the folder.
func ExportGGUF(src Source, dtype compute.DType, out io.Writer) error {
	// general.file_type is llama.cpp's llama_ftype: ALL_F32, MOSTLY_F16, MOSTLY_Q4_0, MOSTLY_Q8_0,
	// MOSTLY_Q4_K_M, MOSTLY_Q6_K, MOSTLY_BF16.
	fileType, ok := map[compute.DType]uint32{compute.F32: 0, compute.F16: 1, compute.Q4_0: 2, compute.Q8_0: 7,
		compute.Q4_K: 15, compute.Q6_K: 18, compute.BF16: 32}[dtype]
	if !ok {
		return fmt.Errorf("engine: export GGUF: dtype %v; write F32, F16, BF16, Q8_0, Q4_0, Q4_K or Q6_K", dtype)
	}
	loc, err := src.locate()
	if err != nil {
		return err
	}
	if loc.gguf != "" {
		return fmt.Errorf("engine: export GGUF: %s is a GGUF file already", loc.gguf)
	}
	cfg, configJSON, err := readConfig(loc.fsys, loc.where)
	if err != nil {
		return err
	}
	if cfg.Next.Enabled {
		// Its tensors are rearranged (ggufnext.go) in ways ExportGGUF does not write.
		return fmt.Errorf("engine: export GGUF: tfd reads Qwen3-Next's GGUF but does not write it; convert %s with llama.cpp's convert_hf_to_gguf.py", loc.where)
	}
	var arch string
	for a, family := range ggufArchitectures {
		if family == cfg.Architecture {
			arch = a
		}
	}
	w := gguf.NewWriter()
	w.Set("general.architecture", gguf.String(arch))
	w.Set("general.type", gguf.String("model"))
	w.Set("general.name", gguf.String(loc.name))
	if err := exportConfig(w, arch, cfg, fileType); err != nil {
		return err
	}
	if err := exportTokenizer(w, loc, cfg, configJSON); err != nil {
		return err
	}
	if err := exportSampling(w, loc.fsys); err != nil {
		return err
	}
	ckpt, err := openSafetensors(loc)
	if err != nil {
		return err
	}
	defer ckpt.Close()
	if err := exportTensors(w, arch, cfg, ckpt, dtype); err != nil {
		return err
	}
	if _, err := w.WriteTo(out); err != nil {
		return fmt.Errorf("engine: export GGUF: %w", err)
	}
	return nil
}

// exportConfig writes the "{arch}.*" keys llama.cpp's loader reads.
func exportConfig(w *gguf.Writer, arch string, c Config, fileType uint32) error {
	key := func(name string) string { return arch + "." + name }
	u32 := func(name string, v int) { w.Set(key(name), gguf.Uint32(uint32(v))) }
	u32("block_count", c.Layers)
	u32("context_length", c.MaxPositions)
	u32("embedding_length", c.Hidden)
	u32("feed_forward_length", c.Intermediate)
	u32("attention.head_count", c.Heads)
	u32("attention.head_count_kv", c.KVHeads)
	w.Set(key("rope.freq_base"), gguf.Float32(float32(c.Rope.Theta)))
	w.Set(key("attention.layer_norm_rms_epsilon"), gguf.Float32(c.NormEps))
	u32("attention.key_length", c.HeadDim)
	u32("attention.value_length", c.HeadDim)
	if arch == "llama" {
		u32("vocab_size", c.Vocab)
		u32("rope.dimension_count", c.HeadDim)
	}
	if m := c.MoE; m.Experts > 0 {
		// As the converter writes Qwen3-MoE's; a layer of mlp_only_layers (or off
		// decoder_sparse_step) is written as a dense MLP, with no router.
		u32("expert_count", m.Experts)
		u32("expert_used_count", m.PerToken)
		u32("expert_feed_forward_length", m.Intermediate)
		if !m.NormTopK {
			w.Set(key("expert_weights_norm"), gguf.Bool(false)) // llama.cpp's qwen3moe ignores it
		}
	}
	switch {
	case c.Rope.Type == "llama3" && arch != "llama":
		return fmt.Errorf("engine: export GGUF: llama.cpp reads Llama 3 rope scaling for llama only, not %s", arch)
	case c.Rope.Type == "linear":
		w.Set(key("rope.scaling.type"), gguf.String("linear"))
		w.Set(key("rope.scaling.factor"), gguf.Float32(float32(c.Rope.Factor)))
	case c.Rope.Type == "yarn":
		if err := exportYarn(w, key, arch, c.Rope); err != nil {
			return err
		}
	case c.Rope.Type != "default" && c.Rope.Type != "llama3":
		return fmt.Errorf("engine: export GGUF: rope type %q", c.Rope.Type)
	}
	switch arch {
	case "gemma3":
		if err := exportGemma3Config(w, key, c); err != nil {
			return err
		}
	case "gpt-oss":
		if err := exportGptOssConfig(w, key, c); err != nil {
			return err
		}
	}
	w.Set("general.file_type", gguf.Uint32(fileType))
	w.Set("general.quantization_version", gguf.Uint32(2))
	return nil
}

// exportYarn writes YaRN's keys as the converter writes them, yarn_attn_factor only where the
// factor is not transformers' default; readYarn reads them back. A checkpoint whose rounding of
// the correction range is not the one tfd reads for arch is refused.
func exportYarn(w *gguf.Writer, key func(string) string, arch string, r RopeConfig) error {
	if r.Truncate != (arch != "gpt-oss") {
		return fmt.Errorf("engine: export GGUF: YaRN with truncate %t; GGUF has no key for it, and tfd reads %s's as %t", r.Truncate, arch, arch != "gpt-oss")
	}
	w.Set(key("rope.scaling.type"), gguf.String("yarn"))
	w.Set(key("rope.scaling.factor"), gguf.Float32(float32(r.Factor)))
	w.Set(key("rope.scaling.original_context_length"), gguf.Uint32(uint32(r.OriginalMaxPositionEmbs)))
	w.Set(key("rope.scaling.yarn_beta_fast"), gguf.Float32(float32(cmp.Or(r.BetaFast, 32))))
	w.Set(key("rope.scaling.yarn_beta_slow"), gguf.Float32(float32(cmp.Or(r.BetaSlow, 1))))
	if r.AttentionFactor != yarnDefaultAttention(float64(float32(r.Factor))) {
		w.Set(key("rope.scaling.yarn_attn_factor"), gguf.Float32(float32(r.AttentionFactor)))
	}
	return nil
}

// exportTokenizer writes tokenizer.ggml.* and the chat template as get_vocab_base and
// SpecialVocab do: one token per id up to the model's vocabulary, "[PAD<id>]" (unused) where the
// tokenizer has none; added tokens as control when special or special-looking ("<|…|>"),
// user-defined otherwise.
func exportTokenizer(w *gguf.Writer, loc located, c Config, configJSON []byte) error {
	raw, err := fs.ReadFile(loc.fsys, "tokenizer.json")
	if err != nil {
		return fmt.Errorf("engine: export GGUF: %w", err)
	}
	tok, err := tokenizer.Load(raw)
	if err != nil {
		return err
	}
	spec, err := tok.Spec()
	if err != nil {
		return fmt.Errorf("engine: export GGUF: the tokenizer cannot be written as GGUF metadata: %w", err)
	}
	// The name the converter writes for each pattern; it must read back the same tokenizer.
	preName := map[tokenizer.Pretokenizer]string{tokenizer.PreGPT2: "gpt-2", tokenizer.PreLlama3: "llama-bpe", tokenizer.PreQwen2: "qwen2",
		tokenizer.PreO200K: "gpt-4o"}[spec.Pre]
	if p, ok := ggufPretokenizers[preName]; !ok || p.nfc != spec.NFC || p.ignoreMerges != spec.IgnoreMerges {
		return fmt.Errorf("engine: export GGUF: a %s pre-tokenizer with NFC %t and ignore_merges %t has no tokenizer.ggml.pre that reads back the same",
			spec.Pre, spec.NFC, spec.IgnoreMerges)
	}
	if len(spec.Tokens) > c.Vocab {
		return fmt.Errorf("engine: export GGUF: the tokenizer has %d ids, the model's vocabulary %d", len(spec.Tokens), c.Vocab)
	}
	added := map[int32]bool{}
	for _, a := range spec.Added {
		added[a.ID] = a.Special
	}
	tokens, types := make([]string, c.Vocab), make([]int32, c.Vocab)
	for id := range tokens {
		text := ""
		if id < len(spec.Tokens) {
			text = spec.Tokens[id]
		}
		special, isAdded := added[int32(id)]
		switch {
		case text == "":
			tokens[id], types[id] = fmt.Sprintf("[PAD%d]", id), ggufTokenUnused
		case isAdded && (special || strings.HasPrefix(text, "<|") && strings.HasSuffix(text, "|>")):
			tokens[id], types[id] = text, ggufTokenControl
		case isAdded:
			tokens[id], types[id] = text, ggufTokenUserDefined
		default:
			tokens[id], types[id] = text, ggufTokenNormal
		}
	}
	merges := make([]string, len(spec.Merges))
	for i, m := range spec.Merges {
		if strings.Contains(m[0], " ") || strings.Contains(m[1], " ") {
			return fmt.Errorf("engine: export GGUF: merge %d (%q %q) holds a space", i, m[0], m[1])
		}
		merges[i] = m[0] + " " + m[1]
	}
	w.Set("tokenizer.ggml.model", gguf.String("gpt2"))
	w.Set("tokenizer.ggml.pre", gguf.String(preName))
	w.Set("tokenizer.ggml.tokens", gguf.Strings(tokens))
	w.Set("tokenizer.ggml.token_type", gguf.Int32s(types))
	w.Set("tokenizer.ggml.merges", gguf.Strings(merges))
	return exportSpecials(w, loc.fsys, tok, c, configJSON)
}

// exportSpecials writes the special token ids (from tokenizer_config.json's tokens, else
// config.json's ids), add_bos/add_eos and the chat template.
func exportSpecials(w *gguf.Writer, fsys fs.FS, tok *tokenizer.Tokenizer, c Config, configJSON []byte) error {
	var tc map[string]json.RawMessage
	if raw, err := fs.ReadFile(fsys, "tokenizer_config.json"); err == nil {
		if err := json.Unmarshal(raw, &tc); err != nil {
			return fmt.Errorf("engine: export GGUF: tokenizer_config.json: %w", err)
		}
		if tmpl, err := chattemplate.FromTokenizerConfig(raw); err == nil {
			w.Set("tokenizer.chat_template", gguf.String(tmpl.Source()))
		}
	}
	var cj map[string]json.RawMessage
	if err := json.Unmarshal(configJSON, &cj); err != nil {
		return fmt.Errorf("engine: export GGUF: config.json: %w", err)
	}
	keys := map[string]string{"bos": "bos_token_id", "eos": "eos_token_id", "unk": "unknown_token_id",
		"sep": "seperator_token_id", "pad": "padding_token_id"} // "seperator" is llama.cpp's spelling
	for _, typ := range []string{"bos", "eos", "unk", "sep", "pad"} {
		id, ok := tok.TokenID(tokenText(tc[typ+"_token"]))
		var fromConfig *int32 // null or absent: none
		if !ok && json.Unmarshal(cj[typ+"_token_id"], &fromConfig) == nil && fromConfig != nil {
			id, ok = *fromConfig, true
		}
		if ok && id >= 0 && int(id) < c.Vocab {
			w.Set("tokenizer.ggml."+keys[typ], gguf.Uint32(uint32(id)))
		}
		var add bool
		if (typ == "bos" || typ == "eos") && json.Unmarshal(tc["add_"+typ+"_token"], &add) == nil {
			w.Set("tokenizer.ggml.add_"+typ+"_token", gguf.Bool(add))
		}
	}
	return nil
}

// tokenText reads a tokenizer_config.json token: a string, or an object with its content.
func tokenText(raw json.RawMessage) string {
	var text string
	if json.Unmarshal(raw, &text) == nil {
		return text
	}
	var obj struct {
		Content string `json:"content"`
	}
	if json.Unmarshal(raw, &obj) != nil {
		return ""
	}
	return obj.Content
}

// exportSampling writes generation_config.json's sampling settings as general.sampling.*.
func exportSampling(w *gguf.Writer, fsys fs.FS) error {
	raw, err := fs.ReadFile(fsys, "generation_config.json")
	if err != nil {
		return nil // optional
	}
	var gc struct {
		TopK              *uint32  `json:"top_k"`
		TopP              *float32 `json:"top_p"`
		MinP              *float32 `json:"min_p"`
		Temperature       *float32 `json:"temperature"`
		RepetitionPenalty *float32 `json:"repetition_penalty"`
	}
	if err := json.Unmarshal(raw, &gc); err != nil {
		return fmt.Errorf("engine: export GGUF: generation_config.json: %w", err)
	}
	if gc.TopK != nil {
		w.Set("general.sampling.top_k", gguf.Uint32(*gc.TopK))
	}
	for _, f := range []struct {
		key string
		v   *float32
	}{{"top_p", gc.TopP}, {"min_p", gc.MinP}, {"temp", gc.Temperature}, {"penalty_repeat", gc.RepetitionPenalty}} {
		if f.v != nil {
			w.Set("general.sampling."+f.key, gguf.Float32(*f.v))
		}
	}
	return nil
}

// exportTensors adds every tensor of the checkpoint under its GGUF name, converted; a mixture of
// experts' projections are stacked, one tensor of all experts a layer and projection.
func exportTensors(w *gguf.Writer, arch string, c Config, ckpt *safetensors.Checkpoint, dtype compute.DType) error {
	if c.Rope.Type == "llama3" {
		w.AddTensor(ggufRopeFreqs, gguf.F32, []int{c.HeadDim / 2}, float32Bytes(llama3Divisors(c.Rope, c.HeadDim)))
	}
	_, hasHead := ckpt.Tensor("lm_head.weight")
	for _, name := range ckpt.Names() {
		if strings.HasPrefix(name, "mtp.") || name == "lm_head.weight" && (c.TieEmbeddings || !hasHead) {
			continue // no GGUF name; a tied head is the embedding
		}
		if arch == "gpt-oss" && strings.Contains(name, ".mlp.experts.") {
			var layer int
			if _, err := fmt.Sscanf(name, "model.layers.%d.", &layer); err != nil {
				return fmt.Errorf("engine: export GGUF: tensor %s: %w", name, err)
			}
			if strings.HasSuffix(name, ".mlp.experts.down_proj_bias") { // one a layer, in either form
				if err := exportGptOssExperts(w, layer, c, ckpt, dtype); err != nil {
					return err
				}
			}
			continue // written with the layer's down_proj_bias
		}
		if gname, e, ok := ggufExpert(name); ok {
			if e == 0 {
				if err := exportExperts(w, gname, name, arch, c, ckpt, dtype); err != nil {
					return err
				}
			}
			continue // written with expert 0
		}
		gname, ok := ggufName(arch, name)
		if !ok {
			return fmt.Errorf("engine: export GGUF: tensor %s has no GGUF name", name)
		}
		data, typ, shape, err := exportTensor(name, gname, arch, c, ckpt, dtype)
		if err != nil {
			return err
		}
		w.AddTensor(gname, typ, shape, data)
	}
	return w.Err()
}

// exportExperts writes the projection of every expert of one layer, named by expert 0's name
// first, as one tensor gname of [experts, rows, columns], each expert converted as a matrix of its
// own.
func exportExperts(w *gguf.Writer, gname, first, arch string, c Config, ckpt *safetensors.Checkpoint, dtype compute.DType) error {
	prefix, proj, _ := strings.Cut(first, ".mlp.experts.0.")
	var stack []byte
	var typ gguf.Type
	var shape []int
	for e := range c.MoE.Experts {
		name := fmt.Sprintf("%s.mlp.experts.%d.%s", prefix, e, proj)
		data, t, s, err := exportTensor(name, gname, arch, c, ckpt, dtype)
		if err != nil {
			return err
		}
		if e > 0 && (t != typ || !slices.Equal(s, shape)) {
			return fmt.Errorf("engine: export GGUF: expert %s is %s %v, expert 0 %s %v", name, t, s, typ, shape)
		}
		stack, typ, shape = append(stack, data...), t, s
	}
	w.AddTensor(gname, typ, append([]int{c.MoE.Experts}, shape...), stack)
	return nil
}

// exportTensor returns the checkpoint's tensor name, whose GGUF name is gname, converted as
// ExportGGUF writes it: its bytes, GGUF type and shape.
func exportTensor(name, gname, arch string, c Config, ckpt *safetensors.Checkpoint, dtype compute.DType) ([]byte, gguf.Type, []int, error) {
	t, ok := ckpt.Tensor(name)
	if !ok {
		return nil, 0, nil, fmt.Errorf("engine: export GGUF: the checkpoint has no tensor %s", name)
	}
	from, ok := dtypes[t.DType]
	if !ok {
		return nil, 0, nil, fmt.Errorf("engine: export GGUF: tensor %s has dtype %s", name, t.DType)
	}
	var data []byte
	typ := ggufTypes[dtype]
	switch {
	case len(t.Shape) <= 1 || strings.HasSuffix(gname, "_norm.weight"):
		data, typ = convertFloats(t.Data, from, compute.F32), gguf.F32
		if arch == "gemma3" && strings.HasSuffix(gname, "norm.weight") {
			data = plusOneF32(data) // the converter's shift (ggufgemma3.go)
		}
	case dtype.Quantized():
		data, typ = exportQuantized(name, stored{name: name, dtype: from, shape: t.Shape, data: t.Data}, dtype)
	default:
		data = convertFloats(t.Data, from, dtype)
	}
	if heads := ggufPermutedHeads(arch, c, name); heads > 0 {
		var err error
		if data, err = ggufPermuteRows(data, t.Shape[0], heads, true); err != nil {
			return nil, 0, nil, fmt.Errorf("engine: export GGUF: tensor %s: %w", name, err)
		}
	}
	return data, typ, t.Shape, nil
}

// exportQuantized returns the matrix (or stack of experts' matrices) t, named name, as ExportGGUF
// writes it in a quantized dtype: Q4_K and Q6_K by exportKQuant, Q8_0 and Q4_0 by model.quantize's
// rule (Quantization.dtypeFor), a matrix whose rows are not whole blocks in its checkpoint dtype;
// its bytes and GGUF type.
func exportQuantized(name string, t stored, dtype compute.DType) ([]byte, gguf.Type) {
	if dtype == compute.Q4_K || dtype == compute.Q6_K {
		qdt := exportKQuant(dtype, name, t.shape)
		return quantizeTensor(t, qdt), ggufTypes[qdt]
	}
	qdt, ok := exportQuantization[dtype].dtypeFor(name, t.dtype, t.shape)
	if !ok {
		return t.data, ggufTypes[t.dtype] // rows that are not whole blocks
	}
	return quantizeTensor(t, qdt), ggufTypes[qdt]
}

// ggufTypes maps the dtypes ExportGGUF writes to GGUF's types.
var ggufTypes = map[compute.DType]gguf.Type{compute.F32: gguf.F32, compute.F16: gguf.F16, compute.BF16: gguf.BF16,
	compute.Q8_0: gguf.Q8_0, compute.Q4_0: gguf.Q4_0, compute.Q4_K: gguf.Q4_K, compute.Q6_K: gguf.Q6_K}

// exportKQuant returns the dtype ExportGGUF writes a matrix in under Q4_K or Q6_K, a simpler
// llama-quantize's Q4_K_M and Q6_K: the embedding table and the head in Q6_K (Q4_K_M's head), the
// other matrices in dtype, and a matrix whose rows are not whole super-blocks of 256 in Q8_0
// (llama-quantize's fallback for Q6_K; for Q4_K it takes Q5_0, which tfd does not run).
func exportKQuant(dtype compute.DType, name string, shape []int) compute.DType {
	if shape[len(shape)-1]%quant.SuperBlockSize != 0 {
		return compute.Q8_0
	}
	if name == "model.embed_tokens.weight" || name == "lm_head.weight" {
		return compute.Q6_K
	}
	return dtype
}

// exportQuantization is the model.quantize rule a quantized GGUF dtype writes its matrices by.
var exportQuantization = map[compute.DType]Quantization{compute.Q8_0: QuantizeQ8, compute.Q4_0: QuantizeQ4}

// llama3Divisors returns Llama 3's rope scaling as the per-frequency divisors llama.cpp's
// converter writes (rope_freqs): 1 for high frequencies, the factor for low ones, a blend
// between.
func llama3Divisors(r RopeConfig, headDim int) []float32 {
	freqs := invFreq(RopeConfig{Theta: r.Theta, Type: "default"}, headDim)
	old := float64(r.OriginalMaxPositionEmbs)
	lowWavelen, highWavelen := old/r.LowFreqFactor, old/r.HighFreqFactor
	out := make([]float32, len(freqs))
	for i, f := range freqs {
		wavelen := 2 * math.Pi / float64(f)
		switch {
		case wavelen < highWavelen:
			out[i] = 1
		case wavelen > lowWavelen:
			out[i] = float32(r.Factor)
		default:
			smooth := (old/wavelen - r.LowFreqFactor) / (r.HighFreqFactor - r.LowFreqFactor)
			out[i] = float32(1 / ((1-smooth)/r.Factor + smooth))
		}
	}
	return out
}

// convertFloats converts little-endian floats between F32, F16 and BF16: widening exactly,
// narrowing to nearest even (as numpy's astype and gguf-py's BF16 do). It returns data itself when
// from equals to.
func convertFloats(data []byte, from, to compute.DType) []byte {
	if from == to {
		return data
	}
	n := len(data) / from.Size()
	out := make([]byte, n*to.Size())
	for i := range n {
		var f float32
		switch from {
		case compute.F32:
			f = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
		case compute.F16:
			f = compute.F16ToF32(binary.LittleEndian.Uint16(data[2*i:]))
		default:
			f = compute.BF16ToF32(binary.LittleEndian.Uint16(data[2*i:]))
		}
		switch to {
		case compute.F32:
			binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(f))
		case compute.F16:
			binary.LittleEndian.PutUint16(out[2*i:], quant.F32ToF16(f))
		default:
			binary.LittleEndian.PutUint16(out[2*i:], quant.F32ToBF16(f))
		}
	}
	return out
}
