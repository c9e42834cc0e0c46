package engine

import (
	"fmt"
	"strings"
	"testing"

	"tfd/compute"
)

// gemma3_27B is shaped as google/gemma-3-27b-it's text config: 62 layers, five of every six
// sliding with a window of 1024, 16 KV heads of 128, and a window of 131,072 tokens.
const gemma3_27B = `{
  "architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text",
  "hidden_size": 5376, "intermediate_size": 21504, "num_hidden_layers": 62,
  "num_attention_heads": 32, "num_key_value_heads": 16, "head_dim": 128, "query_pre_attn_scalar": 168,
  "sliding_window": 1024, "sliding_window_pattern": 6, "max_position_embeddings": 131072,
  "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0, "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
  "rms_norm_eps": 1e-06, "hidden_activation": "gelu_pytorch_tanh", "final_logit_softcapping": null,
  "attn_logit_softcapping": null, "vocab_size": 262208, "torch_dtype": "bfloat16"
}`

// gemma3Params counts a Gemma 3 text model's parameters from its config: the embedding table
// (tied), and per layer the attention, its q and k norms, the gated MLP and four norms; and the
// final norm.
func gemma3Params(c Config) int64 {
	h, q, kv := int64(c.Hidden), int64(c.Heads*c.HeadDim), int64(c.KVHeads*c.HeadDim)
	layer := h*q + 2*h*kv + q*h + 3*h*int64(c.Intermediate) + 4*h + 2*int64(c.HeadDim)
	return int64(c.Vocab)*h + int64(c.Layers)*layer + h
}

// writeGemma3Checkpoint writes config and a model.safetensors whose header lists the BF16 tensors
// of a Gemma 3 text model of that config, and whose data is a hole (see sparseCheckpoint).
func writeGemma3Checkpoint(t *testing.T, dir, config string, c Config) {
	t.Helper()
	var s sparseCheckpoint
	add := s.add
	q, kv := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	add("model.embed_tokens.weight", c.Vocab, c.Hidden)
	add("model.norm.weight", c.Hidden)
	for i := range c.Layers {
		p := fmt.Sprintf("model.layers.%d.", i)
		for _, norm := range []string{"input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm"} {
			add(p+norm+".weight", c.Hidden)
		}
		add(p+"self_attn.q_proj.weight", q, c.Hidden)
		add(p+"self_attn.k_proj.weight", kv, c.Hidden)
		add(p+"self_attn.v_proj.weight", kv, c.Hidden)
		add(p+"self_attn.o_proj.weight", c.Hidden, q)
		add(p+"self_attn.q_norm.weight", c.HeadDim)
		add(p+"self_attn.k_norm.weight", c.HeadDim)
		add(p+"mlp.gate_proj.weight", c.Intermediate, c.Hidden)
		add(p+"mlp.up_proj.weight", c.Intermediate, c.Hidden)
		add(p+"mlp.down_proj.weight", c.Hidden, c.Intermediate)
	}
	s.write(t, dir, config)
}

// TestPlanGemma3_27BShaped: the memory plan (what `tfd plan` prints) of a Gemma-3-27B-shaped
// checkpoint on an H200, from config.json and the safetensors headers alone, before and after the sliding layers' rings: keeping every position, one
// session of the whole context takes 124 GiB of F32 keys and values and does not fit beside the
// weights, so the context is lowered; with rings of 1,279 positions (the window and 255 rows of
// a forward) for the 52 sliding layers, a session of the whole context takes 22.0 GiB.
func TestPlanGemma3_27BShaped(t *testing.T) {
	c, err := ParseConfig([]byte(gemma3_27B))
	if err != nil {
		t.Fatal(err)
	}
	window, sliding := c.windowed()
	if window != 1024 || sliding != 52 || c.Window(5) != 0 || c.Window(4) != 1024 {
		t.Fatalf("window %d over %d sliding layers (layer 5: %d, 4: %d); want 1024 over 52, layer 5 global", window, sliding, c.Window(5), c.Window(4))
	}
	// As `tfd plan` reads a model: config.json and the tensors' headers (Inspect).
	dir := t.TempDir()
	writeGemma3Checkpoint(t, dir, gemma3_27B, c)
	cfg, info, err := Inspect(Source{Dir: dir}, NoQuantization)
	if err != nil {
		t.Fatal(err)
	}
	params := gemma3Params(c)
	// BF16 weights, and the lookups' √hidden-scaled copy of the tied table.
	weights := 2*params + 2*int64(c.Vocab)*int64(c.Hidden)
	if info.Params != params || info.Bytes != weights {
		t.Fatalf("Inspect: %d parameters in %d bytes loaded, want %d in %d", info.Params, info.Bytes, params, weights)
	}
	const h200 = 140 * GiB
	in := PlanInput{Model: cfg, WeightBytes: info.Bytes, DeviceMemory: h200, MarginGB: 1, MaxRows: 256}

	// Before: as a model keeping every position plans (rings off, as when 2R ≥ the context).
	const kvLayer = 16 * 128 * 2 * 4 // KV heads × head size × (keys, values) × F32
	every := int64(131072) * 62 * kvLayer
	if got := int64(131072) * kvPerToken(c, compute.F32); got != every {
		t.Fatalf("every position of a session: %d bytes, want %d", got, every)
	}

	before := in
	before.Model.Sliding = nil // every layer keeps every position, as before the rings
	b, err := MakePlan(before)
	if err != nil {
		t.Fatal(err)
	}
	if b.RingLength != 0 || b.Context >= 131072 {
		t.Errorf("keeping every position: ring %d, context %d; want none, and the context lowered", b.RingLength, b.Context)
	}
	t.Logf("keeping every position:\n%s", b)
	p, err := MakePlan(in)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%.2fB parameters; a session of 131072 tokens keeping every position: %s\n%s", float64(params)/1e9, FormatBytes(every), p)
	const ring = 1024 + 256 - 1
	wantRing := compute.KVSpec{Layers: 52, KVHeads: 16, HeadDim: 128, Slots: 2 * ring}.Bytes()
	perSession := int64(131072)*10*kvLayer + wantRing
	if p.RingLength != ring || p.RingPerSession != wantRing || p.KVPerToken != 10*kvLayer || p.CachePerToken != 62*kvLayer {
		t.Errorf("ring %d positions, %d bytes; KV %d a token, cached %d; want %d, %d, %d, %d",
			p.RingLength, p.RingPerSession, p.KVPerToken, p.CachePerToken, ring, wantRing, 10*kvLayer, 62*kvLayer)
	}
	if p.Context != 131072 || p.KV != int64(p.Slots())*p.KVPerToken+int64(len(p.Layout))*wantRing {
		t.Errorf("context %d, KV %d for layout %s", p.Context, p.KV, p.Layout)
	}
	for _, line := range []string{
		fmt.Sprintf("session   %10s", FormatBytes(perSession)),
		"160.0 KiB a token and 2.0 GiB of sliding-layer rings a session",
		"a session of 131072 tokens takes 22.0 GiB, against 124.0 GiB keeping every position",
	} {
		if !strings.Contains(p.String(), line) {
			t.Errorf("the plan does not say %q", line)
		}
	}

	// A model whose forwards take so many rows that its rings would not be smaller than the
	// context keeps every position, and the plan says so by having no rings.
	in.MaxRows = 65536
	if p, err := MakePlan(in); err == nil && (p.RingLength != 0 || p.KVPerToken != 62*kvLayer) {
		t.Errorf("MaxRows %d: ring %d, KV %d a token; want none and every layer's", in.MaxRows, p.RingLength, p.KVPerToken)
	}
}
