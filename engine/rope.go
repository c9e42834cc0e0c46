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
