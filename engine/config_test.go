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
				return g.Enabled && c.QKNorm && c.TieEmbeddings && g.QueryPreAttnScalar == 24 && g.SlidingWindow == 512 &&
					g.Sliding[0] && !g.Sliding[1] && g.FinalSoftcap == 0 &&
					c.Rope.Type == "linear" && c.Rope.Factor == 8 && c.Rope.Theta == 1e6 &&
					g.LocalRope.Type == "default" && g.LocalRope.Theta == 1e4
			}},
		{"gemma 3 as transformers 5 writes it: rope_parameters by layer type, layer_types", `{"architectures": ["Gemma3ForCausalLM"], ` + base + `,
			"layer_types": ["full_attention", "sliding_attention"], "final_logit_softcapping": 30,
			"rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 500000},
				"sliding_attention": {"rope_type": "default", "rope_theta": 20000}}}`,
			func(c Config) bool {
				g := c.Gemma
				return !g.Sliding[0] && g.Sliding[1] && g.FinalSoftcap == 30 && g.QueryPreAttnScalar == 256 &&
					g.SlidingWindow == 4096 && c.Rope.Theta == 500000 && g.LocalRope.Theta == 20000
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
		{"unsupported rope", `{"architectures": ["Qwen2ForCausalLM"], "rope_scaling": {"rope_type": "yarn", "factor": 4}}`, `rope type "yarn"`},
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
