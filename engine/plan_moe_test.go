package engine

import (
	"fmt"
	"strings"
	"testing"
)

// qwen3MoE30B is Qwen/Qwen3-30B-A3B's config.json, as the hub serves it.
const qwen3MoE30B = `{
  "architectures": ["Qwen3MoeForCausalLM"],
  "attention_bias": false, "attention_dropout": 0.0, "bos_token_id": 151643, "decoder_sparse_step": 1,
  "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu", "hidden_size": 2048,
  "initializer_range": 0.02, "intermediate_size": 6144, "max_position_embeddings": 40960,
  "max_window_layers": 48, "mlp_only_layers": [], "model_type": "qwen3_moe", "moe_intermediate_size": 768,
  "norm_topk_prob": true, "num_attention_heads": 32, "num_experts": 128, "num_experts_per_tok": 8,
  "num_hidden_layers": 48, "num_key_value_heads": 4, "output_router_logits": false, "rms_norm_eps": 1e-06,
  "rope_scaling": null, "rope_theta": 1000000.0, "router_aux_loss_coef": 0.001, "sliding_window": null,
  "tie_word_embeddings": false, "torch_dtype": "bfloat16", "transformers_version": "4.51.0",
  "use_cache": true, "use_sliding_window": false, "vocab_size": 151936
}`

// writeSparseCheckpoint writes config and the sparse checkpoint (sparseCheckpoint: the header
// alone, its data a hole) of a Qwen3-MoE model of that config.
func writeSparseCheckpoint(t *testing.T, dir, config string, c Config) {
	t.Helper()
	var s sparseCheckpoint
	add := s.add
	q, kv := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	add("model.embed_tokens.weight", c.Vocab, c.Hidden)
	add("lm_head.weight", c.Vocab, c.Hidden)
	add("model.norm.weight", c.Hidden)
	for i := range c.Layers {
		p := fmt.Sprintf("model.layers.%d.", i)
		add(p+"input_layernorm.weight", c.Hidden)
		add(p+"post_attention_layernorm.weight", c.Hidden)
		add(p+"self_attn.q_proj.weight", q, c.Hidden)
		add(p+"self_attn.k_proj.weight", kv, c.Hidden)
		add(p+"self_attn.v_proj.weight", kv, c.Hidden)
		add(p+"self_attn.o_proj.weight", c.Hidden, q)
		add(p+"self_attn.q_norm.weight", c.HeadDim)
		add(p+"self_attn.k_norm.weight", c.HeadDim)
		add(p+"mlp.gate.weight", c.MoE.Experts, c.Hidden)
		for e := range c.MoE.Experts {
			add(fmt.Sprintf("%smlp.experts.%d.gate_proj.weight", p, e), c.MoE.Intermediate, c.Hidden)
			add(fmt.Sprintf("%smlp.experts.%d.up_proj.weight", p, e), c.MoE.Intermediate, c.Hidden)
			add(fmt.Sprintf("%smlp.experts.%d.down_proj.weight", p, e), c.Hidden, c.MoE.Intermediate)
		}
	}
	s.write(t, dir, config)
}

// TestPlanQwen3MoE30BShaped: the memory plan (what `tfd plan` prints) of a Qwen3-30B-A3B-shaped
// checkpoint on an H200, from config.json and the safetensors headers alone: the weights are all
// 128 experts of all 48 layers (30.5B parameters in BF16), a token's KV is that of the 48
// attention layers' 4 KV heads of 128 (7.5 GiB a session of the whole context), and the scratch
// holds the experts' pairs. Quantized at load, the experts count at their quantized size.
func TestPlanQwen3MoE30BShaped(t *testing.T) {
	dir := t.TempDir()
	c, err := ParseConfig([]byte(qwen3MoE30B))
	if err != nil {
		t.Fatal(err)
	}
	if m := c.MoE; m.Experts != 128 || m.PerToken != 8 || m.Intermediate != 768 || !m.NormTopK || m.SparseLayers(c.Layers) != 48 {
		t.Fatalf("MoE config %+v", m)
	}
	writeSparseCheckpoint(t, dir, qwen3MoE30B, c)
	cfg, info, err := Inspect(Source{Dir: dir}, NoQuantization)
	if err != nil {
		t.Fatal(err)
	}
	// 2 × 151936 × 2048 embeddings and head, a final norm, and per layer 18,874,368 of attention,
	// 4,352 of norms, 262,144 of router and 128 × 4,718,592 of experts.
	const params = 30_532_122_624
	if info.Params != params || info.FileBytes != 2*params {
		t.Fatalf("Inspect: %d parameters in %d bytes, want %d in %d", info.Params, info.FileBytes, int64(params), int64(2*params))
	}
	const h200 = 140 * GiB // about what an H200 reports
	p, err := MakePlan(PlanInput{Model: cfg, WeightBytes: info.FileBytes, DeviceMemory: h200, MarginGB: 1, MaxRows: 256})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", p)
	const kvPerToken = 48 * 4 * 128 * 2 * 4 // layers × KV heads × head size × (keys, values) × F32
	if p.KVPerToken != kvPerToken || p.Weights != 2*params || p.Context != 40960 {
		t.Errorf("KV %d a token, weights %d, context %d; want %d, %d, 40960", p.KVPerToken, p.Weights, p.Context, kvPerToken, int64(2*params))
	}
	if want := ScratchBytes(Config{Hidden: 2048, Intermediate: 6144, Heads: 32, KVHeads: 4, HeadDim: 128, Vocab: 151936}, 256, 256); p.Scratch <= want {
		t.Errorf("scratch %d, no more than a dense model's %d: the experts' pairs are not counted", p.Scratch, want)
	}
	// A session of the whole context: 40,960 tokens of 192 KiB, 7.5 GiB.
	if got := p.layoutBytes(1, p.Context); got != 40960*kvPerToken {
		t.Errorf("a session of the context takes %d bytes, want %d", got, 40960*kvPerToken)
	}
	for _, line := range []string{"weights     56.9 GiB", "192.0 KiB a token", "context   40960 tokens",
		"session      7.5 GiB  the keys and values of one session of the context (40960 tokens)",
		"all 128 experts of each of the 48 sparse layers (8 run for each token)"} {
		if !strings.Contains(p.String(), line) {
			t.Errorf("the plan does not say %q", line)
		}
	}
	// Quantized at load, the experts with the other matrices (experts and attention in Q4_0 under
	// q4, the embeddings and the head in Q8_0), the routers and the norms as they are.
	const tables, matrices, kept = 2 * 151936 * 2048, 48 * (18_874_368 + 128*4_718_592), 2048 + 48*(4352+262_144)
	for _, c := range []struct {
		q     Quantization
		bytes int64
		line  string
	}{
		{QuantizeQ8, (tables+matrices)/32*34 + 2*kept, "weights     30.2 GiB"},
		{QuantizeQ4, tables/32*34 + matrices/32*18 + 2*kept, "weights     16.3 GiB"},
	} {
		_, info, err := Inspect(Source{Dir: dir}, c.q)
		if err != nil {
			t.Fatal(err)
		}
		if info.Bytes != c.bytes {
			t.Errorf("%s: Inspect counts %d bytes as loaded, want %d", c.q, info.Bytes, c.bytes)
		}
		p, err := MakePlan(PlanInput{Model: cfg, WeightBytes: info.Bytes, Quantize: c.q, DeviceMemory: h200, MarginGB: 1, MaxRows: 256})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(p.String(), c.line) || !strings.Contains(p.String(), "quantized at load (model.quantize = "+string(c.q)+")") {
			t.Errorf("%s: the plan does not say %q and how it quantizes:\n%s", c.q, c.line, p)
		}
	}
}
