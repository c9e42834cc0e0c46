package engine

import (
	"encoding/json"
	"fmt"
)

// NextConfig is what Qwen3-Next (Qwen3NextForCausalLM) does beyond Qwen3-MoE: most layers are
// gated DeltaNet layers (linear attention with a recurrent state per sequence) rather than
// attention; the attention layers gate their output by a sigmoid of a second half of q_proj and
// turn only the first RotaryDim dimensions of each head; every RMSNorm but the DeltaNet's own
// scales by (1 + w); and each mixture of experts adds a shared expert scaled by a sigmoid gate.
type NextConfig struct {
	Enabled bool
	// Linear[i] says that layer i is a gated DeltaNet layer; the others are full attention.
	Linear []bool
	// The DeltaNet layers' heads: KHeads query/key heads of KDim, VHeads value heads of VDim
	// (a multiple of KHeads), and the causal convolution's kernel.
	KHeads, VHeads, KDim, VDim int
	ConvKernel                 int
	// RotaryDim is how many leading dimensions of each attention head RoPE turns.
	RotaryDim int
	// SharedIntermediate is the width of each sparse layer's shared expert (0: none).
	SharedIntermediate int
}

// Delta returns the DeltaNet layers' head shapes.
func (n NextConfig) Delta() (kHeads, vHeads, kDim, vDim int) {
	return n.KHeads, n.VHeads, n.KDim, n.VDim
}

// ConvChannels returns the channels of a DeltaNet layer's convolution: its queries, keys and values.
func (n NextConfig) ConvChannels() int { return 2*n.KHeads*n.KDim + n.VHeads*n.VDim }

// LinearLayers counts the gated DeltaNet layers.
func (n NextConfig) LinearLayers() int {
	count := 0
	for _, l := range n.Linear {
		if l {
			count++
		}
	}
	return count
}

// nextRaw mirrors the config.json keys of Qwen3NextConfig beyond rawConfig's. A key left out
// takes Qwen3NextConfig's default, as transformers would.
type nextRaw struct {
	LinearNumKeyHeads            *int     `json:"linear_num_key_heads"`
	LinearNumValueHeads          *int     `json:"linear_num_value_heads"`
	LinearKeyHeadDim             *int     `json:"linear_key_head_dim"`
	LinearValueHeadDim           *int     `json:"linear_value_head_dim"`
	LinearConvKernelDim          *int     `json:"linear_conv_kernel_dim"`
	LayerTypes                   []string `json:"layer_types"`
	FullAttentionInterval        *int     `json:"full_attention_interval"`
	PartialRotaryFactor          *float64 `json:"partial_rotary_factor"`
	SharedExpertIntermediateSize *int     `json:"shared_expert_intermediate_size"`
	NormTopKProb                 *bool    `json:"norm_topk_prob"`
	NumExperts                   *int     `json:"num_experts"`
	NumExpertsPerTok             *int     `json:"num_experts_per_tok"`
	MoEIntermediateSize          *int     `json:"moe_intermediate_size"`
	HeadDim                      *int     `json:"head_dim"`
	RopeParameters               *struct {
		PartialRotaryFactor *float64 `json:"partial_rotary_factor"`
	} `json:"rope_parameters"`
}

// parseNext fills c.Next, and the mixture of experts with Qwen3NextConfig's defaults, from a
// Qwen3NextForCausalLM config.json.
func parseNext(c *Config, raw *rawConfig, data []byte) error {
	var nr nextRaw
	if err := json.Unmarshal(data, &nr); err != nil {
		return fmt.Errorf("engine: config.json: %w", err)
	}
	or := func(v *int, def int) int {
		if v != nil {
			return *v
		}
		return def
	}
	if nr.HeadDim == nil {
		c.HeadDim = 256 // Qwen3NextConfig's default, not hidden/heads
	}
	// Qwen3NextConfig's defaults differ from Qwen3MoeConfig's.
	raw.NumExperts = ptr(or(nr.NumExperts, 512))
	raw.NumExpertsPerTok = ptr(or(nr.NumExpertsPerTok, 10))
	raw.MoEIntermediateSize = ptr(or(nr.MoEIntermediateSize, 512))
	raw.NormTopKProb = nr.NormTopKProb == nil || *nr.NormTopKProb
	c.MoE = raw.moe()
	n := NextConfig{
		Enabled:            true,
		KHeads:             or(nr.LinearNumKeyHeads, 16),
		VHeads:             or(nr.LinearNumValueHeads, 32),
		KDim:               or(nr.LinearKeyHeadDim, 128),
		VDim:               or(nr.LinearValueHeadDim, 128),
		ConvKernel:         or(nr.LinearConvKernelDim, 4),
		SharedIntermediate: or(nr.SharedExpertIntermediateSize, 512),
		Linear:             make([]bool, c.Layers),
	}
	factor := 0.25
	switch {
	case nr.RopeParameters != nil && nr.RopeParameters.PartialRotaryFactor != nil:
		factor = *nr.RopeParameters.PartialRotaryFactor
	case nr.PartialRotaryFactor != nil:
		factor = *nr.PartialRotaryFactor
	}
	n.RotaryDim = int(float64(c.HeadDim) * factor) // transformers' int(head_dim * factor)
	switch {
	case nr.LayerTypes != nil:
		if len(nr.LayerTypes) != c.Layers {
			return fmt.Errorf("engine: config.json: layer_types names %d layers; num_hidden_layers is %d", len(nr.LayerTypes), c.Layers)
		}
		for i, t := range nr.LayerTypes {
			switch t {
			case "linear_attention":
				n.Linear[i] = true
			case "full_attention":
			default:
				return fmt.Errorf("engine: config.json: layer_types[%d] = %q; tfd runs linear_attention and full_attention", i, t)
			}
		}
	default:
		interval := or(nr.FullAttentionInterval, 4)
		if interval <= 0 {
			return fmt.Errorf("engine: config.json: full_attention_interval must be positive, got %d", interval)
		}
		for i := range n.Linear {
			n.Linear[i] = (i+1)%interval != 0
		}
	}
	switch {
	case n.KHeads <= 0 || n.VHeads <= 0 || n.KDim <= 0 || n.VDim <= 0:
		return fmt.Errorf("engine: config.json: the linear attention's heads must be positive, got %d key heads of %d and %d value heads of %d", n.KHeads, n.KDim, n.VHeads, n.VDim)
	case n.VHeads%n.KHeads != 0:
		return fmt.Errorf("engine: config.json: linear_num_value_heads (%d) must be a multiple of linear_num_key_heads (%d)", n.VHeads, n.KHeads)
	case n.ConvKernel < 1:
		return fmt.Errorf("engine: config.json: linear_conv_kernel_dim must be positive, got %d", n.ConvKernel)
	case n.RotaryDim <= 0 || n.RotaryDim%2 != 0 || n.RotaryDim > c.HeadDim:
		return fmt.Errorf("engine: config.json: partial_rotary_factor %g of head_dim %d gives %d rotary dimensions; tfd wants an even number up to head_dim", factor, c.HeadDim, n.RotaryDim)
	case c.MoE.Experts > 0 && n.SharedIntermediate < 0:
		return fmt.Errorf("engine: config.json: shared_expert_intermediate_size must not be negative, got %d", n.SharedIntermediate)
	}
	c.Next = n
	return nil
}

func ptr[T any](v T) *T { return &v }
