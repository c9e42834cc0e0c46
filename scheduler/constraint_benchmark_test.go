package scheduler_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"tfd/grammar"
	"tfd/scheduler"
	"tfd/scheduler/schedulertest"
)

// Decode throughput of the bundled model on the CPU with and without a JSON grammar, side by
// side:
//
//	go test ./scheduler -run '^$' -bench Constrained -benchtime 3x
//
// A constrained reply pays for a mask at every position and, alone and greedy, gives up the
// device's greedy chains. Replies that finish their JSON end early, so compare tok/s.
func BenchmarkConstrained(b *testing.B) {
	m := loadBundled(b, 8*512)
	g, err := grammar.Compile([]byte(testSchema))
	if err != nil {
		b.Fatal(err)
	}
	v := vocabOf(m)
	for _, streams := range []int{1, 4} {
		for _, mode := range []string{"plain", "json_schema", "json_object"} {
			b.Run(fmt.Sprintf("%s/%d", mode, streams), func(b *testing.B) {
				h, err := scheduler.NewShared(m, schedulertest.Equip(m, scheduler.SharedOptions{Layout: slices.Repeat([]int{512}, 8)}))
				if err != nil {
					b.Fatal(err)
				}
				defer h.Close(context.Background())
				reqs := requests(m, streams)
				for i := range reqs {
					switch mode {
					case "json_schema":
						reqs[i].Constraint = grammar.NewMatcher(g, v)
					case "json_object":
						reqs[i].Constraint = grammar.NewMatcher(grammar.AnyObject(), v)
					}
				}
				runStreams(b, h, reqs, scheduler.Drafts{})
			})
		}
	}
}

// BenchmarkMaskBundled times one mask over the bundled model's vocabulary at the states a JSON
// reply passes through.
func BenchmarkMaskBundled(b *testing.B) {
	m := loadBundled(b, 512)
	g, err := grammar.Compile([]byte(testSchema))
	if err != nil {
		b.Fatal(err)
	}
	mt := grammar.NewMatcher(g, vocabOf(m))
	mask := make([]uint64, (m.Vocab()+63)/64)
	for _, prefix := range []string{``, `{"na`, `{"name":`, `{"name":"Ann`, `{"name":"Ann","count":4`} {
		s := mt.Start()
		for _, tok := range m.Tokenizer().Encode(prefix) {
			var ok bool
			if s, ok = mt.Advance(s, tok); !ok {
				b.Fatalf("prefix %s refused", prefix)
			}
		}
		b.Run(fmt.Sprintf("%q", prefix), func(b *testing.B) {
			for b.Loop() {
				mt.Allowed(s, mask)
			}
		})
	}
}
