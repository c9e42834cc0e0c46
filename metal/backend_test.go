//go:build darwin && arm64

package metal

import (
	"encoding/binary"
	"errors"
	"log/slog"
	"strings"
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
func openWith(t testing.TB, opts ResidencyOptions) compute.Backend {
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

// pair is a metal and a cpu backend fed the same data; index 0 is metal, 1 is cpu.
type pair struct {
	t  testing.TB
	bs [2]compute.Backend
}

// tt is one tensor on both backends of a pair.
type tt [2]compute.Tensor

func newPair(t testing.TB) *pair {
	t.Helper()
	g := openMetal(t)
	c, err := compute.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &pair{t: t, bs: [2]compute.Backend{g, c}}
}

func (p *pair) upload(dtype compute.DType, data []byte, shape ...int) tt {
	p.t.Helper()
	var out tt
	for i, b := range p.bs {
		t, err := b.Upload(dtype, shape, data)
		if err != nil {
			p.t.Fatal(err)
		}
		out[i] = t
	}
	return out
}

// f32 uploads data as an F32 tensor, zero-padded to the shape.
func (p *pair) f32(data []float32, shape ...int) tt {
	p.t.Helper()
	n := 1
	for _, d := range shape {
		n *= d
	}
	full := make([]float32, n)
	copy(full, data)
	return p.upload(compute.F32, computetest.F32Bytes(full), shape...)
}

func (p *pair) i32(data []int32, shape ...int) tt {
	p.t.Helper()
	n := 1
	for _, d := range shape {
		n *= d
	}
	b := make([]byte, 4*n)
	for i, v := range data {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(v))
	}
	return p.upload(compute.I32, b, shape...)
}

// weights rounds data to dtype in place (so the caller holds the values both backends see) and
// uploads it in dtype.
func (p *pair) weights(dtype compute.DType, data []float32, shape ...int) tt {
	p.t.Helper()
	return p.upload(dtype, computetest.Encode(dtype, data), shape...)
}

// do runs f on both backends.
func (p *pair) do(f func(b compute.Backend, i int)) {
	for i, b := range p.bs {
		f(b, i)
	}
}

// read returns the first n elements of t from each backend, after checking Sync.
func (p *pair) read(t tt, n int) (gpu, cpu []float32) {
	p.t.Helper()
	out := [2][]float32{make([]float32, n), make([]float32, n)}
	for i, b := range p.bs {
		if err := b.ReadFloat32(t[i], out[i]); err != nil {
			p.t.Fatalf("%s: %v", b.Name(), err)
		}
	}
	return out[0], out[1]
}

// readOne reads n elements of a tensor of one backend.
func readOne(t testing.TB, b compute.Backend, x compute.Tensor, n int) []float32 {
	t.Helper()
	out := make([]float32, n)
	if err := b.ReadFloat32(x, out); err != nil {
		t.Fatal(err)
	}
	return out
}

func uploadF32(t testing.TB, b compute.Backend, data []float32, shape ...int) compute.Tensor {
	t.Helper()
	x, err := b.Upload(compute.F32, shape, computetest.F32Bytes(data))
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func uploadI32(t testing.TB, b compute.Backend, data []int32) compute.Tensor {
	t.Helper()
	x, err := b.Alloc(compute.I32, len(data))
	if err != nil {
		t.Fatal(err)
	}
	b.WriteInt32(x, data)
	return x
}

// TestOpenCompilesEveryKernel: Open compiled kernels.Metal() with Apple's compiler and made a
// pipeline of every kernel that passed its checks (SIMD groups of 32, room for its threads).
func TestOpenCompilesEveryKernel(t *testing.T) {
	b := openMetal(t).(*backend)
	if len(b.pipes) != len(kernels.All()) {
		t.Errorf("%d pipelines for %d kernels", len(b.pipes), len(kernels.All()))
	}
	t.Logf("%s: %d kernels compiled; Memory() = %d bytes", b.Describe(), len(b.pipes), b.Memory())
}

// TestWriteInt32AfterEncodedReaders: an op encoded before a WriteInt32 of its input reads the
// old value (the write waits for it), and one encoded after reads the new.
func TestWriteInt32AfterEncodedReaders(t *testing.T) {
	b := openMetal(t)
	table := uploadF32(t, b, computetest.Randn(1, 10*8), 10, 8)
	ids := uploadI32(t, b, []int32{3})
	x, _ := b.Alloc(compute.F32, 1, 8)
	y, _ := b.Alloc(compute.F32, 1, 8)
	b.Embed(x, table, ids, 1)
	b.WriteInt32(ids, []int32{7})
	b.Embed(y, table, ids, 1)
	all := readOne(t, b, table, 80)
	computetest.SameBits(t, "the op before the write", readOne(t, b, x, 8), all[3*8:4*8])
	computetest.SameBits(t, "the op after the write", readOne(t, b, y, 8), all[7*8:8*8])
}

// TestResidencyComesBeforeTensors: SetResidency takes settings before the first tensor only.
func TestResidencyComesBeforeTensors(t *testing.T) {
	b := openMetal(t)
	r, ok := b.(Residency)
	if !ok {
		t.Fatal("the metal backend is no Residency")
	}
	if err := r.SetResidency(ResidencyOptions{Enabled: false}, nil); err != nil {
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
		b := openWith(t, ResidencyOptions{Enabled: on})
		x := uploadF32(t, b, []float32{1, 2, 3, 4}, 1, 4)
		w := b.(interface{ Warm() error })
		for range 3 {
			if err := w.Warm(); err != nil {
				t.Fatalf("residency %v: Warm: %v", on, err)
			}
		}
		b.Add(x, x, x, 1)
		computetest.SameBits(t, "x+x after the ticks", readOne(t, b, x, 4), []float32{2, 4, 6, 8})
		// On: a set on macOS 15 and later, none before (the keeper logs which); ticks either way.
		st := b.(Residency).ResidencyStats()
		if st.Ticks != 3 || (!on && st.On) {
			t.Errorf("residency %v: %+v after three ticks", on, st)
		}
		t.Logf("residency %v: %+v", on, st)
	}
}

// TestDataErrors checks that kernels report bad tokens, indices and slots at the next Sync, and
// that the Sync after it is clean.
func TestDataErrors(t *testing.T) {
	b := openMetal(t)
	table := uploadF32(t, b, computetest.Randn(1, 10*8), 10, 8)
	x, _ := b.Alloc(compute.F32, 2, 8)
	b.Embed(x, table, uploadI32(t, b, []int32{3, 10}), 2)
	if err := b.Sync(); err == nil || !strings.Contains(err.Error(), "token 10 of row 1") {
		t.Errorf("Embed of token 10 of 10: Sync = %v", err)
	}
	if got := readOne(t, b, x, 16); got[8] != 0 || got[0] == 0 {
		t.Errorf("Embed: row 0 %v, row 1 %v (want the table's row, then zeros)", got[:8], got[8:])
	}
	kv, err := b.NewKV(compute.KVSpec{Layers: 1, KVHeads: 1, HeadDim: 8, Slots: 4})
	if err != nil {
		t.Fatal(err)
	}
	k := uploadF32(t, b, computetest.Randn(2, 8), 1, 8)
	b.KVWrite(kv, 0, k, k, uploadI32(t, b, []int32{2}), uploadI32(t, b, []int32{2}), 1)
	if err := b.Sync(); err == nil || !strings.Contains(err.Error(), "KVWrite") {
		t.Errorf("KVWrite to slot 4 of 4: Sync = %v", err)
	}
	b.Attention(x, x, kv, 0, uploadI32(t, b, []int32{0}), uploadI32(t, b, []int32{4}), 1, 1, 1)
	if err := b.Sync(); err == nil || !strings.Contains(err.Error(), "Attention") {
		t.Errorf("Attention over slots 0..4 of 4: Sync = %v", err)
	}
	b.Gather(x, table, uploadI32(t, b, []int32{-1}), 1)
	if err := b.Sync(); err == nil || !strings.Contains(err.Error(), "Gather") {
		t.Errorf("Gather of row -1: Sync = %v", err)
	}
	if err := b.Sync(); err != nil {
		t.Errorf("Sync after the errors were reported: %v", err)
	}
}
