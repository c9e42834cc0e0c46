package cuda

import (
	"context"
	"os"
	"testing"
	"time"

	"tfd/engine"
	"tfd/engine/enginetest"
	"tfd/scheduler"
	"tfd/scheduler/schedulertest"
)

// BenchmarkFirstTokenAfterIdle measures what the keep-warm tick buys: the time to the first
// token of a short request on the bundled model after the host sat idle (10 s, or
// TFD_IDLE_SECONDS), with the tick off and on. Each iteration idles outside the timer.
//
//	./bin/cuda.test -test.run '^$' -test.bench FirstTokenAfterIdle -test.benchtime 3x
func BenchmarkFirstTokenAfterIdle(b *testing.B) {
	idle := 10 * time.Second
	if s := os.Getenv("TFD_IDLE_SECONDS"); s != "" {
		d, err := time.ParseDuration(s + "s")
		if err != nil {
			b.Fatalf("TFD_IDLE_SECONDS=%q: %v", s, err)
		}
		idle = d
	}
	for _, tc := range []struct {
		name string
		keep time.Duration
	}{{"tick=off", 0}, {"tick=on", time.Minute}} {
		b.Run(tc.name, func(b *testing.B) {
			m := enginetest.Load(b, openCUDA(b), "models/gopher", engine.Options{Context: 512, MaxRows: 64})
			h, err := scheduler.NewShared(m, schedulertest.Equip(m, scheduler.SharedOptions{Layout: []int{512}, KeepWarm: tc.keep}))
			if err != nil {
				b.Fatal(err)
			}
			defer h.Close(context.Background())
			req := scheduler.Request{Prompt: m.Tokenizer().Encode("func main() {\n"), MaxTokens: 1}
			first := func() time.Duration {
				start := time.Now()
				events, err := h.Submit(context.Background(), req)
				if err != nil {
					b.Fatal(err)
				}
				var took time.Duration
				for ev := range events {
					if took == 0 && !ev.Done {
						took = time.Since(start)
					}
				}
				return took
			}
			first() // kernels compiled, graphs captured: what idling loses is what is measured
			var total time.Duration
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				time.Sleep(idle)
				b.StartTimer()
				total += first()
			}
			b.ReportMetric(float64(total.Microseconds())/float64(b.N)/1000, "ms/first-token")
		})
	}
}
