package cpu

import (
	"testing"

	"tfd/compute"
)

// BenchmarkKQuantMatMul is BenchmarkQuantMatMul's decode of the gate layer (1024 → 3072) with
// Q4_K and Q6_K weights beside Q4_0 and Q8_0, with the assembly kernels (AVX2 or NEON) and (go/…) the Go ones.
func BenchmarkKQuantMatMul(b *testing.B) {
	for _, kind := range []string{"asm", "go"} {
		for _, dt := range []compute.DType{compute.Q4_0, compute.Q8_0, compute.Q4_K, compute.Q6_K} {
			b.Run(kind+"/"+dt.String(), func(b *testing.B) {
				if kind == "asm" && !useQuantAsm && !useNEON {
					b.Skip("no assembly kernels here")
				}
				savedAsm, savedNEON := useQuantAsm, useNEON
				useQuantAsm, useNEON = kind == "asm" && savedAsm, kind == "asm" && savedNEON
				defer func() { useQuantAsm, useNEON = savedAsm, savedNEON }()
				benchQuantMatMul(b, dt, 1024, 3072, 1)
			})
		}
	}
}
