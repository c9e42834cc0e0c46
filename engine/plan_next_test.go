package engine

import (
	"fmt"
	"strings"
	"testing"
)

// qwen3Next80B is shaped as Qwen/Qwen3-Next-80B-A3B's config.json: Qwen3NextConfig's defaults
// (which are that model's) written out, its 262,144-token window and its MTP layer.
const qwen3Next80B = `{
  "architectures": ["Qwen3NextForCausalLM"], "model_type": "qwen3_next",
  "hidden_size": 2048, "intermediate_size": 5120, "num_hidden_layers": 48, "full_attention_interval": 4,
  "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256, "partial_rotary_factor": 0.25,
  "rope_theta": 10000000, "max_position_embeddings": 262144, "rms_norm_eps": 1e-06, "hidden_act": "silu",
  "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128, "linear_value_head_dim": 128,
  "linear_num_key_heads": 16, "linear_num_value_heads": 32,
  "num_experts": 512, "num_experts_per_tok": 10, "moe_intermediate_size": 512,
  "shared_expert_intermediate_size": 512, "norm_topk_prob": true, "decoder_sparse_step": 1, "mlp_only_layers": [],
  "mtp_num_hidden_layers": 1, "tie_word_embeddings": false, "vocab_size": 151936, "torch_dtype": "bfloat16"
}`

// writeNextCheckpoint writes config and a model.safetensors whose header lists the BF16 tensors
// of a Qwen3-Next model of that config, MTP head included, and whose data is a hole (see
// sparseCheckpoint).
func writeNextCheckpoint(t *testing.T, dir, config string, c Config) {
	t.Helper()
	var s sparseCheckpoint
	add := s.add
	n := c.Next
	h, q, kv, vd := c.Hidden, c.Heads*c.HeadDim, c.KVHeads*c.HeadDim, n.VHeads*n.VDim
	layer := func(p string, linear bool) {
		add(p+"input_layernorm.weight", h)
		add(p+"post_attention_layernorm.weight", h)
		if linear {
			add(p+"linear_attn.in_proj_qkvz.weight", n.ConvChannels()+vd, h)
			add(p+"linear_attn.in_proj_ba.weight", 2*n.VHeads, h)
			add(p+"linear_attn.conv1d.weight", n.ConvChannels(), 1, n.ConvKernel)
			add(p+"linear_attn.A_log", n.VHeads)
			add(p+"linear_attn.dt_bias", n.VHeads)
			add(p+"linear_attn.norm.weight", n.VDim)
			add(p+"linear_attn.out_proj.weight", h, vd)
		} else {
			add(p+"self_attn.q_proj.weight", 2*q, h)
			add(p+"self_attn.k_proj.weight", kv, h)
			add(p+"self_attn.v_proj.weight", kv, h)
			add(p+"self_attn.o_proj.weight", h, q)
			add(p+"self_attn.q_norm.weight", c.HeadDim)
			add(p+"self_attn.k_norm.weight", c.HeadDim)
		}
		add(p+"mlp.gate.weight", c.MoE.Experts, h)
		for e := range c.MoE.Experts {
			add(fmt.Sprintf("%smlp.experts.%d.gate_proj.weight", p, e), c.MoE.Intermediate, h)
			add(fmt.Sprintf("%smlp.experts.%d.up_proj.weight", p, e), c.MoE.Intermediate, h)
			add(fmt.Sprintf("%smlp.experts.%d.down_proj.weight", p, e), h, c.MoE.Intermediate)
		}
		add(p+"mlp.shared_expert.gate_proj.weight", n.SharedIntermediate, h)
		add(p+"mlp.shared_expert.up_proj.weight", n.SharedIntermediate, h)
		add(p+"mlp.shared_expert.down_proj.weight", h, n.SharedIntermediate)
		add(p+"mlp.shared_expert_gate.weight", 1, h)
	}
	add("model.embed_tokens.weight", c.Vocab, h)
	add("lm_head.weight", c.Vocab, h)
	add("model.norm.weight", h)
	for i := range c.Layers {
		layer(fmt.Sprintf("model.layers.%d.", i), n.Linear[i])
	}
	add("mtp.fc.weight", h, 2*h)
	add("mtp.pre_fc_norm_embedding.weight", h)
	add("mtp.pre_fc_norm_hidden.weight", h)
	add("mtp.norm.weight", h)
	layer("mtp.layers.0.", false)
	s.write(t, dir, config)
}

// TestPlanQwen3Next80BShaped: the memory plan (what `tfd plan` prints) of a
// Qwen3-Next-80B-A3B-shaped checkpoint on a 512 GiB machine, from config.json and the safetensors
// headers alone, with the daemon's default drafts (states 9 positions deep): a token's keys and
// values are those of the 12 attention layers and the MTP layer only (2 KV heads of 256), and each
// session holds the 36 DeltaNet layers' states beside them: per position, a convolution window of
// 3 × 8,192 channels and 32 recurrent matrices of 128 × 128, in F32, for its newest 9 positions
// and the 5 block boundaries a forward of 256 rows may cross (4) and the one before. A prompt
// cache block carries one position's states beside its 64 tokens' keys and values.
func TestPlanQwen3Next80BShaped(t *testing.T) {
	dir := t.TempDir()
	c, err := ParseConfig([]byte(qwen3Next80B))
	if err != nil {
		t.Fatal(err)
	}
	if n := c.Next; n.LinearLayers() != 36 || n.RotaryDim != 64 || n.ConvChannels() != 8192 || c.KVLayers() != 12 || !c.MoE.NormTopK {
		t.Fatalf("config %+v", c)
	}
	writeNextCheckpoint(t, dir, qwen3Next80B, c)
	cfg, info, err := Inspect(Source{Dir: dir}, NoQuantization)
	if err != nil {
		t.Fatal(err)
	}
	const params = 81_324_862_720 // 79,674,391,296 and the MTP head's 1,650,471,424
	if info.Params != params || info.FileBytes != 2*params {
		t.Fatalf("Inspect: %d parameters in %d bytes, want %d in %d", info.Params, info.FileBytes, int64(params), int64(2*params))
	}
	p, err := MakePlan(PlanInput{Model: cfg, WeightBytes: info.FileBytes, DeviceMemory: 512 * GiB, MarginGB: 1, MaxRows: 256, StateDepth: 9, PromptCacheGiB: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", p)
	const kvPerToken = 13 * 2 * 256 * 2 * 4   // attention layers and MTP × KV heads × head size × (keys, values) × F32
	const statePerPosition = 36 * 548_864 * 4 // layers × (3·8,192 + 32·128·128) × F32
	const statePerSession = statePerPosition * (9 + 5)
	if p.KVPerToken != kvPerToken || p.StatePerSession != statePerSession || p.CacheStatePerBlock != statePerPosition || p.Cache == 0 {
		t.Errorf("KV %d a token, states %d a session and %d a cached block, cache %d; want %d, %d, %d, some", p.KVPerToken, p.StatePerSession, p.CacheStatePerBlock, p.Cache, kvPerToken, statePerSession, statePerPosition)
	}
	if got := p.CacheBlockBytes(64); got != 64*kvPerToken+statePerPosition {
		t.Errorf("a cached block takes %d bytes, want %d", got, 64*kvPerToken+statePerPosition)
	}
	if p.States != int64(len(p.Layout))*statePerSession || p.Left < 0 {
		t.Errorf("states %d for %d sessions, %d left", p.States, len(p.Layout), p.Left)
	}
	for _, line := range []string{"weights    151.5 GiB", "52.0 KiB a token", "DeltaNet states: 1.0 GiB a session (its newest 9 positions, 5 block boundaries for the prompt cache)",
		"context   262144 tokens", "a block of 64 tokens takes 78.6 MiB, 75.4 MiB of it the DeltaNet states at its end"} {
		if !strings.Contains(p.String(), line) {
			t.Errorf("the plan does not say %q", line)
		}
	}
}
