package computetest

import (
	"encoding/binary"
	"testing"

	"tfd/compute"
)

// Pair is a backend under test and the cpu backend, fed the same data: Backends[0] is the one
// under test, Backends[1] the cpu. T is the test that reports; a subtest sets it to itself.
type Pair struct {
	T        testing.TB
	Backends [2]compute.Backend
}

// NewPair returns a Pair of b and cpu.
func NewPair(t testing.TB, b, cpu compute.Backend) *Pair {
	return &Pair{T: t, Backends: [2]compute.Backend{b, cpu}}
}

// Upload uploads data in dtype to both backends.
func (p *Pair) Upload(dtype compute.DType, data []byte, shape ...int) [2]compute.Tensor {
	p.T.Helper()
	var out [2]compute.Tensor
	for i, b := range p.Backends {
		t, err := b.Upload(dtype, shape, data)
		if err != nil {
			p.T.Fatal(err)
		}
		out[i] = t
	}
	return out
}

// F32 uploads data as an F32 tensor, zero-padded to the shape.
func (p *Pair) F32(data []float32, shape ...int) [2]compute.Tensor {
	p.T.Helper()
	full := make([]float32, elements(shape))
	copy(full, data)
	return p.Upload(compute.F32, F32Bytes(full), shape...)
}

// I32 uploads data as an I32 tensor, zero-padded to the shape.
func (p *Pair) I32(data []int32, shape ...int) [2]compute.Tensor {
	p.T.Helper()
	b := make([]byte, 4*elements(shape))
	for i, v := range data {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(v))
	}
	return p.Upload(compute.I32, b, shape...)
}

// Weights rounds data to dtype in place (so the caller holds the values both backends see) and
// uploads it in dtype.
func (p *Pair) Weights(dtype compute.DType, data []float32, shape ...int) [2]compute.Tensor {
	p.T.Helper()
	return p.Upload(dtype, Encode(dtype, data), shape...)
}

// Do runs f on both backends.
func (p *Pair) Do(f func(b compute.Backend, i int)) {
	for i, b := range p.Backends {
		f(b, i)
	}
}

// Read returns the first n elements of t from each backend, after checking Sync.
func (p *Pair) Read(t [2]compute.Tensor, n int) (tested, cpu []float32) {
	p.T.Helper()
	out := [2][]float32{make([]float32, n), make([]float32, n)}
	for i, b := range p.Backends {
		if err := b.ReadFloat32(t[i], out[i]); err != nil {
			p.T.Fatalf("%s: %v", b.Name(), err)
		}
	}
	return out[0], out[1]
}

// ReadOne reads n elements of a tensor of one backend.
func ReadOne(t testing.TB, b compute.Backend, x compute.Tensor, n int) []float32 {
	t.Helper()
	out := make([]float32, n)
	if err := b.ReadFloat32(x, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// UploadF32 uploads data as an F32 tensor of shape to b.
func UploadF32(t testing.TB, b compute.Backend, data []float32, shape ...int) compute.Tensor {
	t.Helper()
	x, err := b.Upload(compute.F32, shape, F32Bytes(data))
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// UploadI32 allocates an I32 tensor on b and writes data into it.
func UploadI32(t testing.TB, b compute.Backend, data []int32) compute.Tensor {
	t.Helper()
	x, err := b.Alloc(compute.I32, len(data))
	if err != nil {
		t.Fatal(err)
	}
	b.WriteInt32(x, data)
	return x
}

func elements(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}
