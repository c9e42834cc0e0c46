package cpu

import (
	"fmt"
	"math"
	"runtime"
	"testing"

	"tfd/compute"
)

// newTest returns a backend that is closed when the test ends.
func newTest(t testing.TB) *backend {
	t.Helper()
	b := newBackend()
	t.Cleanup(func() { b.Close() })
	return b
}

// ften returns an F32 tensor of the given shape holding a copy of data (zero-padded).
func ften(t testing.TB, b *backend, data []float32, shape ...int) *tensor {
	t.Helper()
	tt, err := b.Alloc(compute.F32, shape...)
	if err != nil {
		t.Fatal(err)
	}
	copy(tt.(*tensor).f, data)
	return tt.(*tensor)
}

// iten is ften for I32.
func iten(t testing.TB, b *backend, data []int32, shape ...int) *tensor {
	t.Helper()
	tt, err := b.Alloc(compute.I32, shape...)
	if err != nil {
		t.Fatal(err)
	}
	copy(tt.(*tensor).i, data)
	return tt.(*tensor)
}

// forKernels runs f once with each kind of kernel this machine has (assembly, pure Go).
func forKernels(t *testing.T, f func(t *testing.T)) {
	kinds := []bool{false}
	if asmSupported {
		kinds = append(kinds, true)
	}
	saved := useAsm
	defer func() { useAsm = saved }()
	for _, asm := range kinds {
		name := "go"
		if asm {
			name = "asm"
		}
		useAsm = asm
		t.Run(name, f)
	}
}

// withProcs runs f with GOMAXPROCS set to procs, then restores it.
func withProcs(procs int, f func()) {
	saved := runtime.GOMAXPROCS(procs)
	defer runtime.GOMAXPROCS(saved)
	f()
}

// procsToTry are the GOMAXPROCS values invariance tests compare: serial, and more goroutines than
// this machine has cores, which splits work in other places.
var procsToTry = []int{1, 3, 8}

// check reports got[i] against want[i] within tol·mag[i] (mag: the magnitude the error scales
// with, such as Σ|xᵢwᵢ| for a dot product), at most a few failures.
func check(t *testing.T, what string, got []float32, want, mag []float64, tol float64) {
	t.Helper()
	bad := 0
	for i := range want {
		g := float64(got[i])
		if math.IsNaN(g) || math.Abs(g-want[i]) > tol*mag[i]+1e-30 {
			if bad++; bad <= 5 {
				t.Errorf("%s[%d] = %v, want %v (±%.3g)", what, i, g, want[i], tol*mag[i])
			}
		}
	}
	if bad > 5 {
		t.Errorf("%s: %d of %d elements wrong", what, bad, len(want))
	}
}

// name joins test-name parts.
func name(parts ...any) string {
	s := ""
	for i, p := range parts {
		if i > 0 {
			s += "/"
		}
		s += fmt.Sprint(p)
	}
	return s
}

func kvSpec(layers, kvHeads, hd, slots int) compute.KVSpec {
	return compute.KVSpec{Layers: layers, KVHeads: kvHeads, HeadDim: hd, Slots: slots}
}
