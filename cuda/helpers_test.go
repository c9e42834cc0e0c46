package cuda

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"tfd/compute"
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
	return p.upload(compute.F32, f32Bytes(full), shape...)
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
	return p.upload(dtype, encode(dtype, data), shape...)
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
	x, err := b.Upload(compute.F32, shape, f32Bytes(data))
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

func f32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return b
}

// encode rounds v to dtype (to nearest, ties to even) in place and returns its bytes.
func encode(dtype compute.DType, v []float32) []byte {
	switch dtype {
	case compute.F32:
		return f32Bytes(v)
	case compute.BF16:
		b := make([]byte, 2*len(v))
		for i, f := range v {
			u := math.Float32bits(f)
			u += 0x7fff + (u>>16)&1
			h := uint16(u >> 16)
			binary.LittleEndian.PutUint16(b[2*i:], h)
			v[i] = math.Float32frombits(uint32(h) << 16)
		}
		return b
	case compute.F16:
		b := make([]byte, 2*len(v))
		for i, f := range v {
			h := f16Bits(f)
			binary.LittleEndian.PutUint16(b[2*i:], h)
			v[i] = compute.F16ToF32(h)
		}
		return b
	}
	panic("encode: " + dtype.String())
}

// f16Bits rounds f to binary16; values below the normal range become zero (the tests' data stay
// in the normal range).
func f16Bits(f float32) uint16 {
	u := math.Float32bits(f)
	sign := uint16(u>>16) & 0x8000
	exp := int(u>>23&0xff) - 127 + 15
	man := u & 0x7fffff
	if exp <= 0 {
		return sign
	}
	m := man >> 13
	if rem := man & 0x1fff; rem > 0x1000 || (rem == 0x1000 && m&1 == 1) {
		if m++; m == 0x400 {
			m, exp = 0, exp+1
		}
	}
	return sign | uint16(exp)<<10 | uint16(m)
}

// randn returns n normally distributed floats from a generator seeded with seed.
func randn(seed uint64, n int) []float32 {
	r := rand.New(rand.NewPCG(seed, 0xc0da))
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(r.NormFloat64())
	}
	return s
}

// near reports elements with |got−want| > tol·max(|want|, floor), at most a few, and returns the
// largest |got−want|/max(|want|, floor) seen.
func near(t testing.TB, what string, got, want []float32, tol, floor float64) float64 {
	t.Helper()
	bad, worst := 0, 0.0
	for i := range want {
		scale := max(math.Abs(float64(want[i])), floor)
		d := math.Abs(float64(got[i]) - float64(want[i]))
		if math.IsNaN(float64(got[i])) {
			d = math.Inf(1)
		}
		worst = max(worst, d/scale)
		if d > tol*scale {
			if bad++; bad <= 5 {
				t.Errorf("%s[%d] = %v, want %v (±%.3g)", what, i, got[i], want[i], tol*scale)
			}
		}
	}
	if bad > 5 {
		t.Errorf("%s: %d of %d elements off", what, bad, len(want))
	}
	return worst
}

// sameBits reports the elements whose bits differ.
func sameBits(t testing.TB, what string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d elements, want %d", what, len(got), len(want))
	}
	bad := 0
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			if bad++; bad <= 3 {
				t.Errorf("%s[%d] = %v (%#08x), want %v (%#08x)", what, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
			}
		}
	}
	if bad > 3 {
		t.Errorf("%s: %d of %d elements differ", what, bad, len(want))
	}
}
