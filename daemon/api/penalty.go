package api

import (
	"math"
	"strconv"

	"tfd/daemon/config"
	"tfd/scheduler"
)

// penaltyParams are the request fields that change the logits before each draw.
type penaltyParams struct {
	PresencePenalty   *float64 `json:"presence_penalty"`
	FrequencyPenalty  *float64 `json:"frequency_penalty"`
	RepetitionPenalty *float64 `json:"repetition_penalty"`
	// LogitBias maps token ids, written as strings as in OpenAI's API, to a bias from -100 to 100.
	LogitBias map[string]float64 `json:"logit_bias"`
}

// penalties validates p's penalty fields with OpenAI's ranges (repetition_penalty, which OpenAI
// lacks, with vLLM's: above 0) and returns what the scheduler applies. An unset
// repetition_penalty takes the config's [sampling] default, then the model's
// generation_config.json (as vLLM and transformers do), then 1 (off).
func (h *Handler) penalties(p *penaltyParams, cfg config.SamplingConfig) (scheduler.Penalties, *apiError) {
	var out scheduler.Penalties
	for _, c := range []struct {
		param string
		v     *float64
		dst   *float32
	}{
		{"presence_penalty", p.PresencePenalty, &out.Presence},
		{"frequency_penalty", p.FrequencyPenalty, &out.Frequency},
	} {
		if c.v == nil {
			continue
		}
		if !(*c.v >= -2 && *c.v <= 2) {
			return out, badRequest(c.param, "%s must be from -2 to 2 (0 is off), got %g", c.param, *c.v)
		}
		*c.dst = float32(*c.v)
	}
	if r := p.RepetitionPenalty; r != nil {
		if !(*r > 0) || math.IsInf(*r, 1) {
			return out, badRequest("repetition_penalty", "repetition_penalty must be a number above 0 (1 is off, above 1 discourages repeats), got %g", *r)
		}
	}
	out.Repetition = float32(pick(p.RepetitionPenalty, cfg.RepetitionPenalty, h.served.Defaults.RepetitionPenalty, 1))
	if len(p.LogitBias) == 0 {
		return out, nil
	}
	out.Bias = make(map[int32]float32, len(p.LogitBias))
	for key, b := range p.LogitBias {
		id, err := strconv.ParseInt(key, 10, 32)
		if err != nil || id < 0 || (h.served.VocabSize > 0 && id >= int64(h.served.VocabSize)) {
			return out, badRequest("logit_bias", "logit_bias has the key %q: keys must be token ids from 0 to %d, written as strings", key, h.served.VocabSize-1)
		}
		if !(b >= -100 && b <= 100) {
			return out, badRequest("logit_bias", "logit_bias[%q] is %g: a bias must be from -100 to 100", key, b)
		}
		out.Bias[int32(id)] = float32(b)
	}
	return out, nil
}
