package cpu

import (
	"encoding/binary"
	"fmt"
	"math"

	"tfd/compute"
)

// tensor is the CPU backend's compute.Tensor: F32 elements in f or I32 elements in i, row-major.
type tensor struct {
	dtype compute.DType // F32 or I32
	shape []int
	f     []float32
	i     []int32
}

func (t *tensor) DType() compute.DType { return t.dtype }
func (t *tensor) Shape() []int         { return t.shape }

// rowLen returns the number of elements in one row: the product of all but the first dimension.
func (t *tensor) rowLen() int {
	n := 1
	for _, d := range t.shape[1:] {
		n *= d
	}
	return n
}

// kvPool is the CPU backend's compute.KV. k[layer] and v[layer] are [slots, kvHeads, headDim].
type kvPool struct {
	spec compute.KVSpec
	k, v [][]float32
}

func (kv *kvPool) Slots() int { return kv.spec.Slots }

// stride returns the elements of one slot in one layer.
func (kv *kvPool) stride() int { return kv.spec.KVHeads * kv.spec.HeadDim }

// elements returns the product of shape, or an error for a negative dimension or an overflow.
func elements(shape []int) (int, error) {
	n := 1
	for _, d := range shape {
		if d < 0 || (d > 0 && n > math.MaxInt32*256/d) {
			return 0, fmt.Errorf("cpu: bad tensor shape %v", shape)
		}
		n *= d
	}
	return n, nil
}

// Upload converts data, little-endian elements of dtype, into a new tensor: F32, F16 and BF16 become
// F32 (exactly: every F16 and BF16 value, subnormals, infinities and NaN payloads included, is an
// F32 value), I32 stays I32.
func (b *backend) Upload(dtype compute.DType, shape []int, data []byte) (compute.Tensor, error) {
	n, err := elements(shape)
	if err != nil {
		return nil, err
	}
	if dtype.Size() == 0 {
		return nil, fmt.Errorf("cpu: Upload of unknown dtype %v", dtype)
	}
	if len(data) != n*dtype.Size() {
		return nil, fmt.Errorf("cpu: Upload of %v %v needs %d bytes, got %d", dtype, shape, n*dtype.Size(), len(data))
	}
	t := &tensor{dtype: compute.F32, shape: append([]int(nil), shape...)}
	switch dtype {
	case compute.I32:
		t.dtype = compute.I32
		t.i = make([]int32, n)
		for j := range t.i {
			t.i[j] = int32(binary.LittleEndian.Uint32(data[4*j:]))
		}
	case compute.F32:
		t.f = make([]float32, n)
		for j := range t.f {
			t.f[j] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*j:]))
		}
	case compute.F16:
		t.f = make([]float32, n)
		for j := range t.f {
			t.f[j] = f16ToF32(binary.LittleEndian.Uint16(data[2*j:]))
		}
	case compute.BF16:
		t.f = make([]float32, n)
		for j := range t.f {
			t.f[j] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(data[2*j:])) << 16)
		}
	}
	return t, nil
}

// f16ToF32 widens an IEEE 754 binary16 value exactly.
func f16ToF32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	man := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f: // infinity or NaN: keep the payload, top-aligned
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	case exp != 0: // normal: rebias 15 → 127
		return math.Float32frombits(sign | (exp+112)<<23 | man<<13)
	case man == 0:
		return math.Float32frombits(sign)
	}
	// Subnormal: man·2⁻²⁴ is normal in F32. Shift the leading one into the implicit bit.
	e := uint32(113) // the F32 biased exponent of 2⁻¹⁴
	for man&0x400 == 0 {
		man <<= 1
		e--
	}
	return math.Float32frombits(sign | e<<23 | (man&0x3ff)<<13)
}

// Alloc returns a zeroed F32 or I32 tensor.
func (b *backend) Alloc(dtype compute.DType, shape ...int) (compute.Tensor, error) {
	n, err := elements(shape)
	if err != nil {
		return nil, err
	}
	t := &tensor{dtype: dtype, shape: append([]int(nil), shape...)}
	switch dtype {
	case compute.F32:
		t.f = make([]float32, n)
	case compute.I32:
		t.i = make([]int32, n)
	default:
		return nil, fmt.Errorf("cpu: Alloc of %v: only F32 and I32 tensors can be allocated", dtype)
	}
	return t, nil
}

// NewKV returns a zeroed pool with one K and one V slice per layer.
func (b *backend) NewKV(spec compute.KVSpec) (compute.KV, error) {
	if spec.Layers <= 0 || spec.KVHeads <= 0 || spec.HeadDim <= 0 || spec.Slots <= 0 {
		return nil, fmt.Errorf("cpu: NewKV: every dimension of %+v must be positive", spec)
	}
	per, err := elements([]int{spec.Slots, spec.KVHeads, spec.HeadDim})
	if err != nil {
		return nil, err
	}
	kv := &kvPool{spec: spec, k: make([][]float32, spec.Layers), v: make([][]float32, spec.Layers)}
	for l := range kv.k {
		kv.k[l] = make([]float32, per)
		kv.v[l] = make([]float32, per)
	}
	return kv, nil
}

// Free drops the backend's references to a tensor or KV pool; the memory goes back to the Go heap
// at the next collection. Using t afterwards panics.
func (b *backend) Free(t any) {
	switch t := t.(type) {
	case *tensor:
		t.f, t.i = nil, nil
	case *kvPool:
		t.k, t.v = nil, nil
	case nil:
	default:
		panic(fmt.Sprintf("cpu: Free of %T, which the cpu backend did not make", t))
	}
}

// WriteInt32 copies src into the first len(src) elements of dst.
func (b *backend) WriteInt32(dst compute.Tensor, src []int32) {
	d := i32(dst, "WriteInt32", "dst", len(src))
	copy(d, src)
}

// ReadFloat32 copies the first len(dst) elements of src into dst, and reports what Sync would.
func (b *backend) ReadFloat32(src compute.Tensor, dst []float32) error {
	copy(dst, f32(src, "ReadFloat32", "src", len(dst)))
	return b.Sync()
}

// asTensor returns t as this backend's tensor, or panics naming the op and argument.
func asTensor(t compute.Tensor, op, arg string) *tensor {
	ct, ok := t.(*tensor)
	if !ok {
		panic(fmt.Sprintf("cpu: %s: %s is a %T, not a tensor of the cpu backend", op, arg, t))
	}
	return ct
}

// f32 returns the elements of the F32 tensor t, or panics if t is not one or has fewer than n.
func f32(t compute.Tensor, op, arg string, n int) []float32 {
	ct := asTensor(t, op, arg)
	if ct.dtype != compute.F32 {
		panic(fmt.Sprintf("cpu: %s: %s is %v, want F32", op, arg, ct.dtype))
	}
	if len(ct.f) < n {
		panic(fmt.Sprintf("cpu: %s: %s %v has %d elements, the op needs %d", op, arg, ct.shape, len(ct.f), n))
	}
	return ct.f
}

// i32 is f32 for I32 tensors.
func i32(t compute.Tensor, op, arg string, n int) []int32 {
	ct := asTensor(t, op, arg)
	if ct.dtype != compute.I32 {
		panic(fmt.Sprintf("cpu: %s: %s is %v, want I32", op, arg, ct.dtype))
	}
	if len(ct.i) < n {
		panic(fmt.Sprintf("cpu: %s: %s %v has %d elements, the op needs %d", op, arg, ct.shape, len(ct.i), n))
	}
	return ct.i
}

// asKV returns kv as this backend's pool, or panics.
func asKV(kv compute.KV, op string, layer int) *kvPool {
	p, ok := kv.(*kvPool)
	if !ok {
		panic(fmt.Sprintf("cpu: %s: kv is a %T, not a pool of the cpu backend", op, kv))
	}
	if layer < 0 || layer >= p.spec.Layers {
		panic(fmt.Sprintf("cpu: %s: layer %d outside the pool's %d layers", op, layer, p.spec.Layers))
	}
	return p
}
