package engine

import (
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"tfd/compute"
	"tfd/engine/gguf"
)

// A GGUF file holds what a Hugging Face folder holds, under llama.cpp's names: the config as
// "{arch}.*" metadata, the tokenizer and chat template as "tokenizer.*" metadata, and the tensors
// renamed (gguf-py's tensor_mapping.py) with their dimensions listed innermost first. The loader
// reads it as a checkpoint under Hugging Face names, so the families and the forward are the ones
// a folder loads into.

// ggufArchitectures maps general.architecture to the family that runs it.
var ggufArchitectures = map[string]string{
	"llama":     "LlamaForCausalLM",
	"qwen2":     "Qwen2ForCausalLM",
	"qwen3":     "Qwen3ForCausalLM",
	"qwen3moe":  "Qwen3MoeForCausalLM",
	"gemma3":    "Gemma3ForCausalLM",
	"gpt-oss":   "GptOssForCausalLM",
	"qwen3next": "Qwen3NextForCausalLM",
}

// ggufGlobalNames maps the Hugging Face names of the tensors outside the layers to GGUF's.
var ggufGlobalNames = map[string]string{
	"model.embed_tokens.weight": "token_embd.weight",
	"model.norm.weight":         "output_norm.weight",
	"lm_head.weight":            "output.weight",
}

// ggufLayerNames maps the names of one layer's tensors after "model.layers.N." to GGUF's after
// "blk.N.".
var ggufLayerNames = map[string]string{
	"input_layernorm.weight":          "attn_norm.weight",
	"post_attention_layernorm.weight": "ffn_norm.weight",
	"self_attn.q_proj.weight":         "attn_q.weight",
	"self_attn.k_proj.weight":         "attn_k.weight",
	"self_attn.v_proj.weight":         "attn_v.weight",
	"self_attn.o_proj.weight":         "attn_output.weight",
	"self_attn.q_proj.bias":           "attn_q.bias",
	"self_attn.k_proj.bias":           "attn_k.bias",
	"self_attn.v_proj.bias":           "attn_v.bias",
	"self_attn.o_proj.bias":           "attn_output.bias",
	"self_attn.q_norm.weight":         "attn_q_norm.weight",
	"self_attn.k_norm.weight":         "attn_k_norm.weight",
	"mlp.gate_proj.weight":            "ffn_gate.weight",
	"mlp.up_proj.weight":              "ffn_up.weight",
	"mlp.down_proj.weight":            "ffn_down.weight",
	"mlp.gate_proj.bias":              "ffn_gate.bias",
	"mlp.up_proj.bias":                "ffn_up.bias",
	"mlp.down_proj.bias":              "ffn_down.bias",
	"mlp.gate.weight":                 "ffn_gate_inp.weight", // a mixture of experts' router
}

// ggufExpertNames maps a projection of one expert ("mlp.experts.E.gate_proj.weight" after
// "model.layers.N.") to the GGUF tensor after "blk.N." that stacks it with the layer's other
// experts: [experts, rows, columns], expert E's rows the E-th run.
var ggufExpertNames = map[string]string{
	"gate_proj.weight": "ffn_gate_exps.weight",
	"up_proj.weight":   "ffn_up_exps.weight",
	"down_proj.weight": "ffn_down_exps.weight",
}

// ggufExpert returns the GGUF tensor that stacks the expert projection of a Hugging Face tensor
// name, and the expert's index in it; false for any other name.
func ggufExpert(hf string) (string, int, bool) {
	rest, ok := strings.CutPrefix(hf, "model.layers.")
	if !ok {
		return "", 0, false
	}
	layer, rest, _ := strings.Cut(rest, ".mlp.experts.")
	expert, proj, _ := strings.Cut(rest, ".")
	n, ok := ggufExpertNames[proj]
	e, err := strconv.Atoi(expert)
	if _, lerr := strconv.Atoi(layer); !ok || err != nil || lerr != nil || e < 0 {
		return "", 0, false
	}
	return "blk." + layer + "." + n, e, true
}

// ggufRopeFreqs holds llama.cpp's per-frequency divisors, in which GGUF files carry Llama 3's
// rope scaling.
const ggufRopeFreqs = "rope_freqs.weight"

// ggufName returns the GGUF name of a Hugging Face tensor name in a file of architecture arch;
// false for a tensor GGUF has no name for (an MTP head's).
func ggufName(arch, hf string) (string, bool) {
	if n, ok := ggufGlobalNames[hf]; ok {
		return n, true
	}
	if n, _, ok := ggufExpert(hf); ok {
		return n, true
	}
	rest, ok := strings.CutPrefix(hf, "model.layers.")
	if !ok {
		return "", false
	}
	layer, suffix, ok := strings.Cut(rest, ".")
	if _, err := strconv.Atoi(layer); err != nil || !ok {
		return "", false
	}
	n, ok := ggufLayerNames[suffix]
	if arch == "gemma3" {
		if g, isGemma := ggufGemma3LayerNames[suffix]; isGemma {
			n, ok = g, true
		}
	}
	if arch == "gpt-oss" {
		if g, isGptOss := ggufGptOssLayerNames[suffix]; isGptOss {
			n, ok = g, true
		}
	}
	if arch == "qwen3next" {
		if g, isNext := ggufNextLayerNames[suffix]; isNext {
			n, ok = g, true
		}
	}
	return "blk." + layer + "." + n, ok
}

// ggufDType says which compute dtype runs a GGUF tensor type: the one place that decides which
// types tfd loads (ggufRunsTypes names them). A type it does not map is refused by name when a
// tensor of it is loaded.
func ggufDType(t gguf.Type) (compute.DType, bool) {
	switch t {
	case gguf.F32:
		return compute.F32, true
	case gguf.F16:
		return compute.F16, true
	case gguf.BF16:
		return compute.BF16, true
	case gguf.Q8_0: // compute's Q8_0, Q4_0, Q4_K and Q6_K are ggml's blocks byte for byte
		return compute.Q8_0, true
	case gguf.Q4_0:
		return compute.Q4_0, true
	case gguf.Q4_K:
		return compute.Q4_K, true
	case gguf.Q6_K:
		return compute.Q6_K, true
	}
	return 0, false
}

// ggufRunsTypes names the types ggufDType maps, for refusals.
const ggufRunsTypes = "F32, F16, BF16, Q8_0, Q4_0, Q4_K and Q6_K, and MXFP4 for gpt-oss's experts"

// ggufCheckpoint is a GGUF file opened for loading: the config read from its metadata, and its
// tensors as a checkpoint under Hugging Face names.
type ggufCheckpoint struct {
	path string
	file *gguf.File
	arch string // general.architecture
	cfg  Config
	used map[string]bool // GGUF names of the tensors taken
}

// openGGUF maps the GGUF file at path and reads its config; the caller closes it.
func openGGUF(path string) (*ggufCheckpoint, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	g := &ggufCheckpoint{path: path, file: f, used: map[string]bool{}}
	if err := g.readConfig(); err != nil {
		f.Close()
		return nil, err
	}
	return g, nil
}

func (g *ggufCheckpoint) errorf(format string, args ...any) error {
	return fmt.Errorf("engine: %s: "+format, append([]any{g.path}, args...)...)
}

// intKey reads a non-negative integer; a missing key is 0, false.
func (g *ggufCheckpoint) intKey(key string) (int, bool, error) {
	v, ok := g.file.Lookup(key)
	if !ok {
		return 0, false, nil
	}
	n, isInt := v.Int()
	if !isInt || n < 0 || n > math.MaxInt32 {
		return 0, true, g.errorf("%s is %s %v; want a whole number", key, v.Describe(), v.Any())
	}
	return int(n), true, nil
}

// requiredInt reads a positive integer that must be there.
func (g *ggufCheckpoint) requiredInt(key string) (int, error) {
	n, ok, err := g.intKey(key)
	switch {
	case err != nil:
		return 0, err
	case !ok:
		return 0, g.errorf("the metadata has no %s; convert the model again with a current llama.cpp", key)
	case n == 0:
		return 0, g.errorf("%s is 0", key)
	}
	return n, nil
}

// floatKey reads a number of either float type; a missing key is 0, false.
func (g *ggufCheckpoint) floatKey(key string) (float64, bool, error) {
	v, ok := g.file.Lookup(key)
	if !ok {
		return 0, false, nil
	}
	x, isFloat := v.Float()
	if !isFloat {
		return 0, true, g.errorf("%s is %s, want a float", key, v.Describe())
	}
	return x, true, nil
}

// stringKey reads a string; a missing key is "", false.
func (g *ggufCheckpoint) stringKey(key string) (string, bool, error) {
	v, ok := g.file.Lookup(key)
	if !ok {
		return "", false, nil
	}
	s, isString := v.Str()
	if !isString {
		return "", true, g.errorf("%s is %s, want a string", key, v.Describe())
	}
	return s, true, nil
}

// readConfig maps the architecture's metadata onto Config, as llama.cpp's loader reads it.
func (g *ggufCheckpoint) readConfig() error {
	arch, _, err := g.stringKey("general.architecture")
	if err != nil {
		return err
	}
	family, ok := ggufArchitectures[arch]
	if !ok {
		if arch == "" {
			return g.errorf("the metadata has no general.architecture: not a model file")
		}
		return g.errorf("architecture %q (general.architecture) is not one tfd runs; it runs %s", arch,
			strings.Join(slices.Sorted(maps.Keys(ggufArchitectures)), ", "))
	}
	g.arch = arch
	c := Config{Architecture: family, Rope: RopeConfig{Type: "default", Theta: 10000}}
	key := func(name string) string { return arch + "." + name }
	for _, k := range []struct {
		dst  *int
		name string
	}{
		{&c.Layers, "block_count"}, {&c.Hidden, "embedding_length"}, {&c.Intermediate, "feed_forward_length"},
		{&c.Heads, "attention.head_count"}, {&c.MaxPositions, "context_length"},
	} {
		if *k.dst, err = g.requiredInt(key(k.name)); err != nil {
			return err
		}
	}
	if err := g.readHeads(&c, key); err != nil {
		return err
	}
	eps, ok, err := g.floatKey(key("attention.layer_norm_rms_epsilon"))
	if err != nil {
		return err
	}
	if !ok || eps <= 0 {
		return g.errorf("the metadata has no positive %s; convert the model again with a current llama.cpp", key("attention.layer_norm_rms_epsilon"))
	}
	c.NormEps = float32(eps)
	if err := g.readRope(&c, key); err != nil {
		return err
	}
	embed, ok := g.file.Tensor("token_embd.weight")
	if !ok || len(embed.Dims) != 2 {
		return g.errorf("the file has no 2-D tensor token_embd.weight")
	}
	c.Vocab = embed.Shape()[0]
	if n, ok, err := g.intKey(key("vocab_size")); err != nil {
		return err
	} else if ok && n != c.Vocab {
		return g.errorf("%s is %d, but token_embd.weight holds %d tokens", key("vocab_size"), n, c.Vocab)
	}
	_, hasHead := g.file.Tensor("output.weight")
	c.TieEmbeddings = !hasHead
	// Which biases a model has is known from its tensors; the forward adds those it is given.
	_, c.AttentionBias = g.file.Tensor("blk.0.attn_q.bias")
	_, c.OutputBias = g.file.Tensor("blk.0.attn_output.bias")
	_, c.MLPBias = g.file.Tensor("blk.0.ffn_gate.bias")
	c.QKNorm = arch == "qwen3" || arch == "qwen3moe" || arch == "gemma3" || arch == "qwen3next"
	switch arch {
	case "qwen3moe":
		if c.MoE, err = g.readExperts(key, c.Layers); err != nil {
			return err
		}
	case "gpt-oss":
		if c.MoE, err = g.readExperts(key, c.Layers); err != nil {
			return err
		}
		if err := g.readGptOss(key, &c); err != nil {
			return err
		}
	case "gemma3":
		if c.Gemma, err = g.readGemma3(key, &c); err != nil {
			return err
		}
	case "qwen3next":
		if err := g.readNext(key, &c); err != nil {
			return err
		}
	}
	if err := c.validate(); err != nil {
		return g.errorf("the metadata, read as config.json, is not a model tfd runs: %w", err)
	}
	g.cfg = c
	return nil
}

// readExperts reads a mixture of experts as llama.cpp's qwen3moe does: expert_count experts,
// expert_used_count of them a token, each of expert_feed_forward_length, their weights
// renormalised over the chosen ones (llama.cpp always does for qwen3moe; expert_weights_norm,
// where a file has it, says otherwise). llama.cpp makes every layer sparse; tfd also reads a layer
// without a router (blk.N.ffn_gate_inp) as a dense MLP, as Qwen3-MoE's mlp_only_layers makes it.
func (g *ggufCheckpoint) readExperts(key func(string) string, layers int) (MoEConfig, error) {
	m := MoEConfig{NormTopK: true, SparseStep: 1}
	var err error
	for _, k := range []struct {
		dst  *int
		name string
	}{{&m.Experts, "expert_count"}, {&m.PerToken, "expert_used_count"}, {&m.Intermediate, "expert_feed_forward_length"}} {
		if *k.dst, err = g.requiredInt(key(k.name)); err != nil {
			return m, err
		}
	}
	if v, ok := g.file.Lookup(key("expert_weights_norm")); ok {
		if m.NormTopK, ok = v.Bool(); !ok {
			return m, g.errorf("%s is %s, want a bool", key("expert_weights_norm"), v.Describe())
		}
	}
	for i := range layers {
		if _, sparse := g.file.Tensor(fmt.Sprintf("blk.%d.ffn_gate_inp.weight", i)); !sparse {
			m.DenseLayers = append(m.DenseLayers, i)
		}
	}
	return m, nil
}

// readHeads reads the attention's shape: key/value heads and the head size, which llama.cpp
// lets a file give apart from the hidden size.
func (g *ggufCheckpoint) readHeads(c *Config, key func(string) string) error {
	var err error
	var ok bool
	if c.KVHeads, ok, err = g.intKey(key("attention.head_count_kv")); err != nil {
		return err
	} else if !ok || c.KVHeads == 0 {
		c.KVHeads = c.Heads
	}
	if c.Heads%c.KVHeads != 0 {
		return g.errorf("%s (%d) is not a multiple of %s (%d)", key("attention.head_count"), c.Heads, key("attention.head_count_kv"), c.KVHeads)
	}
	if c.HeadDim, ok, err = g.intKey(key("attention.key_length")); err != nil {
		return err
	} else if !ok || c.HeadDim == 0 {
		c.HeadDim = c.Hidden / c.Heads
	}
	checked := []string{"attention.value_length", "rope.dimension_count"}
	if g.arch == "qwen3next" {
		checked = checked[:1] // its rotary dimensions are a part of the head: readNext reads them
	}
	for _, k := range checked {
		n, ok, err := g.intKey(key(k))
		if err != nil {
			return err
		}
		if ok && n != c.HeadDim {
			return g.errorf("%s is %d, the head size %d: tfd runs heads whose values and rotary embedding span the whole head", key(k), n, c.HeadDim)
		}
	}
	if c.HeadDim%2 != 0 {
		return g.errorf("the head size %d is odd; rotary embeddings need an even one", c.HeadDim)
	}
	return nil
}

// readRope reads the rotary embedding's base and scaling. Llama 3's scaling arrives as
// rope_freqs, a divisor per frequency, which llama.cpp reads for llama only.
func (g *ggufCheckpoint) readRope(c *Config, key func(string) string) error {
	if theta, ok, err := g.floatKey(key("rope.freq_base")); err != nil {
		return err
	} else if ok {
		c.Rope.Theta = theta
	}
	scaling, _, err := g.stringKey(key("rope.scaling.type"))
	if err != nil {
		return err
	}
	factor, hasFactor, err := g.floatKey(key("rope.scaling.factor"))
	if err != nil {
		return err
	}
	switch {
	case scaling == "" || scaling == "none" || hasFactor && factor == 1:
		// unscaled
	case scaling == "linear" && hasFactor && factor > 0:
		c.Rope.Type, c.Rope.Factor = "linear", factor
	case scaling == "yarn" && hasFactor && factor > 0:
		if err := g.readYarn(c, key, factor); err != nil {
			return err
		}
	default:
		return g.errorf("rope scaling %q (%s) is not supported; tfd runs no scaling, linear, yarn and Llama 3's", scaling, key("rope.scaling.type"))
	}
	t, ok := g.file.Tensor(ggufRopeFreqs)
	if !ok || g.arch != "llama" {
		return nil // elsewhere a rope_freqs is a tensor nothing reads, refused with the others
	}
	g.used[t.Name] = true
	if t.Type != gguf.F32 || len(t.Dims) != 1 || t.Dims[0] != int64(c.HeadDim/2) {
		return g.errorf("%s is %s %v; want F32 [%d]", t.Name, t.Type, t.Shape(), c.HeadDim/2)
	}
	c.Rope.FreqFactors = make([]float32, c.HeadDim/2)
	for i := range c.Rope.FreqFactors {
		c.Rope.FreqFactors[i] = math.Float32frombits(binary.LittleEndian.Uint32(t.Data[4*i:]))
		if !(c.Rope.FreqFactors[i] > 0) {
			return g.errorf("%s[%d] is %g; the divisors must be positive", t.Name, i, c.Rope.FreqFactors[i])
		}
	}
	return nil
}

// readYarn reads YaRN as the converter writes transformers' rope_parameters: the factor, the
// original context (llama.cpp's default, the context, where absent), the betas (32 and 1 where
// absent, as in both), and yarn_attn_factor as transformers' attention_factor (0.1·ln(factor) + 1
// where absent). llama.cpp rounds the correction range to whole dimensions; transformers does
// unless truncate is false, as GPT-OSS's config says, so tfd rounds for every architecture but
// gpt-oss.
func (g *ggufCheckpoint) readYarn(c *Config, key func(string) string, factor float64) error {
	r := RopeConfig{Type: "yarn", Theta: c.Rope.Theta, Factor: factor, BetaFast: 32, BetaSlow: 1, Truncate: g.arch != "gpt-oss"}
	orig, ok, err := g.intKey(key("rope.scaling.original_context_length"))
	if err != nil {
		return err
	}
	if !ok || orig == 0 {
		orig = c.MaxPositions
	}
	r.OriginalMaxPositionEmbs = orig
	for _, k := range []struct {
		dst  *float64
		name string
	}{{&r.BetaFast, "rope.scaling.yarn_beta_fast"}, {&r.BetaSlow, "rope.scaling.yarn_beta_slow"}} {
		if v, ok, err := g.floatKey(key(k.name)); err != nil {
			return err
		} else if ok {
			*k.dst = v
		}
	}
	r.AttentionFactor = yarnDefaultAttention(factor)
	if v, ok, err := g.floatKey(key("rope.scaling.yarn_attn_factor")); err != nil {
		return err
	} else if ok {
		r.AttentionFactor = v
	}
	c.Rope = r
	return nil
}

// tensor returns the tensor of a Hugging Face name from the file, in a Hugging Face checkpoint's
// layout: llama's q and k rows are put back in the order rotate-half RoPE pairs them (see
// ggufPermuteRows). A quantized row is whole blocks of its own elements, so rows move whole in
// the quantized types as in the float types.
func (g *ggufCheckpoint) tensor(hfName string) (stored, bool, error) {
	if g.arch == "qwen3next" {
		return g.nextTensor(hfName)
	}
	return g.plainTensor(hfName)
}

// plainTensor returns the tensor GGUF names for hfName, as tensor describes, without the
// rearrangements of an architecture's own reading.
func (g *ggufCheckpoint) plainTensor(hfName string) (stored, bool, error) {
	name, ok := ggufName(g.arch, hfName)
	if !ok {
		return stored{}, false, nil
	}
	return g.named(name, hfName)
}

// named returns the GGUF tensor name, read for the Hugging Face name hfName (which says whether
// it is one expert of a stack, or rows llama.cpp permuted); false when the file has no such tensor.
func (g *ggufCheckpoint) named(name, hfName string) (stored, bool, error) {
	t, ok := g.file.Tensor(name)
	if !ok {
		return stored{}, false, nil
	}
	g.used[name] = true
	if t.Type == gguf.MXFP4 && g.arch == "gpt-oss" && strings.HasSuffix(name, "_exps.weight") {
		// GPT-OSS's experts, the one place tfd runs MXFP4: regrouped into compute.MXFP4.
		data, err := ggufMXFP4ToCompute(t.Data, t.Shape())
		if err != nil {
			return stored{}, true, g.errorf("tensor %s: %w", name, err)
		}
		return stored{name: name, dtype: compute.MXFP4, shape: t.Shape(), data: data}, true, nil
	}
	dt, ok := ggufDType(t.Type)
	if !ok {
		return stored{}, true, g.errorf("tensor %s is %s, which this build of tfd does not run (it runs %s); convert the model again to one of them", name, t.Type, ggufRunsTypes)
	}
	s := stored{name: name, dtype: dt, shape: t.Shape(), data: t.Data}
	if _, e, ok := ggufExpert(hfName); ok {
		// One expert of the stack: its run of whole rows.
		if len(s.shape) != 3 || e >= s.shape[0] {
			return stored{}, true, g.errorf("tensor %s is %v; want [experts, rows, columns] with an expert %d", name, s.shape, e)
		}
		per := len(s.data) / s.shape[0]
		s.name, s.shape, s.data = fmt.Sprintf("%s[%d]", name, e), s.shape[1:], s.data[e*per:(e+1)*per]
	}
	if heads := ggufPermutedHeads(g.arch, g.cfg, hfName); heads > 0 {
		var err error
		if s.data, err = ggufPermuteRows(s.data, s.shape[0], heads, false); err != nil {
			return stored{}, true, g.errorf("tensor %s: %w", name, err)
		}
	}
	return s, true, nil
}

func (g *ggufCheckpoint) count() int { return len(g.file.Tensors) }

func (g *ggufCheckpoint) each(fn func(name, dtype string, shape []int, data []byte)) {
	for _, t := range g.file.Tensors {
		fn(t.Name, t.Type.String(), t.Shape(), t.Data)
	}
}

func (g *ggufCheckpoint) fileName(hfName string) string {
	if g.arch == "qwen3next" {
		if n, ok := ggufNextHeadNames[hfName]; ok {
			return fmt.Sprintf(n, g.cfg.Layers)
		}
		hfName = nextMTPLayerName(hfName, g.cfg.Layers)
	}
	if n, e, ok := ggufExpert(hfName); ok {
		return fmt.Sprintf("%s[%d]", n, e)
	}
	if n, ok := ggufName(g.arch, hfName); ok {
		return n
	}
	return hfName
}

func (g *ggufCheckpoint) configName() string { return "the GGUF metadata" }

// done refuses tensors no part of the model read, as llama.cpp's loader does: a file with more
// than its architecture holds is another model (a reranker's head, a fused projection), which
// would run silently wrong.
func (g *ggufCheckpoint) done() error {
	var extra []string
	for _, t := range g.file.Tensors {
		if !g.used[t.Name] {
			extra = append(extra, t.Name)
		}
	}
	if len(extra) == 0 {
		return nil
	}
	if len(extra) > 4 {
		extra = append(extra[:4], fmt.Sprintf("and %d more", len(extra)-4))
	}
	return g.errorf("the file holds tensors that %s does not have (%s): it is not a model tfd runs", g.arch, strings.Join(extra, ", "))
}

func (g *ggufCheckpoint) close() error { return g.file.Close() }

func (g *ggufCheckpoint) release(data []byte) { g.file.Release(data) }
