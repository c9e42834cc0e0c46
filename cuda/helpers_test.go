package cuda

import (
	"encoding/binary"
	"testing"

	"tfd/compute"
	"tfd/compute/computetest"
	_ "tfd/cpu"
)

// openCUDA opens a cuda backend closed when the test ends, or skips the test, saying why, where
// there is none (no driver, no GPU, no NVRTC, not Linux).
func openCUDA(t testing.TB) compute.Backend {
	t.Helper()
	b, err := compute.Open("cuda")
	if err != nil {
		t.Skipf("no CUDA backend here: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return b
}

// pair is a cuda and a cpu backend fed the same data; index 0 is cuda, 1 is cpu.
type pair struct {
	t  testing.TB
	bs [2]compute.Backend
}

// tt is one tensor on both backends of a pair.
type tt [2]compute.Tensor

func newPair(t testing.TB) *pair {
	t.Helper()
	g := openCUDA(t)
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
