package engine

import (
	"encoding/json"
	"fmt"
)

// gemma3Raw mirrors the config.json keys of Gemma3TextConfig beyond rawConfig's. transformers 5
// writes rope_parameters as one entry per layer type; checkpoints on the Hub carry the older
// rope_theta, rope_local_base_freq, rope_scaling and sliding_window_pattern. A key left out takes
// Gemma3TextConfig's default, as transformers would.
type gemma3Raw struct {
	RopeParameters *struct {
		Full    *ropeParams `json:"full_attention"`
		Sliding *ropeParams `json:"sliding_attention"`
	} `json:"rope_parameters"`
	RopeTheta             *float64    `json:"rope_theta"`
	RopeLocalBaseFreq     *float64    `json:"rope_local_base_freq"`
	RopeScaling           *ropeParams `json:"rope_scaling"`
	QueryPreAttnScalar    *float64    `json:"query_pre_attn_scalar"`
	SlidingWindow         *int        `json:"sliding_window"`
	LayerTypes            []string    `json:"layer_types"`
	SlidingWindowPattern  *int        `json:"sliding_window_pattern"`
	FinalLogitSoftcapping *float64    `json:"final_logit_softcapping"`
	AttnLogitSoftcapping  *float64    `json:"attn_logit_softcapping"`
	HiddenActivation      string      `json:"hidden_activation"`
	HiddenAct             string      `json:"hidden_act"`
}

// parseGemma3 fills c.Gemma and both ropes from a Gemma3ForCausalLM config.json.
func parseGemma3(c *Config, data []byte) error {
	var raw gemma3Raw
	if err := json.Unmarshal(data, &raw); err != nil {
		return fmt.Errorf("engine: config.json: %w", err)
	}
	or := func(v *float64, def float64) float64 {
		if v != nil {
			return *v
		}
		return def
	}
	g := GemmaConfig{
		Enabled:            true,
		QueryPreAttnScalar: or(raw.QueryPreAttnScalar, 256),
		FinalSoftcap:       or(raw.FinalLogitSoftcapping, 0),
	}
	c.SlidingWindow = 4096
	if raw.SlidingWindow != nil {
		c.SlidingWindow = *raw.SlidingWindow
	}
	act := raw.HiddenActivation
	if act == "" {
		act = raw.HiddenAct
	}
	switch {
	case act != "" && act != "gelu_pytorch_tanh":
		return fmt.Errorf("engine: config.json: hidden_activation %q is not supported (tfd runs Gemma 3 with gelu_pytorch_tanh)", act)
	case raw.AttnLogitSoftcapping != nil:
		return fmt.Errorf("engine: config.json: attn_logit_softcapping is set; tfd runs Gemma 3 without attention soft-capping, as Google ships it")
	case g.QueryPreAttnScalar <= 0:
		return fmt.Errorf("engine: config.json: query_pre_attn_scalar must be positive, got %g", g.QueryPreAttnScalar)
	case c.SlidingWindow <= 0:
		return fmt.Errorf("engine: config.json: sliding_window must be positive, got %d", c.SlidingWindow)
	}
	var err error
	switch {
	case raw.LayerTypes != nil:
		if c.Sliding, err = slidingLayers(raw.LayerTypes, c.Layers); err != nil {
			return err
		}
	default:
		pattern := 6
		if raw.SlidingWindowPattern != nil {
			pattern = *raw.SlidingWindowPattern
		}
		if pattern <= 0 {
			return fmt.Errorf("engine: config.json: sliding_window_pattern must be positive, got %d", pattern)
		}
		c.Sliding = make([]bool, c.Layers)
		for i := range c.Sliding {
			c.Sliding[i] = (i+1)%pattern != 0
		}
	}
	// The global rope: rope_parameters.full_attention, or rope_theta (1e6) with rope_scaling.
	// The local one: rope_parameters.sliding_attention, or rope_local_base_freq (1e4), unscaled.
	global := &rawConfig{RopeTheta: or(raw.RopeTheta, 1e6), RopeScaling: raw.RopeScaling}
	local := &rawConfig{RopeTheta: or(raw.RopeLocalBaseFreq, 1e4)}
	if p := raw.RopeParameters; p != nil {
		global.RopeParameters, local.RopeParameters = p.Full, p.Sliding
	}
	if c.Rope, err = parseRope(global); err != nil {
		return err
	}
	if g.LocalRope, err = parseRope(local); err != nil {
		return err
	}
	if c.Rope.Type == "yarn" || g.LocalRope.Type == "yarn" {
		// YaRN's attention factor is folded into the one attention scale (Model.allocate),
		// which Gemma's query_pre_attn_scalar sets for both kinds of layer.
		return fmt.Errorf("engine: config.json: Gemma 3 with yarn rope scaling is not supported (tfd runs it with default, linear or llama3)")
	}
	c.Gemma = g
	return nil
}
