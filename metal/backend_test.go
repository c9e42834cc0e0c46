//go:build darwin && arm64

package metal

import (
	"errors"
	"log/slog"
	"testing"

	"tfd/compute"
	"tfd/compute/computetest"
	_ "tfd/cpu"
	"tfd/kernels"
)

// The Metal backend's tests, run on a Mac by make test-metal. They mirror tfd/cuda's: each op
// against the cpu backend (ops_test.go), batch invariance bit for bit (invariance_test.go), the
// engine against the transformers oracle and the scheduler's exactness (engine_test.go), then
// first token after idle and sustained decode (idle_test.go). Where this Mac has no Metal device
// they skip and say why; any other failure to open (the MSL not compiling, a pipeline failing its
// checks) fails them.

// openMetal opens a metal backend through compute.Open, closed when the test ends.
func openMetal(t testing.TB) compute.Backend {
	t.Helper()
	b, err := compute.Open("metal")
	return opened(t, b, err)
}

// openWith opens a metal backend with the given residency settings.
func openWith(t testing.TB, opts compute.ResidencyOptions) compute.Backend {
	t.Helper()
	b, err := open(opts, slog.Default())
	return opened(t, b, err)
}

func opened(t testing.TB, b compute.Backend, err error) compute.Backend {
	t.Helper()
	if errors.Is(err, compute.ErrNoDevice) {
		t.Skipf("no Metal device here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return b
}

// newPair returns a metal and a cpu backend to feed the same data, closed when the test ends.
func newPair(t testing.TB) *computetest.Pair {
	t.Helper()
	g := openMetal(t)
	c, err := compute.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return computetest.NewPair(t, g, c)
}

// TestOpenCompilesEveryKernel: Open compiled kernels.Metal() with Apple's compiler and made a
// pipeline of every kernel it launches that passed its checks (SIMD groups of 32, room for its
// threads).
func TestOpenCompilesEveryKernel(t *testing.T) {
	b := openMetal(t).(*backend)
	want := 0
	for _, k := range kernels.All() {
		if launched(k.Name) {
			want++
			if b.pipes[k.Name] == nil {
				t.Errorf("no pipeline for %s", k.Name)
			}
		}
	}
	if len(b.pipes) != want {
		t.Errorf("%d pipelines for the %d kernels launched", len(b.pipes), want)
	}
	t.Logf("%s: %d kernels compiled; Memory() = %d bytes", b.Describe(), len(b.pipes), b.Memory())
}

// TestWriteInt32AfterEncodedReaders: an op encoded before a WriteInt32 of its input reads the
// old value (the write waits for it), and one encoded after reads the new.
func TestWriteInt32AfterEncodedReaders(t *testing.T) {
	b := openMetal(t)
	table := computetest.UploadF32(t, b, computetest.Randn(1, 10*8), 10, 8)
	ids := computetest.UploadI32(t, b, []int32{3})
	x, _ := b.Alloc(compute.F32, 1, 8)
	y, _ := b.Alloc(compute.F32, 1, 8)
	b.Embed(x, table, ids, 1)
	b.WriteInt32(ids, []int32{7})
	b.Embed(y, table, ids, 1)
	all := computetest.ReadOne(t, b, table, 80)
	computetest.SameBits(t, "the op before the write", computetest.ReadOne(t, b, x, 8), all[3*8:4*8])
	computetest.SameBits(t, "the op after the write", computetest.ReadOne(t, b, y, 8), all[7*8:8*8])
}

// TestResidencyComesBeforeTensors: SetResidency takes settings before the first tensor only.
func TestResidencyComesBeforeTensors(t *testing.T) {
	b := openMetal(t)
	r, ok := b.(compute.Resident)
	if !ok {
		t.Fatal("the metal backend is no compute.Resident")
	}
	if err := r.SetResidency(compute.ResidencyOptions{Enabled: false}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Alloc(compute.F32, 4); err != nil {
		t.Fatal(err)
	}
	if err := r.SetResidency(DefaultResidency(), nil); err == nil {
		t.Error("SetResidency after an Alloc was taken")
	}
}

// TestWarmTicks: the idle tick runs with residency on and off, and ops go on after it.
func TestWarmTicks(t *testing.T) {
	for _, on := range []bool{true, false} {
		b := openWith(t, compute.ResidencyOptions{Enabled: on})
		x := computetest.UploadF32(t, b, []float32{1, 2, 3, 4}, 1, 4)
		w := b.(interface{ Warm() error })
		for range 3 {
			if err := w.Warm(); err != nil {
				t.Fatalf("residency %v: Warm: %v", on, err)
			}
		}
		b.Add(x, x, x, 1)
		computetest.SameBits(t, "x+x after the ticks", computetest.ReadOne(t, b, x, 4), []float32{2, 4, 6, 8})
		// On: a set on macOS 15 and later, none before (the keeper logs which); ticks either way.
		st := b.(compute.Resident).ResidencyStats()
		if st.Ticks != 3 || (!on && st.On) {
			t.Errorf("residency %v: %+v after three ticks", on, st)
		}
		t.Logf("residency %v: %+v", on, st)
	}
}
