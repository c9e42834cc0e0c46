package engine

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Config is the part of a Hugging Face config.json the forward pass needs, normalised across the
// families: derived sizes are filled in and family defaults applied.
type Config struct {
	Architecture  string
	Hidden        int
	Intermediate  int
	Layers        int
	Heads         int
	KVHeads       int
	HeadDim       int
	Vocab         int
	NormEps       float32
	MaxPositions  int
	TieEmbeddings bool

	// AttentionBias adds a bias to the q, k and v projections; OutputBias to o_proj too.
	AttentionBias bool
	OutputBias    bool
	MLPBias       bool
	// QKNorm applies a per-head RMSNorm to queries and keys before RoPE (Qwen3).
	QKNorm bool

	Rope RopeConfig

	// SlidingWindow is how many keys a sliding layer's query sees, itself included (a key at
	// position p is seen from position q when q−SlidingWindow < p ≤ q); Sliding[i] says which
	// layers slide (Gemma 3, GPT-OSS). Sliding is nil in a model without sliding layers.
	SlidingWindow int
	Sliding       []bool

	// AttentionSinks gives each layer's query heads a learned logit that joins the softmax's
	// denominator (GPT-OSS's self_attn.sinks).
	AttentionSinks bool

	// MTPLayers is the number of multi-token-prediction layers stored under mtp.* (0: none).
	MTPLayers int

	// MoE is the mixture of experts of a sparse model (Qwen3-MoE); its zero value is a dense one.
	MoE MoEConfig

	// Gemma holds what Gemma 3 adds; its zero value is a Llama/Qwen model.
	Gemma GemmaConfig

	// Next holds what Qwen3-Next adds; its zero value is another family.
	Next NextConfig
}

// GemmaConfig is what Gemma 3's text model (Gemma3ForCausalLM) does beyond the Llama/Qwen
// families: four norms per layer whose weights w act as (1 + w), the output of attention and of
// the MLP each normed before its residual add; embeddings scaled by √hidden; a GELU-tanh gated
// MLP; attention scores scaled by 1/√query_pre_attn_scalar; sliding-window layers with a rope of
// their own beside global ones (Config.Sliding); and the final logits soft-capped.
type GemmaConfig struct {
	Enabled bool
	// QueryPreAttnScalar replaces head_dim in the attention's 1/√ scale.
	QueryPreAttnScalar float64
	// LocalRope turns the sliding layers' queries and keys; Config.Rope the global layers'.
	LocalRope RopeConfig
	// FinalSoftcap, when positive, maps the logits z to cap·tanh(z/cap).
	FinalSoftcap float64
}

// MoEConfig describes a mixture-of-experts MLP as Qwen3-MoE has it: in each sparse layer a router
// scores every expert for a row, the row goes through its PerToken best (each a SwiGLU of
// Intermediate), and their outputs are summed, weighted by the router's softmax (over all
// experts, then renormalised over the chosen ones when NormTopK). The other layers keep a dense
// MLP of Config.Intermediate. GPT-OSS adds biases and a clamped SwiGLU (SwiGLULimit).
type MoEConfig struct {
	Experts      int // 0: a dense model
	PerToken     int
	Intermediate int
	NormTopK     bool
	// Biases: the router and every expert's projections have biases (GPT-OSS).
	Biases bool
	// SwiGLULimit, when positive, makes each expert's activation GPT-OSS's clamped SwiGLU
	// (compute.Ops.ClampedSwiGLU with alpha SwiGLUAlpha and this limit) instead of SiLU·up.
	SwiGLULimit float32
	// MXFP4: the experts' matrices are stored as MXFP4 blocks and scales
	// (quantization_config.quant_method "mxfp4"), the form openai/gpt-oss-20b ships.
	MXFP4 bool
	// SparseStep and DenseLayers say which layers are sparse, as transformers reads
	// decoder_sparse_step and mlp_only_layers: layer i is sparse unless it is listed in
	// DenseLayers or (i+1) is no multiple of SparseStep.
	SparseStep  int
	DenseLayers []int
}

// Sparse reports whether decoder layer i has a mixture of experts rather than a dense MLP.
func (m MoEConfig) Sparse(i int) bool {
	return m.Experts > 0 && !slices.Contains(m.DenseLayers, i) && (i+1)%m.SparseStep == 0
}

// SparseLayers counts the decoder layers, of layers, that have a mixture of experts.
func (m MoEConfig) SparseLayers(layers int) int {
	n := 0
	for i := range layers {
		if m.Sparse(i) {
			n++
		}
	}
	return n
}

// RopeConfig is the rotary embedding's base and optional scaling.
type RopeConfig struct {
	Theta float64
	// Type is "default", "linear", "llama3" or "yarn"; the fields below apply to the scalings
	// that name them.
	Type                    string
	Factor                  float64
	LowFreqFactor           float64
	HighFreqFactor          float64
	OriginalMaxPositionEmbs int
	// YaRN: the correction range's rotations, whether its ends are rounded to whole dimensions,
	// and the factor transformers multiplies cos and sin by (the model folds it into the
	// attention's scale).
	BetaFast, BetaSlow float64
	Truncate           bool
	AttentionFactor    float64
	// FreqFactors, when set, divides each inverse frequency: llama.cpp's rope_freqs tensor, the
	// form in which GGUF files carry Llama 3's scaling (Type stays "default").
	FreqFactors []float32
}

// KVLayers returns how many of the decoder layers keep keys and values: all of them, but in a
// hybrid model (Qwen3-Next) only its attention layers.
func (c Config) KVLayers() int {
	if c.Next.Enabled {
		return c.Layers - c.Next.LinearLayers()
	}
	return c.Layers
}

// family says how one architecture name maps onto Config.
type family struct {
	// apply sets what the architecture fixes, from the raw config.
	apply func(c *Config, raw *rawConfig)
}

var families = map[string]family{
	"LlamaForCausalLM": {apply: func(c *Config, raw *rawConfig) {
		c.AttentionBias = raw.AttentionBias
		c.OutputBias = raw.AttentionBias
		c.MLPBias = raw.MLPBias
	}},
	"Qwen2ForCausalLM": {apply: func(c *Config, raw *rawConfig) {
		// Qwen2 always has q/k/v biases and none on o_proj.
		c.AttentionBias = true
	}},
	"Qwen3ForCausalLM": {apply: func(c *Config, raw *rawConfig) {
		c.AttentionBias = raw.AttentionBias
		c.OutputBias = raw.AttentionBias
		c.QKNorm = true
	}},
	"Gemma3ForCausalLM": {apply: func(c *Config, raw *rawConfig) {
		c.AttentionBias = raw.AttentionBias
		c.OutputBias = raw.AttentionBias
		c.QKNorm = true
		// Gemma3TextConfig ties by default; save_pretrained leaves the default out.
		c.TieEmbeddings = raw.TieWordEmbeddings == nil || *raw.TieWordEmbeddings
	}},
	"Qwen3NextForCausalLM": {apply: func(c *Config, raw *rawConfig) {
		c.AttentionBias = raw.AttentionBias
		c.OutputBias = raw.AttentionBias
		c.QKNorm = true
		// The mixture and the rest: parseNext, which reads keys rawConfig does not.
	}},
	"GptOssForCausalLM": {apply: func(c *Config, raw *rawConfig) {
		// parseGptOss reads the rest: attention_bias defaults to true there.
		c.AttentionSinks = true
		c.MoE = raw.moe()
	}},
	"Qwen3MoeForCausalLM": {apply: func(c *Config, raw *rawConfig) {
		c.AttentionBias = raw.AttentionBias
		c.OutputBias = raw.AttentionBias
		c.QKNorm = true
		c.MoE = raw.moe()
	}},
}

// Architectures returns the sorted architecture names the engine runs.
func Architectures() []string {
	names := make([]string, 0, len(families))
	for name := range families {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// rawConfig mirrors the config.json keys we read. transformers 5 moved rope_theta and rope_scaling
// into rope_parameters; both spellings are accepted.
type rawConfig struct {
	Architectures         []string    `json:"architectures"`
	HiddenSize            int         `json:"hidden_size"`
	IntermediateSize      int         `json:"intermediate_size"`
	NumHiddenLayers       int         `json:"num_hidden_layers"`
	NumAttentionHeads     int         `json:"num_attention_heads"`
	NumKeyValueHeads      int         `json:"num_key_value_heads"`
	HeadDim               int         `json:"head_dim"`
	VocabSize             int         `json:"vocab_size"`
	RMSNormEps            float64     `json:"rms_norm_eps"`
	MaxPositionEmbeddings int         `json:"max_position_embeddings"`
	TieWordEmbeddings     *bool       `json:"tie_word_embeddings"`
	AttentionBias         bool        `json:"attention_bias"`
	MLPBias               bool        `json:"mlp_bias"`
	RopeTheta             float64     `json:"rope_theta"`
	RopeScaling           *ropeParams `json:"rope_scaling"`
	RopeParameters        *ropeParams `json:"rope_parameters"`
	MTPNumHiddenLayers    int         `json:"mtp_num_hidden_layers"`
	HiddenAct             string      `json:"hidden_act"`

	// Qwen3-MoE. transformers 5 writes num_experts as num_local_experts; a key left out takes
	// Qwen3MoeConfig's default, as transformers would.
	NumExperts          *int  `json:"num_experts"`
	NumLocalExperts     *int  `json:"num_local_experts"`
	NumExpertsPerTok    *int  `json:"num_experts_per_tok"`
	MoEIntermediateSize *int  `json:"moe_intermediate_size"`
	NormTopKProb        bool  `json:"norm_topk_prob"`
	DecoderSparseStep   *int  `json:"decoder_sparse_step"`
	MLPOnlyLayers       []int `json:"mlp_only_layers"`
}

// moe reads the mixture of experts of a Qwen3-MoE config.json, with Qwen3MoeConfig's defaults
// (128 experts, 8 a token, 768 wide, sparse step 1) for keys it leaves out.
func (raw *rawConfig) moe() MoEConfig {
	or := func(v *int, def int) int {
		if v != nil {
			return *v
		}
		return def
	}
	experts := or(raw.NumExperts, or(raw.NumLocalExperts, 128))
	return MoEConfig{
		Experts:      experts,
		PerToken:     or(raw.NumExpertsPerTok, 8),
		Intermediate: or(raw.MoEIntermediateSize, 768),
		NormTopK:     raw.NormTopKProb,
		SparseStep:   or(raw.DecoderSparseStep, 1),
		DenseLayers:  slices.Sorted(slices.Values(raw.MLPOnlyLayers)),
	}
}

type ropeParams struct {
	RopeType                      string  `json:"rope_type"`
	Type                          string  `json:"type"` // older spelling of rope_type
	RopeTheta                     float64 `json:"rope_theta"`
	Factor                        float64 `json:"factor"`
	LowFreqFactor                 float64 `json:"low_freq_factor"`
	HighFreqFactor                float64 `json:"high_freq_factor"`
	OriginalMaxPositionEmbeddings int     `json:"original_max_position_embeddings"`
	// YaRN's; transformers takes 32 and 1 for a beta left out or 0, truncate true when left out.
	BetaFast        float64  `json:"beta_fast"`
	BetaSlow        float64  `json:"beta_slow"`
	Truncate        *bool    `json:"truncate"`
	AttentionFactor *float64 `json:"attention_factor"`
	MScale          float64  `json:"mscale"`
	MScaleAllDim    float64  `json:"mscale_all_dim"`
}

// ParseConfig reads a config.json and checks that the engine can run it. An architecture it
// cannot run is refused with the list of those it can.
func ParseConfig(data []byte) (Config, error) {
	var raw rawConfig
	if err := json.Unmarshal(data, &raw); err != nil {
		return Config{}, fmt.Errorf("engine: config.json: %w", err)
	}
	if len(raw.Architectures) != 1 {
		return Config{}, fmt.Errorf("engine: config.json: architectures = %v, want exactly one of %s",
			raw.Architectures, strings.Join(Architectures(), ", "))
	}
	arch := raw.Architectures[0]
	fam, ok := families[arch]
	if !ok {
		return Config{}, fmt.Errorf("engine: config.json: architecture %s is not supported; tfd runs %s",
			arch, strings.Join(Architectures(), ", "))
	}
	c := Config{
		Architecture: arch,
		Hidden:       raw.HiddenSize,
		Intermediate: raw.IntermediateSize,
		Layers:       raw.NumHiddenLayers,
		Heads:        raw.NumAttentionHeads,
		KVHeads:      raw.NumKeyValueHeads,
		HeadDim:      raw.HeadDim,
		Vocab:        raw.VocabSize,
		NormEps:      float32(raw.RMSNormEps),
		MaxPositions: raw.MaxPositionEmbeddings,
		// The families' classes default tie_word_embeddings to false and save_pretrained omits
		// defaults; the weights loader ties anyway when the checkpoint has no lm_head.weight.
		TieEmbeddings: raw.TieWordEmbeddings != nil && *raw.TieWordEmbeddings,
		MTPLayers:     raw.MTPNumHiddenLayers,
	}
	if c.KVHeads == 0 {
		c.KVHeads = c.Heads
	}
	if c.HeadDim == 0 && c.Heads > 0 {
		c.HeadDim = c.Hidden / c.Heads
	}
	if c.NormEps == 0 {
		c.NormEps = 1e-6
	}
	fam.apply(&c, &raw)
	switch arch {
	case "Gemma3ForCausalLM":
		if err := parseGemma3(&c, data); err != nil {
			return Config{}, err
		}
		return c, c.validate()
	case "GptOssForCausalLM":
		if err := parseGptOss(&c, &raw, data); err != nil {
			return Config{}, err
		}
		return c, c.validate()
	}
	if arch == "Qwen3NextForCausalLM" {
		if err := parseNext(&c, &raw, data); err != nil {
			return Config{}, err
		}
	}
	rope, err := parseRope(&raw)
	if err != nil {
		return Config{}, err
	}
	c.Rope = rope
	if raw.HiddenAct != "" && raw.HiddenAct != "silu" {
		return Config{}, fmt.Errorf("engine: config.json: hidden_act %q is not supported (tfd runs silu)", raw.HiddenAct)
	}
	return c, c.validate()
}

func parseRope(raw *rawConfig) (RopeConfig, error) {
	p := raw.RopeParameters
	if p == nil {
		p = raw.RopeScaling
	}
	r := RopeConfig{Theta: raw.RopeTheta, Type: "default"}
	if p != nil {
		if p.RopeTheta != 0 {
			r.Theta = p.RopeTheta
		}
		typ := p.RopeType
		if typ == "" {
			typ = p.Type
		}
		if typ != "" {
			r.Type = typ
		}
		r.Factor = p.Factor
		r.LowFreqFactor = p.LowFreqFactor
		r.HighFreqFactor = p.HighFreqFactor
		r.OriginalMaxPositionEmbs = p.OriginalMaxPositionEmbeddings
	}
	if r.Theta == 0 {
		r.Theta = 10000
	}
	switch r.Type {
	case "default":
	case "linear":
		if r.Factor <= 0 {
			return r, fmt.Errorf("engine: config.json: linear rope scaling needs factor > 0; got %+v", *p)
		}
	case "llama3":
		if r.Factor <= 0 || r.HighFreqFactor <= r.LowFreqFactor || r.OriginalMaxPositionEmbs <= 0 {
			return r, fmt.Errorf("engine: config.json: llama3 rope scaling needs factor > 0, high_freq_factor > low_freq_factor and original_max_position_embeddings > 0; got %+v", *p)
		}
	case "yarn":
		if p.Factor == 0 && p.OriginalMaxPositionEmbeddings > 0 {
			// transformers: the ratio of the context to the original one.
			r.Factor = float64(raw.MaxPositionEmbeddings) / float64(p.OriginalMaxPositionEmbeddings)
		}
		if r.Factor <= 0 || r.OriginalMaxPositionEmbs <= 0 {
			return r, fmt.Errorf("engine: config.json: yarn rope scaling needs factor > 0 and original_max_position_embeddings > 0; got %+v", *p)
		}
		r.BetaFast, r.BetaSlow, r.Truncate = p.BetaFast, p.BetaSlow, p.Truncate == nil || *p.Truncate
		r.AttentionFactor = yarnAttentionFactor(p, r.Factor)
	default:
		return r, fmt.Errorf("engine: config.json: rope type %q is not supported (tfd runs default, linear, llama3 and yarn)", r.Type)
	}
	return r, nil
}

// slidingLayers reads layer_types: which of layers layers slide ("sliding_attention") and which
// attend to everything ("full_attention").
func slidingLayers(types []string, layers int) ([]bool, error) {
	if len(types) != layers {
		return nil, fmt.Errorf("engine: config.json: layer_types names %d layers; num_hidden_layers is %d", len(types), layers)
	}
	sliding := make([]bool, layers)
	for i, t := range types {
		switch t {
		case "sliding_attention":
			sliding[i] = true
		case "full_attention":
		default:
			return nil, fmt.Errorf("engine: config.json: layer_types[%d] = %q; tfd runs sliding_attention and full_attention", i, t)
		}
	}
	return sliding, nil
}

func (c Config) validate() error {
	positive := []struct {
		key string
		v   int
	}{
		{"hidden_size", c.Hidden}, {"intermediate_size", c.Intermediate},
		{"num_hidden_layers", c.Layers}, {"num_attention_heads", c.Heads},
		{"num_key_value_heads", c.KVHeads}, {"head_dim", c.HeadDim},
		{"vocab_size", c.Vocab}, {"max_position_embeddings", c.MaxPositions},
	}
	for _, p := range positive {
		if p.v <= 0 {
			return fmt.Errorf("engine: config.json: %s must be positive, got %d", p.key, p.v)
		}
	}
	if c.Heads%c.KVHeads != 0 {
		return fmt.Errorf("engine: config.json: num_attention_heads (%d) must be a multiple of num_key_value_heads (%d)", c.Heads, c.KVHeads)
	}
	if c.HeadDim%2 != 0 {
		return fmt.Errorf("engine: config.json: head_dim %d must be even for RoPE", c.HeadDim)
	}
	return c.MoE.validate(c.Layers)
}

func (m MoEConfig) validate(layers int) error {
	switch {
	case m.Experts == 0 && m.PerToken == 0:
		return nil // dense
	case m.Experts <= 0:
		return fmt.Errorf("engine: config.json: num_experts must be positive, got %d", m.Experts)
	case m.PerToken <= 0 || m.PerToken > m.Experts:
		return fmt.Errorf("engine: config.json: num_experts_per_tok must be 1 to num_experts (%d), got %d", m.Experts, m.PerToken)
	case m.Intermediate <= 0:
		return fmt.Errorf("engine: config.json: moe_intermediate_size must be positive, got %d", m.Intermediate)
	case m.SparseStep <= 0:
		return fmt.Errorf("engine: config.json: decoder_sparse_step must be positive, got %d", m.SparseStep)
	}
	for _, l := range m.DenseLayers {
		if l < 0 || l >= layers {
			return fmt.Errorf("engine: config.json: mlp_only_layers names layer %d; the model has layers 0 to %d", l, layers-1)
		}
	}
	return nil
}
