package scheduler_test

import (
	"testing"

	"tfd/compute"
	"tfd/scheduler/schedulertest"
)

// BenchmarkLoneDrafts: one stream alone making 512 tokens of the bundled model on the CPU, drafts
// off, n-gram copies only, and MTP chains of depth 1, 2 and 3, interleaved (enginetest.BenchLoneDrafts):
//
//	go test ./scheduler -run '^$' -bench LoneDrafts -benchtime 3x
func BenchmarkLoneDrafts(b *testing.B) {
	cb, err := compute.Open("cpu")
	if err != nil {
		b.Fatal(err)
	}
	defer cb.Close()
	schedulertest.BenchLoneDrafts(b, cb)
}
