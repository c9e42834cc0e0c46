package engine

import (
	"encoding/json"
	"fmt"
)

// GPT-OSS (GptOssForCausalLM) is a mixture of experts in every layer, with the attention of the
// Llama family plus biases and a sink per head, layers that alternate between a sliding window
// and full attention, and YaRN rope. Its experts have biases and a clamped SwiGLU, and its router
// a bias; openai/gpt-oss-20b ships the experts' matrices as MXFP4.

// SwiGLUAlpha is GPT-OSS's fixed sigmoid slope in its clamped SwiGLU (GptOssExperts.alpha).
const SwiGLUAlpha = 1.702

// gptOssRaw mirrors the config.json keys of GptOssConfig beyond rawConfig's. A key left out takes
// GptOssConfig's default, as transformers would.
type gptOssRaw struct {
	AttentionBias      *bool    `json:"attention_bias"`
	SlidingWindow      *int     `json:"sliding_window"`
	LayerTypes         []string `json:"layer_types"`
	SwiGLULimit        *float64 `json:"swiglu_limit"`
	QuantizationConfig *struct {
		QuantMethod string `json:"quant_method"`
	} `json:"quantization_config"`
}

// parseGptOss fills what a GptOssForCausalLM config.json says beyond the common keys: the
// attention's biases, the sliding layers, the experts' activation and storage, and the rope.
func parseGptOss(c *Config, raw *rawConfig, data []byte) error {
	var g gptOssRaw
	if err := json.Unmarshal(data, &g); err != nil {
		return fmt.Errorf("engine: config.json: %w", err)
	}
	c.AttentionBias = g.AttentionBias == nil || *g.AttentionBias
	c.OutputBias = c.AttentionBias
	c.SlidingWindow = 128
	if g.SlidingWindow != nil {
		c.SlidingWindow = *g.SlidingWindow
	}
	if c.SlidingWindow <= 0 {
		return fmt.Errorf("engine: config.json: sliding_window must be positive, got %d", c.SlidingWindow)
	}
	var err error
	if g.LayerTypes != nil {
		if c.Sliding, err = slidingLayers(g.LayerTypes, c.Layers); err != nil {
			return err
		}
	} else {
		// GptOssConfig's default: every other layer slides, the first among them.
		c.Sliding = make([]bool, c.Layers)
		for i := range c.Sliding {
			c.Sliding[i] = (i+1)%2 != 0
		}
	}
	// The MoE: every layer sparse, the experts intermediate_size wide, their weights the
	// softmax over the chosen (transformers takes the top k of the logits, then the softmax of
	// those k: the softmax over all, renormalised over the k, as RouteTopK computes it).
	m := &c.MoE
	m.Intermediate = c.Intermediate
	if raw.NumLocalExperts == nil && raw.NumExperts == nil {
		m.Experts = 128
	}
	if raw.NumExpertsPerTok == nil {
		m.PerToken = 4
	}
	m.NormTopK, m.SparseStep, m.DenseLayers, m.Biases = true, 1, nil, true
	m.SwiGLULimit = 7
	if g.SwiGLULimit != nil {
		m.SwiGLULimit = float32(*g.SwiGLULimit)
	}
	if m.SwiGLULimit <= 0 {
		return fmt.Errorf("engine: config.json: swiglu_limit must be positive, got %g", m.SwiGLULimit)
	}
	if q := g.QuantizationConfig; q != nil {
		if q.QuantMethod != "mxfp4" {
			return fmt.Errorf("engine: config.json: quantization_config.quant_method %q; tfd runs GPT-OSS in bf16 or as openai ships it, mxfp4", q.QuantMethod)
		}
		m.MXFP4 = true
	}
	if raw.RopeParameters == nil && raw.RopeScaling == nil {
		// GptOssConfig's default rope_scaling.
		truncate := false
		raw.RopeScaling = &ropeParams{RopeType: "yarn", Factor: 32, BetaFast: 32, BetaSlow: 1, Truncate: &truncate,
			OriginalMaxPositionEmbeddings: 4096}
	}
	if raw.RopeTheta == 0 {
		raw.RopeTheta = 150000
	}
	if c.Rope, err = parseRope(raw); err != nil {
		return err
	}
	return nil
}
