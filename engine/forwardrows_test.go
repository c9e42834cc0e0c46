package engine

import (
	"testing"

	"tfd/compute"
)

// sizedBackend is a backend that states the rows its forwards should take.
type sizedBackend struct {
	compute.Backend
	rows int
}

func (b sizedBackend) ForwardRows() int { return b.rows }

// TestForwardRows: a backend's preferred rows a forward, only for models whose sessions keep
// nothing sized by a forward's rows.
func TestForwardRows(t *testing.T) {
	dense := Config{Layers: 2}
	sliding := Config{Layers: 2, Sliding: []bool{true, false}, SlidingWindow: 128}
	hybrid := Config{Layers: 2, Next: NextConfig{Enabled: true, Linear: []bool{true, false}, VHeads: 2, KDim: 8, VDim: 8}}
	for _, c := range []struct {
		name string
		b    compute.Backend
		cfg  Config
		want int
	}{
		{"dense, 512 preferred", sizedBackend{rows: 512}, dense, 512},
		{"dense, no preference", sizedBackend{rows: 512}.Backend, dense, DefaultMaxRows},
		{"sliding window, 512 preferred", sizedBackend{rows: 512}, sliding, DefaultMaxRows},
		{"hybrid, 512 preferred", sizedBackend{rows: 512}, hybrid, DefaultMaxRows},
	} {
		if got := ForwardRows(c.b, c.cfg); got != c.want {
			t.Errorf("%s: %d rows a forward, want %d", c.name, got, c.want)
		}
	}
}
