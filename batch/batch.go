// Package batch is the vocabulary the engine and the scheduler share: the rows of one forward,
// the rows of a draft pass over a model's MTP head, and session layouts with their one text
// form. It is a leaf: it imports nothing of tfd, so the engine can speak it without knowing the
// scheduler, as Ollama's model and runner share model/input.
package batch

// Row is one token of one session in a forward.
type Row struct {
	// Base is the session's first KV slot; the token's keys and values go to slot Base+Pos.
	Base int
	// Pos is the token's absolute position in its sequence.
	Pos int
	// Token is the input token id.
	Token int32
	// Logits asks for this row's logits.
	Logits bool
	// Pick asks, of a Picker, for the row's greedy pick alone (Argmax of its logits) instead of
	// its logits; a row asks for one or the other.
	Pick bool
}

// Argmax returns the index of the largest of logits, ties to the lowest: a greedy pick. It is
// the loop that moves to i where logits[i] > logits[best], from best = 0, so a NaN is passed
// over (and logits[0] NaN gives 0), and −0 does not replace +0.
//
// A decoding stream that reads its logits back waits on this pick before its next forward: a
// vocabulary of 151,936 took 88 µs a pick in that loop on this project's machine, a sixtieth of
// an 8B token on the H200. Four lanes, each that loop over every fourth logit from best = 0,
// break its chain of dependent compares (44 µs, BenchmarkArgmax); the lanes' answers, each the
// lowest index of its largest, combine into the loop's.
func Argmax(logits []float32) int32 {
	if len(logits) == 0 {
		return 0
	}
	var at [4]int
	var top [4]float32
	for k := range top {
		top[k] = logits[0]
	}
	i := 0
	for ; i+4 <= len(logits); i += 4 {
		v := logits[i : i+4 : i+4]
		if v[0] > top[0] {
			top[0], at[0] = v[0], i
		}
		if v[1] > top[1] {
			top[1], at[1] = v[1], i+1
		}
		if v[2] > top[2] {
			top[2], at[2] = v[2], i+2
		}
		if v[3] > top[3] {
			top[3], at[3] = v[3], i+3
		}
	}
	for ; i < len(logits); i++ {
		if logits[i] > top[0] {
			top[0], at[0] = logits[i], i
		}
	}
	best := 0
	for k := range at {
		// A lane that found nothing above logits[0] holds 0 and logits[0]; the lowest index of
		// the largest wins, as the loop's first of its largest does.
		if top[k] > top[best] || (top[k] == top[best] && at[k] < at[best]) {
			best = k
		}
	}
	return int32(at[best])
}

// DraftRow is one position of a stream fed to a model's MTP head after a forward: the head reads
// the hidden state that the forward's row Source computed at position Pos, and Token, the token at
// Pos+1. A chained row reads instead the head's own output at Pos-1, the hidden state behind the
// draft logits row Source of the last Draft call, so the head can draft a chain: its draft for
// Pos+1 fed back as Token, it drafts Pos+2.
type DraftRow struct {
	Base   int // the session's first KV slot
	Pos    int
	Token  int32
	Source int  // index of the row in the last forward, or, chained, of the logits row of the last draft
	Logits bool // ask for the draft logits of the token at Pos+2
	// Chained reads the hidden state from the head's last Draft call rather than the last forward.
	// A call's rows are all chained or none is.
	Chained bool
}
