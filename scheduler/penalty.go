package scheduler

import "slices"

// Penalties change a stream's logits before each draw, from what the stream holds so far. They
// run in one fixed order, each on the result of the one before, as llama.cpp's sampler chain
// does:
//
//  1. logit bias: l += Bias[id];
//  2. repetition (HF's and llama.cpp's): for each id in the prompt or the reply so far, l /= r
//     when l > 0, l *= r otherwise;
//  3. frequency and presence (OpenAI's): l -= c·Frequency + (c > 0)·Presence, where c counts id
//     among the reply's generated tokens so far (the prompt does not count).
//
// The draw then filters and samples the result as Sampling says. Each logit's change depends only
// on its own value, its id's counts and the settings, in float32, so a penalised reply is as
// exact as any other: the counts are the stream's own tokens at the moment of the draw, the same
// whether a token came from a plain round or from a verified draft.
type Penalties struct {
	// Presence is subtracted once from every token already generated; OpenAI's range -2 to 2.
	Presence float32
	// Frequency is subtracted once per time a token was generated; OpenAI's range -2 to 2.
	Frequency float32
	// Repetition divides positive logits and multiplies negative ones of every token in the
	// prompt or the reply; 0 or 1 is off, above 1 discourages repeats.
	Repetition float32
	// Bias is added to the logit of each token id it names, before anything else.
	Bias map[int32]float32
}

// Active reports whether p changes any logit.
func (p Penalties) Active() bool {
	return p.Presence != 0 || p.Frequency != 0 || (p.Repetition != 0 && p.Repetition != 1) || len(p.Bias) > 0
}

// penaltyState is what one stream's penalties read: how often each token was generated and which
// tokens the prompt holds, brought up to date from the stream's tokens before each draw. Only the
// lane goroutine touches it.
type penaltyState struct {
	counted   int                // tokens of active.tokens already counted
	generated map[int32]int32    // times each id was generated
	prompt    map[int32]struct{} // ids in the prompt, for the repetition penalty
	buf       []float32          // the penalised row, reused
}

// penalised returns logits as a's penalties leave them for its next draw: logits itself when it
// has none, else a copy (the model's row stays untouched, for logprobs).
func (a *active) penalised(logits []float32) []float32 {
	if !a.req.Sampling.Penalties.Active() {
		return logits
	}
	a.countPenalties()
	a.pen.buf = a.penalisedAfter(logits, nil, a.pen.buf)
	return a.pen.buf
}

// countPenalties brings a's penalty counts up to its tokens.
func (a *active) countPenalties() {
	p := a.req.Sampling.Penalties
	a.pen.count(a.tokens, len(a.req.Prompt), p.Repetition != 0 && p.Repetition != 1)
}

// penalisedAfter returns, in buf, logits as a's penalties would leave them for the draw after its
// tokens and then extra (drafts not yet accepted): what penalised returns once extra is among
// the tokens, the same bits, since every logit's change depends only on its own value, its id's
// counts and the settings. a's counts must be up to date (countPenalties) and are only read, so
// calls for different extras may run side by side.
func (a *active) penalisedAfter(logits []float32, extra []int32, buf []float32) []float32 {
	p, s := a.req.Sampling.Penalties, &a.pen
	out := append(buf[:0], logits...)
	for id, b := range p.Bias {
		if id >= 0 && int(id) < len(out) {
			out[id] += b
		}
	}
	// extraFirst: extra[i] is the first of its id in extra and the counts do not hold it.
	extraFirst := func(i int) bool {
		_, generated := s.generated[extra[i]]
		return !generated && !slices.Contains(extra[:i], extra[i])
	}
	if r := p.Repetition; r != 0 && r != 1 {
		for id := range s.prompt {
			out[id] = repeated(out[id], r)
		}
		for id := range s.generated {
			if _, inPrompt := s.prompt[id]; !inPrompt {
				out[id] = repeated(out[id], r)
			}
		}
		for i, id := range extra {
			if _, inPrompt := s.prompt[id]; !inPrompt && extraFirst(i) {
				out[id] = repeated(out[id], r)
			}
		}
	}
	if p.Frequency != 0 || p.Presence != 0 {
		for id, c := range s.generated {
			out[id] -= float32(c+countOf(extra, id))*p.Frequency + p.Presence
		}
		for i, id := range extra {
			if extraFirst(i) {
				out[id] -= float32(countOf(extra, id))*p.Frequency + p.Presence
			}
		}
	}
	return out
}

// countOf returns how many times id occurs in ids.
func countOf(ids []int32, id int32) int32 {
	var n int32
	for _, x := range ids {
		if x == id {
			n++
		}
	}
	return n
}

// repeated applies the repetition penalty r to one logit.
func repeated(l, r float32) float32 {
	if l > 0 {
		return l / r
	}
	return l * r
}

// count brings the counts up to tokens, whose first promptLen are the prompt; the prompt's ids
// are kept only when the repetition penalty reads them.
func (s *penaltyState) count(tokens []int32, promptLen int, wantPrompt bool) {
	if s.generated == nil {
		s.generated, s.prompt = map[int32]int32{}, map[int32]struct{}{}
	}
	for ; s.counted < len(tokens); s.counted++ {
		id := tokens[s.counted]
		switch {
		case s.counted >= promptLen:
			s.generated[id]++
		case wantPrompt:
			s.prompt[id] = struct{}{}
		}
	}
}
