package engine

import (
	"math"
	"strings"
	"testing"
)

func TestParseConfigFamilies(t *testing.T) {
	base := `"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
		"num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 512,
		"max_position_embeddings": 256, "rms_norm_eps": 1e-5`
	tests := []struct {
		name, json string
		check      func(c Config) bool
	}{
		{"qwen2 has q/k/v bias, no o bias", `{"architectures": ["Qwen2ForCausalLM"], ` + base + `}`,
			func(c Config) bool { return c.AttentionBias && !c.OutputBias && !c.QKNorm && c.HeadDim == 16 }},
		{"qwen3 has q/k norm and an explicit head_dim", `{"architectures": ["Qwen3ForCausalLM"], "head_dim": 32, ` + base + `}`,
			func(c Config) bool { return c.QKNorm && !c.AttentionBias && c.HeadDim == 32 }},
		{"llama attention_bias covers o_proj", `{"architectures": ["LlamaForCausalLM"], "attention_bias": true, ` + base + `}`,
			func(c Config) bool { return c.AttentionBias && c.OutputBias }},
		{"qwen3 moe as transformers 5 writes it: num_local_experts, a dense layer", `{"architectures": ["Qwen3MoeForCausalLM"], "head_dim": 16, ` + base + `,
			"num_local_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 48, "norm_topk_prob": true,
			"decoder_sparse_step": 1, "mlp_only_layers": [1]}`,
			func(c Config) bool {
				m := c.MoE
				return c.QKNorm && m.Experts == 8 && m.PerToken == 2 && m.Intermediate == 48 && m.NormTopK &&
					m.Sparse(0) && !m.Sparse(1) && m.SparseLayers(c.Layers) == 1
			}},
		{"qwen3 moe defaults as Qwen3MoeConfig's, sparse every other layer", `{"architectures": ["Qwen3MoeForCausalLM"], ` + base + `,
			"decoder_sparse_step": 2}`,
			func(c Config) bool {
				m := c.MoE
				return m.Experts == 128 && m.PerToken == 8 && m.Intermediate == 768 && !m.NormTopK && !m.Sparse(0) && m.Sparse(1)
			}},
		{"dense families have no experts", `{"architectures": ["Qwen3ForCausalLM"], "num_experts": 8, ` + base + `}`,
			func(c Config) bool { return c.MoE.Experts == 0 && !c.MoE.Sparse(0) }},
		{"transformers 5 rope_parameters", `{"architectures": ["LlamaForCausalLM"], ` + base + `,
			"rope_parameters": {"rope_type": "llama3", "rope_theta": 500000, "factor": 8, "low_freq_factor": 1, "high_freq_factor": 4, "original_max_position_embeddings": 64}}`,
			func(c Config) bool {
				return c.Rope.Type == "llama3" && c.Rope.Theta == 500000 && c.Rope.OriginalMaxPositionEmbs == 64
			}},
		{"gemma 3 as the Hub ships it: rope_local_base_freq, rope_scaling, sliding_window_pattern", `{"architectures": ["Gemma3ForCausalLM"], ` + base + `,
			"head_dim": 16, "query_pre_attn_scalar": 24, "rope_theta": 1000000, "rope_local_base_freq": 10000,
			"rope_scaling": {"rope_type": "linear", "factor": 8}, "sliding_window": 512, "sliding_window_pattern": 2,
			"final_logit_softcapping": null, "attn_logit_softcapping": null, "hidden_activation": "gelu_pytorch_tanh"}`,
			func(c Config) bool {
				g := c.Gemma
				return g.Enabled && c.QKNorm && c.TieEmbeddings && g.QueryPreAttnScalar == 24 && c.SlidingWindow == 512 &&
					c.Sliding[0] && !c.Sliding[1] && g.FinalSoftcap == 0 &&
					c.Rope.Type == "linear" && c.Rope.Factor == 8 && c.Rope.Theta == 1e6 &&
					g.LocalRope.Type == "default" && g.LocalRope.Theta == 1e4
			}},
		{"gemma 3 as transformers 5 writes it: rope_parameters by layer type, layer_types", `{"architectures": ["Gemma3ForCausalLM"], ` + base + `,
			"layer_types": ["full_attention", "sliding_attention"], "final_logit_softcapping": 30,
			"rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 500000},
				"sliding_attention": {"rope_type": "default", "rope_theta": 20000}}}`,
			func(c Config) bool {
				g := c.Gemma
				return !c.Sliding[0] && c.Sliding[1] && g.FinalSoftcap == 30 && g.QueryPreAttnScalar == 256 &&
					c.SlidingWindow == 4096 && c.Rope.Theta == 500000 && g.LocalRope.Theta == 20000
			}},
		{"gpt-oss as openai ships it: mxfp4 experts, rope_scaling yarn", `{"architectures": ["GptOssForCausalLM"], ` + base + `,
			"head_dim": 16, "num_local_experts": 32, "num_experts_per_tok": 4, "sliding_window": 128, "swiglu_limit": 7.0,
			"layer_types": ["sliding_attention", "full_attention"], "rope_theta": 150000,
			"rope_scaling": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0, "original_max_position_embeddings": 4096, "rope_type": "yarn", "truncate": false},
			"quantization_config": {"modules_to_not_convert": ["model.layers.*.self_attn"], "quant_method": "mxfp4"}}`,
			func(c Config) bool {
				m, r := c.MoE, c.Rope
				return c.AttentionBias && c.OutputBias && c.AttentionSinks && c.SlidingWindow == 128 && c.Sliding[0] && !c.Sliding[1] &&
					m.Experts == 32 && m.PerToken == 4 && m.Intermediate == 128 && m.NormTopK && m.Biases && m.MXFP4 &&
					m.SwiGLULimit == 7 && m.Sparse(0) && m.Sparse(1) &&
					r.Type == "yarn" && r.Theta == 150000 && r.Factor == 32 && !r.Truncate && r.OriginalMaxPositionEmbs == 4096 &&
					math.Abs(r.AttentionFactor-(0.1*math.Log(32)+1)) < 1e-15
			}},
		{"gpt-oss defaults as GptOssConfig's: alternate layers slide, biases, yarn", `{"architectures": ["GptOssForCausalLM"], ` + base + `}`,
			func(c Config) bool {
				m := c.MoE
				return c.AttentionBias && c.SlidingWindow == 128 && c.Sliding[0] && !c.Sliding[1] && m.Experts == 128 &&
					m.PerToken == 4 && !m.MXFP4 && m.SwiGLULimit == 7 && c.Rope.Type == "yarn" && c.Rope.Theta == 150000 &&
					c.Rope.OriginalMaxPositionEmbs == 4096 && !c.Rope.Truncate
			}},
		{"qwen3-next defaults as Qwen3NextConfig's: full_attention_interval, head_dim 256, a quarter rotary", `{"architectures": ["Qwen3NextForCausalLM"], ` + base + `,
			"num_hidden_layers": 8, "partial_rotary_factor": 0.25}`,
			func(c Config) bool {
				n, m := c.Next, c.MoE
				return n.Enabled && c.QKNorm && c.HeadDim == 256 && n.RotaryDim == 64 && n.LinearLayers() == 6 &&
					n.Linear[0] && !n.Linear[3] && !n.Linear[7] && c.KVLayers() == 2 &&
					n.KHeads == 16 && n.VHeads == 32 && n.KDim == 128 && n.VDim == 128 && n.ConvKernel == 4 &&
					n.SharedIntermediate == 512 && m.Experts == 512 && m.PerToken == 10 && m.Intermediate == 512 && m.NormTopK
			}},
		{"qwen3-next as transformers 5 writes it: layer_types, the rotary factor in rope_parameters", `{"architectures": ["Qwen3NextForCausalLM"], ` + base + `,
			"head_dim": 16, "layer_types": ["full_attention", "linear_attention"], "norm_topk_prob": false,
			"rope_parameters": {"rope_type": "default", "rope_theta": 10000000, "partial_rotary_factor": 0.5},
			"linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 8, "linear_value_head_dim": 12,
			"num_experts": 8, "num_experts_per_tok": 2, "shared_expert_intermediate_size": 0}`,
			func(c Config) bool {
				n := c.Next
				return !n.Linear[0] && n.Linear[1] && n.RotaryDim == 8 && c.Rope.Theta == 1e7 && !c.MoE.NormTopK &&
					n.ConvChannels() == 2*2*8+4*12 && n.SharedIntermediate == 0
			}},
		{"transformers 4 rope_theta + rope_scaling", `{"architectures": ["LlamaForCausalLM"], "rope_theta": 1000, ` + base + `,
			"rope_scaling": {"rope_type": "llama3", "factor": 8, "low_freq_factor": 1, "high_freq_factor": 4, "original_max_position_embeddings": 64}}`,
			func(c Config) bool { return c.Rope.Type == "llama3" && c.Rope.Theta == 1000 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseConfig([]byte(tt.json))
			if err != nil {
				t.Fatal(err)
			}
			if !tt.check(c) {
				t.Fatalf("config %+v", c)
			}
		})
	}
}

func TestParseConfigRefusals(t *testing.T) {
	tests := []struct{ name, json, wantInErr string }{
		{"unknown architecture lists the known", `{"architectures": ["MambaForCausalLM"]}`, "LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM"},
		{"not JSON", `{`, "config.json"},
		{"heads not a multiple of kv heads", `{"architectures": ["Qwen2ForCausalLM"], "hidden_size": 64, "intermediate_size": 1, "num_hidden_layers": 1,
			"num_attention_heads": 4, "num_key_value_heads": 3, "vocab_size": 8, "max_position_embeddings": 8}`, "multiple of num_key_value_heads"},
		{"missing size", `{"architectures": ["Qwen2ForCausalLM"]}`, "hidden_size must be positive"},
		{"more experts a token than experts", `{"architectures": ["Qwen3MoeForCausalLM"], "hidden_size": 64, "intermediate_size": 1, "num_hidden_layers": 2,
			"num_attention_heads": 4, "vocab_size": 8, "max_position_embeddings": 8, "num_experts": 4, "num_experts_per_tok": 5}`, "num_experts_per_tok must be 1 to num_experts (4), got 5"},
		{"a dense layer the model lacks", `{"architectures": ["Qwen3MoeForCausalLM"], "hidden_size": 64, "intermediate_size": 1, "num_hidden_layers": 2,
			"num_attention_heads": 4, "vocab_size": 8, "max_position_embeddings": 8, "mlp_only_layers": [2]}`, "mlp_only_layers names layer 2"},
		{"gemma 3 with attention soft-capping", `{"architectures": ["Gemma3ForCausalLM"], "hidden_size": 64, "intermediate_size": 1, "num_hidden_layers": 2,
			"num_attention_heads": 4, "vocab_size": 8, "max_position_embeddings": 8, "attn_logit_softcapping": 50}`, "attn_logit_softcapping is set"},
		{"gemma 3 with another activation", `{"architectures": ["Gemma3ForCausalLM"], "hidden_size": 64, "intermediate_size": 1, "num_hidden_layers": 2,
			"num_attention_heads": 4, "vocab_size": 8, "max_position_embeddings": 8, "hidden_activation": "gelu"}`, `hidden_activation "gelu"`},
		{"gemma 3 layer_types of another length", `{"architectures": ["Gemma3ForCausalLM"], "hidden_size": 64, "intermediate_size": 1, "num_hidden_layers": 2,
			"num_attention_heads": 4, "vocab_size": 8, "max_position_embeddings": 8, "layer_types": ["full_attention"]}`, "layer_types names 1 layers"},
		{"unsupported rope", `{"architectures": ["Qwen2ForCausalLM"], "rope_scaling": {"rope_type": "longrope", "factor": 4}}`, `rope type "longrope"`},
		{"yarn without its original context", `{"architectures": ["Qwen2ForCausalLM"], "rope_scaling": {"rope_type": "yarn", "factor": 4}}`, "original_max_position_embeddings > 0"},
		{"gpt-oss quantized another way", `{"architectures": ["GptOssForCausalLM"], "hidden_size": 64, "intermediate_size": 1, "num_hidden_layers": 2,
			"num_attention_heads": 4, "vocab_size": 8, "max_position_embeddings": 8, "quantization_config": {"quant_method": "fp8"}}`, `quant_method "fp8"`},
		{"gpt-oss with a layer type tfd does not run", `{"architectures": ["GptOssForCausalLM"], "hidden_size": 64, "intermediate_size": 1, "num_hidden_layers": 2,
			"num_attention_heads": 4, "vocab_size": 8, "max_position_embeddings": 8, "layer_types": ["full_attention", "chunked_attention"]}`, `layer_types[1] = "chunked_attention"`},
		{"qwen3-next value heads not a multiple of key heads", `{"architectures": ["Qwen3NextForCausalLM"], "hidden_size": 64, "intermediate_size": 1, "num_hidden_layers": 2,
			"num_attention_heads": 4, "vocab_size": 8, "max_position_embeddings": 8, "linear_num_key_heads": 3, "linear_num_value_heads": 4}`, "multiple of linear_num_key_heads (3)"},
		{"qwen3-next rotary dimensions not even", `{"architectures": ["Qwen3NextForCausalLM"], "hidden_size": 64, "intermediate_size": 1, "num_hidden_layers": 2,
			"num_attention_heads": 4, "vocab_size": 8, "max_position_embeddings": 8, "head_dim": 12, "partial_rotary_factor": 0.25}`, "gives 3 rotary dimensions"},
		{"qwen3-next layer type unknown", `{"architectures": ["Qwen3NextForCausalLM"], "hidden_size": 64, "intermediate_size": 1, "num_hidden_layers": 2,
			"num_attention_heads": 4, "vocab_size": 8, "max_position_embeddings": 8, "layer_types": ["linear_attention", "sliding_attention"]}`, `layer_types[1] = "sliding_attention"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tt.json))
			if err == nil || !strings.Contains(err.Error(), tt.wantInErr) {
				t.Fatalf("err = %v, want it to mention %q", err, tt.wantInErr)
			}
		})
	}
}

// TestRotaryPermutation: the permutation that lets RoPE turn Qwen3-Next's partial rotary places
// each turned pair (i, i + rotary/2) at RoPE's (i, i + headDim/2), puts every other dimension
// somewhere, once, in order, and is the identity when the whole head turns.
func TestRotaryPermutation(t *testing.T) {
	for _, c := range []struct{ hd, rot int }{{16, 4}, {256, 64}, {12, 12}, {8, 2}} {
		perm := rotaryPermutation(c.hd, c.rot)
		seen := make([]bool, c.hd)
		last := -1
		for j, d := range perm {
			if seen[d] {
				t.Fatalf("head %d, rotary %d: dimension %d placed twice: %v", c.hd, c.rot, d, perm)
			}
			seen[d] = true
			switch half := j % (c.hd / 2); {
			case half < c.rot/2 && d != half+j/(c.hd/2)*(c.rot/2):
				t.Errorf("head %d, rotary %d: place %d holds %d, want the pair's %d", c.hd, c.rot, j, d, half+j/(c.hd/2)*(c.rot/2))
			case half >= c.rot/2:
				if d < c.rot || d < last {
					t.Errorf("head %d, rotary %d: place %d holds %d, want the unturned dimensions in order: %v", c.hd, c.rot, j, d, perm)
				}
				last = d
			}
		}
		if c.hd == c.rot {
			for j, d := range perm {
				if d != j {
					t.Errorf("a whole head turned: permutation %v, want the identity", perm)
					break
				}
			}
		}
	}
}

func TestLlama3ScalingBands(t *testing.T) {
	r := RopeConfig{Theta: 500000, Type: "llama3", Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositionEmbs: 64}
	plain := invFreq(RopeConfig{Theta: 500000, Type: "default"}, 16)
	scaled := invFreq(r, 16)
	for i := range plain {
		wavelen := 2 * math.Pi / float64(plain[i])
		switch {
		case wavelen < 64.0/4:
			if scaled[i] != plain[i] {
				t.Errorf("freq %d (wavelength %.1f, high band) changed: %v → %v", i, wavelen, plain[i], scaled[i])
			}
		case wavelen > 64:
			if want := plain[i] / 8; scaled[i] != want {
				t.Errorf("freq %d (wavelength %.1f, low band): %v, want %v", i, wavelen, scaled[i], want)
			}
		default:
			if !(scaled[i] < plain[i] && scaled[i] > plain[i]/8) {
				t.Errorf("freq %d (wavelength %.1f, blended): %v not between %v and %v", i, wavelen, scaled[i], plain[i]/8, plain[i])
			}
		}
	}
}
