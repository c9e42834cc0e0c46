package engine

import "math"

// invFreq returns the rotary embedding's inverse frequencies for one head, headDim/2 values,
// computed in float32 step by step as transformers computes them, so the angles match its bits as
// closely as float32 allows.
func invFreq(r RopeConfig, headDim int) []float32 {
	half := headDim / 2
	freqs := make([]float32, half)
	for i := range freqs {
		exponent := float32(2*i) / float32(headDim)
		freqs[i] = 1 / float32(math.Pow(r.Theta, float64(exponent)))
	}
	switch r.Type {
	case "llama3":
		applyLlama3Scaling(freqs, r)
	case "yarn":
		applyYarn(freqs, r, headDim)
	case "linear":
		// transformers divides the frequencies, in float32, rather than the positions.
		for i := range freqs {
			freqs[i] /= float32(r.Factor)
		}
	}
	for i, f := range r.FreqFactors {
		freqs[i] /= f
	}
	return freqs
}

// applyLlama3Scaling stretches the low frequencies by Factor, keeps the high ones, and blends
// between them (Llama 3.1's long-context recipe).
func applyLlama3Scaling(freqs []float32, r RopeConfig) {
	oldContext := float32(r.OriginalMaxPositionEmbs)
	low, high, factor := float32(r.LowFreqFactor), float32(r.HighFreqFactor), float32(r.Factor)
	lowFreqWavelen := oldContext / low
	highFreqWavelen := oldContext / high
	for i, f := range freqs {
		wavelen := float32(2*math.Pi) / f
		switch {
		case wavelen < highFreqWavelen:
			// High frequency: unchanged.
		case wavelen > lowFreqWavelen:
			freqs[i] = f / factor
		default:
			smooth := (oldContext/wavelen - low) / (high - low)
			freqs[i] = (1-smooth)*f/factor + smooth*f
		}
	}
}

// applyYarn blends, dimension by dimension, the frequencies as they are (extrapolation) with
// them divided by Factor (interpolation), by a ramp between the dimensions that turn BetaFast and
// BetaSlow times over the original context: YaRN as transformers' _compute_yarn_parameters
// computes it, in float32 where it does (the correction range in float64, as Python's floats).
func applyYarn(freqs []float32, r RopeConfig, headDim int) {
	fast, slow := r.BetaFast, r.BetaSlow
	if fast == 0 {
		fast = 32
	}
	if slow == 0 {
		slow = 1
	}
	dim := float64(headDim)
	correction := func(rotations float64) float64 {
		return dim * math.Log(float64(r.OriginalMaxPositionEmbs)/(rotations*2*math.Pi)) / (2 * math.Log(r.Theta))
	}
	low, high := correction(fast), correction(slow)
	if r.Truncate {
		low, high = math.Floor(low), math.Ceil(high)
	}
	low, high = max(low, 0), min(high, dim-1)
	if low == high {
		high += 0.001 // transformers' guard against a zero-width ramp
	}
	factor := float32(r.Factor)
	for i, extrapolation := range freqs {
		// base^(2i/dim) as invFreq computes it before inverting.
		pos := float32(math.Pow(r.Theta, float64(float32(2*i)/float32(headDim))))
		interpolation := 1 / float32(factor*pos)
		ramp := (float32(i) - float32(low)) / float32(high-low)
		ramp = min(max(ramp, 0), 1)
		extra := 1 - ramp
		// The conversions keep Go from fusing a multiply and an add.
		freqs[i] = float32(interpolation*float32(1-extra)) + float32(extrapolation*extra)
	}
}

// yarnAttentionFactor is the factor transformers multiplies YaRN's cos and sin by: the config's
// attention_factor, or 0.1·ln(factor) + 1 (with mscale and mscale_all_dim, their ratio).
func yarnAttentionFactor(p *ropeParams, factor float64) float64 {
	if p.AttentionFactor != nil {
		return *p.AttentionFactor
	}
	mscale := func(scale, m float64) float64 {
		if scale <= 1 {
			return 1
		}
		return 0.1*m*math.Log(scale) + 1
	}
	if p.MScale != 0 && p.MScaleAllDim != 0 {
		return mscale(factor, p.MScale) / mscale(factor, p.MScaleAllDim)
	}
	return mscale(factor, 1)
}
