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

// Argmax returns the index of the largest of logits, ties to the lowest: a greedy pick.
func Argmax(logits []float32) int32 {
	best := 0
	for i, l := range logits {
		if l > logits[best] {
			best = i
		}
	}
	return int32(best)
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
