package scheduler_test

import (
	"testing"

	"tfd/compute"
	"tfd/scheduler/schedulertest"
)

// openCPU opens the cpu backend, closed when the benchmark ends.
func openCPU(b *testing.B) compute.Backend {
	cb, err := compute.Open("cpu")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cb.Close() })
	return cb
}

// BenchmarkLoneDrafts: one stream alone making 512 tokens of the bundled model on the CPU, drafts
// off, n-gram copies only, and MTP chains of depth 1, 2 and 3, interleaved (schedulertest.BenchLoneDrafts):
//
//	go test ./scheduler -run '^$' -bench LoneDrafts -benchtime 3x
func BenchmarkLoneDrafts(b *testing.B) {
	schedulertest.BenchLoneDrafts(b, openCPU(b))
}

// BenchmarkLone: issue 13's lone-stream benchmark on the bundled model on the CPU: code, prose and
// an edit, one session against auto's layout, drafts off, n-gram, MTP depths and the default
// (schedulertest.BenchLone):
//
//	go test ./scheduler -run '^$' -bench 'Lone$' -benchtime 2x
func BenchmarkLone(b *testing.B) {
	schedulertest.BenchLone(b, openCPU(b), "models/gopher")
}
