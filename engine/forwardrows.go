package engine

import (
	"math"

	"tfd/compute"
)

// DefaultMaxRows is the rows one forward takes unless Options.MaxRows says otherwise.
const DefaultMaxRows = 256

// ForwardRows is the rows one forward of a model of config c should take on b (Options.MaxRows):
// what b prefers (compute.ForwardSizer), or DefaultMaxRows where b states nothing or where c's
// sessions keep state that grows with a forward's rows, which every session would pay for: a
// sliding window's rings (RingLength) and a hybrid model's DeltaNet snapshots (StateBytes).
// Only a prompt fills a forward larger than DefaultMaxRows, and only its newest row asks for
// logits, so a caller that takes more keeps Options.LogitRows at DefaultMaxRows, as the daemon
// does: the logits, most of the scratch, then do not grow with it.
func ForwardRows(b compute.Backend, c Config) int {
	s, ok := b.(compute.ForwardSizer)
	if !ok || c.RingLength(math.MaxInt32, DefaultMaxRows) > 0 || c.StateBytes(1) > 0 {
		return DefaultMaxRows
	}
	return max(s.ForwardRows(), 1)
}
