package engine

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"tfd/engine/gguf"
)

// Gemma 3 in GGUF, as llama.cpp's converter writes it (conversion/gemma.py, Gemma3Model) and its
// loader reads it (src/models/gemma3.cpp). Where llama.cpp's reading cannot express a checkpoint,
// tfd writes and reads one key more than llama.cpp does, named as llama.cpp names it elsewhere:
//
//   - The norms' weights are stored as 1 + w, the converter's shift (Gemma3RMSNorm multiplies by
//     1 + w), so they load as they are. The converter adds the 1 in the checkpoint's dtype (a
//     BF16 checkpoint's rounds to BF16, where transformers adds it in F32); ExportGGUF adds it in
//     F32, so its file gives transformers' bits.
//   - The sliding layers: gemma3.attention.sliding_window, and the pattern as a period
//     (attention.sliding_window_pattern, 6 when absent: layer i slides unless i mod period is
//     period − 1, as llama.cpp's set_swa_pattern and transformers' sliding_window_pattern agree).
//     The local rope's base is rope.freq_base_swa (10,000 when absent), unscaled; the global one's
//     is rope.freq_base, with linear scaling where rope.scaling.type says so.
//   - The attention's scale: GGUF has no query_pre_attn_scalar. llama.cpp takes 1/√(hidden/heads)
//     for a 62-layer model (Gemma 3 27B, whose query_pre_attn_scalar is 168 = 5376/32) and
//     1/√head_dim otherwise; where a checkpoint's query_pre_attn_scalar is neither, ExportGGUF
//     writes the scale as gemma3.attention.scale, which tfd reads first.

// ggufGemma3LayerNames are Gemma 3's four norms a layer, where they differ from ggufLayerNames.
var ggufGemma3LayerNames = map[string]string{
	"post_attention_layernorm.weight":   "post_attention_norm.weight",
	"pre_feedforward_layernorm.weight":  "ffn_norm.weight",
	"post_feedforward_layernorm.weight": "post_ffw_norm.weight",
}

// gemma3DefaultPeriod and gemma3DefaultLocalTheta are llama.cpp's defaults for a file without
// the keys.
const (
	gemma3DefaultPeriod     = 6
	gemma3DefaultLocalTheta = 10000
)

// gemma3QueryScalar is the query_pre_attn_scalar llama.cpp's reading implies for c.
func gemma3QueryScalar(c Config) float64 {
	if c.Layers == 62 {
		return float64(c.Hidden / c.Heads)
	}
	return float64(c.HeadDim)
}

// readGemma3 reads what Gemma 3 adds to the config (c holds what readConfig read so far), its
// sliding layers into c.
func (g *ggufCheckpoint) readGemma3(key func(string) string, c *Config) (GemmaConfig, error) {
	gc := GemmaConfig{Enabled: true, QueryPreAttnScalar: gemma3QueryScalar(*c), LocalRope: RopeConfig{Type: "default", Theta: gemma3DefaultLocalTheta}}
	if s, ok, err := g.floatKey(key("attention.scale")); err != nil {
		return gc, err
	} else if ok {
		if !(s > 0) {
			return gc, g.errorf("%s is %g; want a positive scale", key("attention.scale"), s)
		}
		gc.QueryPreAttnScalar = 1 / (s * s)
	}
	if cap, ok, err := g.floatKey(key("final_logit_softcapping")); err != nil {
		return gc, err
	} else if ok {
		gc.FinalSoftcap = cap
	}
	if theta, ok, err := g.floatKey(key("rope.freq_base_swa")); err != nil {
		return gc, err
	} else if ok {
		gc.LocalRope.Theta = theta
	}
	window, ok, err := g.intKey(key("attention.sliding_window"))
	if err != nil {
		return gc, err
	}
	c.Sliding = make([]bool, c.Layers)
	if !ok || window == 0 {
		return gc, nil // no sliding layers, as llama.cpp reads such a file
	}
	c.SlidingWindow = window
	period, _, err := g.intKey(key("attention.sliding_window_pattern"))
	if err != nil {
		return gc, g.errorf("%w (tfd reads the pattern as a period)", err)
	}
	if period == 0 {
		period = gemma3DefaultPeriod
	}
	for i := range c.Sliding {
		c.Sliding[i] = i%period < period-1
	}
	return gc, nil
}

// exportGemma3Config writes what Gemma 3 adds to exportConfig's keys, or refuses a checkpoint
// whose sliding layers no period gives.
func exportGemma3Config(w *gguf.Writer, key func(string) string, c Config) error {
	gc := c.Gemma
	if gc.LocalRope.Type != "default" {
		return fmt.Errorf("engine: export GGUF: Gemma 3's local rope is %q; llama.cpp reads it unscaled", gc.LocalRope.Type)
	}
	w.Set(key("rope.freq_base_swa"), gguf.Float32(float32(gc.LocalRope.Theta)))
	if gc.FinalSoftcap > 0 {
		w.Set(key("final_logit_softcapping"), gguf.Float32(float32(gc.FinalSoftcap)))
	}
	if gc.QueryPreAttnScalar != gemma3QueryScalar(c) {
		w.Set(key("attention.scale"), gguf.Float32(attentionScaleOf(gc.QueryPreAttnScalar)))
	}
	if !slices.Contains(c.Sliding, true) {
		return nil
	}
	period := slices.Index(c.Sliding, false) + 1 // the first global layer ends the first period
	for i, s := range c.Sliding {
		if period == 0 || s != (i%period < period-1) {
			return fmt.Errorf("engine: export GGUF: Gemma 3's sliding layers %v are no period of llama.cpp's sliding_window_pattern", c.Sliding)
		}
	}
	w.Set(key("attention.sliding_window"), gguf.Uint32(uint32(c.SlidingWindow)))
	w.Set(key("attention.sliding_window_pattern"), gguf.Uint32(uint32(period)))
	return nil
}

// attentionScaleOf is Gemma's attention scale for query_pre_attn_scalar q, as the model
// computes it (Model.allocate).
func attentionScaleOf(q float64) float32 { return float32(math.Pow(q, -0.5)) }

// plusOneF32 returns F32 little-endian values plus one, in F32: the converter's shift of Gemma's
// norms.
func plusOneF32(data []byte) []byte {
	out := make([]byte, len(data))
	for i := 0; i+4 <= len(data); i += 4 {
		v := math.Float32frombits(binary.LittleEndian.Uint32(data[i:]))
		binary.LittleEndian.PutUint32(out[i:], math.Float32bits(1+v))
	}
	return out
}
