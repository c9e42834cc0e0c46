package cpu

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

func BenchmarkTmpPoll(b *testing.B) {
	for _, d := range []time.Duration{0, 50 * time.Microsecond, 200 * time.Microsecond} {
		for _, procs := range []int{1, 2, 4, 8, 16} {
			if procs > runtime.NumCPU() {
				continue
			}
			b.Run(fmt.Sprintf("poll=%v/procs=%d", d, procs), func(b *testing.B) {
				poll = d
				defer func() { poll = 200 * time.Microsecond }()
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
				b.Run("mm1x1024x384", func(b *testing.B) { benchMatMul(b, 384, 1024, 1) })
				b.Run("mm1x8192x384", func(b *testing.B) { benchMatMul(b, 384, 8192, 1) })
				b.Run("mm1x4096x4096", func(b *testing.B) { benchMatMul(b, 4096, 4096, 1) })
				b.Run("mm64x1024x384", func(b *testing.B) { benchMatMul(b, 384, 1024, 64) })
				b.Run("mm64x4096x4096", func(b *testing.B) { benchMatMul(b, 4096, 4096, 64) })
				b.Run("small", func(b *testing.B) {
					be := newTest(b)
					const n = 1 << 16
					x := ften(b, be, randn(1, n), 1, n)
					for b.Loop() {
						be.Add(x, x, x, 1)
					}
				})
			})
		}
	}
}
