package engine

import (
	"fmt"
	"slices"
	"strings"

	"tfd/compute"
	"tfd/engine/gguf"
	"tfd/engine/safetensors"
	"tfd/quant"
)

// GPT-OSS in GGUF, as llama.cpp's converter writes it (conversion/gpt_oss.py, GptOssModel) and
// its loader reads it (src/models/openai-moe.cpp, architecture "gpt-oss"):
//
//   - The norm before the experts is post_attention_norm (llama.cpp's ATTN_POST_NORM), the sinks
//     attn_sinks.weight [heads] in F32, the router ffn_gate_inp with a bias.
//   - The experts are llama.cpp's stacks ffn_{gate,up,down}_exps [experts, out, in], gate and up
//     taken apart (the converter splits gate_up_proj's even and odd rows, or columns in the bf16
//     form, which it transposes), each with a bias [experts, out] in F32.
//   - MXFP4 experts are ggml's MXFP4 blocks: per 32 weights the E8M0 scale byte, then 16 bytes
//     whose byte j holds weight j in its low nibble and weight j+16 in its high one (openai's
//     _blocks hold weights 2j and 2j+1). The scale bytes are openai's as they are. The loader
//     regroups them into compute.MXFP4's layout, exactly (ggufMXFP4ToCompute).
//   - The sliding layers are a period, attention.sliding_window_pattern, 2 when absent (layer 0
//     slides, layer 1 does not, …), of attention.sliding_window keys.
//   - YaRN: rope.scaling.{type,factor,original_context_length,yarn_beta_fast,yarn_beta_slow,
//     yarn_attn_factor}. llama.cpp rounds the correction range to whole dimensions for every
//     model; GPT-OSS's config says truncate false, which tfd keeps for gpt-oss (see readRope).
//   - The clamped SwiGLU's limit is llama.cpp's constant 7 (GPT-OSS's swiglu_limit); GGUF has no
//     key for it, so ExportGGUF refuses another.

// ggufGptOssLayerNames are GPT-OSS's tensors a layer, where they differ from ggufLayerNames. The
// experts' stacks are named as tfd asks for them in llama.cpp's form (loadGptOssExperts).
var ggufGptOssLayerNames = map[string]string{
	"post_attention_layernorm.weight": "post_attention_norm.weight",
	"self_attn.sinks":                 "attn_sinks.weight",
	"mlp.router.weight":               "ffn_gate_inp.weight",
	"mlp.router.bias":                 "ffn_gate_inp.bias",
	"mlp.experts.gate_proj.weight":    "ffn_gate_exps.weight",
	"mlp.experts.up_proj.weight":      "ffn_up_exps.weight",
	"mlp.experts.down_proj.weight":    "ffn_down_exps.weight",
	"mlp.experts.gate_proj.bias":      "ffn_gate_exps.bias",
	"mlp.experts.up_proj.bias":        "ffn_up_exps.bias",
	"mlp.experts.down_proj.bias":      "ffn_down_exps.bias",
}

// gptOssSwiGLULimit is the clamped SwiGLU's limit llama.cpp's gpt-oss runs with (a constant).
const gptOssSwiGLULimit = 7

// gptOssDefaultPeriod is llama.cpp's sliding_window_pattern for a gpt-oss file without the key.
const gptOssDefaultPeriod = 2

// readGptOss reads what GPT-OSS adds to the config (c holds what readConfig read so far,
// its mixture of experts included).
func (g *ggufCheckpoint) readGptOss(key func(string) string, c *Config) error {
	c.AttentionSinks = true
	c.MoE.Biases, c.MoE.SwiGLULimit = true, gptOssSwiGLULimit
	if t, ok := g.file.Tensor("blk.0.ffn_gate_exps.weight"); ok {
		c.MoE.MXFP4 = t.Type == gguf.MXFP4
	}
	if base, ok, err := g.floatKey(key("rope.freq_base_swa")); err != nil {
		return err
	} else if ok && base != c.Rope.Theta {
		return g.errorf("%s is %g, %s %g: tfd runs GPT-OSS's sliding layers with the rope of the others", key("rope.freq_base_swa"), base, key("rope.freq_base"), c.Rope.Theta)
	}
	window, err := g.requiredInt(key("attention.sliding_window"))
	if err != nil {
		return err
	}
	period, ok, err := g.intKey(key("attention.sliding_window_pattern"))
	if err != nil {
		return g.errorf("%w (tfd reads the pattern as a period)", err)
	}
	if !ok || period == 0 {
		period = gptOssDefaultPeriod
	}
	c.SlidingWindow, c.Sliding = window, make([]bool, c.Layers)
	for i := range c.Sliding {
		c.Sliding[i] = i%period < period-1 // llama.cpp's set_swa_pattern
	}
	return nil
}

// exportGptOssConfig writes what GPT-OSS adds to exportConfig's keys, or refuses a checkpoint
// llama.cpp's gpt-oss cannot express.
func exportGptOssConfig(w *gguf.Writer, key func(string) string, c Config) error {
	if c.MoE.SwiGLULimit != gptOssSwiGLULimit {
		return fmt.Errorf("engine: export GGUF: GPT-OSS's swiglu_limit is %g; llama.cpp runs %d and GGUF has no key for another", c.MoE.SwiGLULimit, gptOssSwiGLULimit)
	}
	period := slices.Index(c.Sliding, false) + 1 // the first full layer ends the first period
	for i, s := range c.Sliding {
		if period == 0 || s != (i%period < period-1) {
			return fmt.Errorf("engine: export GGUF: GPT-OSS's sliding layers %v are no period of llama.cpp's sliding_window_pattern", c.Sliding)
		}
	}
	w.Set(key("attention.sliding_window"), gguf.Uint32(uint32(c.SlidingWindow)))
	if period != gptOssDefaultPeriod {
		w.Set(key("attention.sliding_window_pattern"), gguf.Uint32(uint32(period))) // the converter writes none
	}
	return nil
}

// exportGptOssExperts writes a GPT-OSS layer's experts, named by its prefix
// ("model.layers.N."), in llama.cpp's form: gate, up and down apart, [experts, out, in], in dtype
// (a float type, or a quantized one by ExportGGUF's rule for any matrix) or, from an MXFP4
// checkpoint, as ggml's MXFP4; their biases in F32.
func exportGptOssExperts(w *gguf.Writer, layer int, c Config, ckpt *safetensors.Checkpoint, dtype compute.DType) error {
	u := &uploader{ckpt: safetensorsCheckpoint{ckpt}}
	name := func(s string) string { return fmt.Sprintf("model.layers.%d.mlp.experts.%s", layer, s) }
	blk := func(s string) string { return fmt.Sprintf("blk.%d.%s", layer, s) }
	x, err := readGptOssExperts(u, c, name)
	if err != nil {
		return err
	}
	for _, s := range []struct {
		gname string
		t     stored
	}{
		{"ffn_gate_exps.weight", x.gate}, {"ffn_up_exps.weight", x.up}, {"ffn_down_exps.weight", x.down},
		{"ffn_gate_exps.bias", x.gateBias}, {"ffn_up_exps.bias", x.upBias}, {"ffn_down_exps.bias", x.downBias},
	} {
		switch s.t.dtype {
		case compute.MXFP4:
			w.AddTensor(blk(s.gname), gguf.MXFP4, s.t.shape, computeMXFP4ToGGUF(s.t.data, s.t.shape))
		case compute.F32:
			if strings.HasSuffix(s.gname, ".bias") {
				w.AddTensor(blk(s.gname), gguf.F32, s.t.shape, s.t.data)
				continue
			}
			fallthrough
		default:
			if dtype.Quantized() {
				data, typ := exportQuantized(blk(s.gname), s.t, dtype)
				w.AddTensor(blk(s.gname), typ, s.t.shape, data)
				continue
			}
			w.AddTensor(blk(s.gname), ggufTypes[dtype], s.t.shape, convertFloats(s.t.data, s.t.dtype, dtype))
		}
	}
	return nil
}

// ggufMXFP4ToCompute returns a ggml MXFP4 tensor's bytes, of shape [..., in] (rows of in
// weights), in compute.MXFP4's layout: every row's codes (weight 2j in the low nibble of byte j,
// 2j+1 in the high one), then every row's scales. ggml's block is the scale byte and 16 bytes
// whose byte j holds weight j low and weight j+16 high; the scale bytes are the same E8M0.
func ggufMXFP4ToCompute(data []byte, shape []int) ([]byte, error) {
	in := shape[len(shape)-1]
	rows := 1
	for _, d := range shape[:len(shape)-1] {
		rows *= d
	}
	blocks := in / quant.BlockSize
	const blockBytes = 1 + quant.BlockSize/2
	if in%quant.BlockSize != 0 || len(data) != rows*blocks*blockBytes {
		return nil, fmt.Errorf("%d bytes are not %d rows of %d MXFP4 weights", len(data), rows, in)
	}
	rowCodes, rowScales := quant.MXFP4RowCodes(in), quant.MXFP4RowScales(in)
	out := make([]byte, rows*(rowCodes+rowScales))
	codes, scales := out[:rows*rowCodes], out[rows*rowCodes:]
	for r := range rows {
		for b := range blocks {
			src := data[(r*blocks+b)*blockBytes:][:blockBytes]
			scales[r*rowScales+b] = src[0]
			dst := codes[r*rowCodes+b*quant.BlockSize/2:][:quant.BlockSize/2]
			for j := range quant.BlockSize {
				code := src[1+j%16] >> (4 * (j / 16)) & 0xf // weight j of the block, ggml's way
				dst[j/2] |= code << (4 * (j & 1))
			}
		}
	}
	return out, nil
}

// computeMXFP4ToGGUF is ggufMXFP4ToCompute's inverse: compute.MXFP4 bytes of shape [..., in] as
// ggml's MXFP4 blocks.
func computeMXFP4ToGGUF(data []byte, shape []int) []byte {
	in := shape[len(shape)-1]
	rows := 1
	for _, d := range shape[:len(shape)-1] {
		rows *= d
	}
	blocks := in / quant.BlockSize
	const blockBytes = 1 + quant.BlockSize/2
	rowCodes, rowScales := quant.MXFP4RowCodes(in), quant.MXFP4RowScales(in)
	codes, scales := data[:rows*rowCodes], data[rows*rowCodes:]
	out := make([]byte, rows*blocks*blockBytes)
	for r := range rows {
		for b := range blocks {
			dst := out[(r*blocks+b)*blockBytes:][:blockBytes]
			dst[0] = scales[r*rowScales+b]
			row := codes[r*rowCodes:][:rowCodes]
			for j := range quant.BlockSize {
				code := quant.MXFP4Code(row, b*quant.BlockSize+j)
				dst[1+j%16] |= code << (4 * (j / 16))
			}
		}
	}
	return out
}

// yarnDefaultAttention is transformers' YaRN attention factor without attention_factor.
func yarnDefaultAttention(factor float64) float64 { return yarnAttentionFactor(&ropeParams{}, factor) }
