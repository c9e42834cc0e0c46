package cpu

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"

	"tfd/compute"
)

// tensor is the CPU backend's compute.Tensor, row-major: F32 elements in f, I32 elements in i,
// the raw bits of F16 or BF16 elements in h (weight matrices and tables, which the ops that read
// them widen to F32 element by element), a quantized matrix in q, or a quantized stack of
// experts' matrices ([experts, out, in], ExpertMatMul's) in qe, one matrix an expert.
type tensor struct {
	dtype compute.DType // F32, I32, F16, BF16 or a quantized dtype
	shape []int
	f     []float32
	i     []int32
	h     []uint16
	q     *qweights
	qe    []*qweights
	mx    []byte // MXFP4: every row's codes, then every row's scales (compute.MXFP4)
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

// kvPool is the CPU backend's compute.KV. k[layer] and v[layer] are [slots, kvHeads, headDim]:
// F32 values in an F32 pool; in an F16 pool kh and vh hold the F16 bits instead.
type kvPool struct {
	spec   compute.KVSpec
	k, v   [][]float32
	kh, vh [][]uint16
}

// half reports whether the pool stores F16.
func (kv *kvPool) half() bool { return kv.kh != nil }

func (kv *kvPool) Slots() int { return kv.spec.Slots }

// stride returns the elements of one slot in one layer.
func (kv *kvPool) stride() int { return kv.spec.KVHeads * kv.spec.HeadDim }

// Upload converts data, little-endian elements of dtype, into a new tensor. F32 and I32 stay as
// they are. F16 and BF16 matrices (two or more dimensions: weights and embedding tables) stay 16-bit,
// half the memory and half the bytes a matrix-vector product streams; MatMul, Embed and Gather widen
// them as they read. F16 and BF16 vectors (norm weights, biases) become F32. Widening is exact:
// every F16 and BF16 value, subnormals, infinities and NaN payloads included, is an F32 value, so
// results do not depend on which form a tensor is kept in. Quantized matrices are rearranged
// for the kernels (see qweights), their bytes kept as they are.
func (b *backend) Upload(dtype compute.DType, shape []int, data []byte) (compute.Tensor, error) {
	n, err := compute.CheckUpload(dtype, shape, data)
	if err != nil {
		return nil, fmt.Errorf("cpu: %w", err)
	}
	t := &tensor{dtype: compute.F32, shape: append([]int(nil), shape...)}
	if dtype == compute.MXFP4 {
		// Kept as stored; ExpertMatMul dequantizes each expert's rows as its blocks need them.
		t.dtype, t.mx = dtype, append([]byte(nil), data...)
		return t, nil
	}
	if dtype.Quantized() && len(shape) == 3 {
		// A stack of experts' matrices: each laid out alone, as MatMul's weights of that expert
		// would be, so that ExpertMatMul runs MatMul's kernels on it.
		t.dtype, t.qe = dtype, make([]*qweights, shape[0])
		for e := range t.qe {
			t.qe[e] = newQWeights(dtype, shape[1:], dtype.ExpertData(shape, data, e))
		}
		return t, nil
	}
	if dtype.Quantized() {
		t.dtype, t.q = dtype, newQWeights(dtype, shape, data)
		return t, nil
	}
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
	case compute.F16, compute.BF16:
		h := make([]uint16, n)
		for j := range h {
			h[j] = binary.LittleEndian.Uint16(data[2*j:])
		}
		if len(shape) >= 2 {
			t.dtype, t.h = dtype, h
			break
		}
		t.f = make([]float32, n)
		widen(t.f, h, dtype)
	}
	return t, nil
}

// UploadInPlace implements compute.InPlaceUploader: F32 tensors and F16 or BF16 matrices, the
// dtypes whose bytes are what the ops read, reference data rather than copy it when data is
// aligned for their elements (safetensors does not promise it; GGUF does) and the machine is
// little-endian. Everything else is copied as Upload copies it: F16 and BF16 vectors, which
// become F32, I32, and quantized matrices, whose rows the kernels read interleaved (qweights).
// The ops only read weights, so data may be a read-only mapping.
func (b *backend) UploadInPlace(dtype compute.DType, shape []int, data []byte) (compute.Tensor, error) {
	n, err := compute.CheckUpload(dtype, shape, data)
	if err != nil {
		return nil, fmt.Errorf("cpu: %w", err)
	}
	kept := dtype == compute.F32 || (dtype == compute.F16 || dtype == compute.BF16) && len(shape) >= 2
	if !kept || n == 0 || !nativeLittleEndian() || uintptr(unsafe.Pointer(unsafe.SliceData(data)))%uintptr(dtype.Size()) != 0 {
		return b.Upload(dtype, shape, data)
	}
	t := &tensor{dtype: dtype, shape: append([]int(nil), shape...)}
	if dtype == compute.F32 {
		t.f = unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(data))), n)
	} else {
		t.h = unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(data))), n)
	}
	return t, nil
}

// nativeLittleEndian reports whether the machine stores numbers little-endian, as checkpoints do:
// only then are a checkpoint's bytes the elements the ops read.
func nativeLittleEndian() bool {
	return binary.NativeEndian.Uint16([]byte{1, 0}) == 1
}

// widen writes the F32 values of the F16 or BF16 elements src[:len(dst)] into dst, exactly, NaN
// payloads included: it serves copies (Upload, Embed, Gather). MatMul uses widenOperands.
func widen(dst []float32, src []uint16, dtype compute.DType) {
	src = src[:len(dst)]
	if dtype == compute.BF16 {
		for j, h := range src {
			dst[j] = compute.BF16ToF32(h)
		}
		return
	}
	for j, h := range src {
		dst[j] = compute.F16ToF32(h)
	}
}

// Alloc returns a zeroed F32 or I32 tensor.
func (b *backend) Alloc(dtype compute.DType, shape ...int) (compute.Tensor, error) {
	n, err := compute.Elements(shape)
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
	if err := compute.CheckKVDType(spec.DType); err != nil {
		return nil, fmt.Errorf("cpu: NewKV: %w", err)
	}
	per, err := compute.Elements([]int{spec.Slots, spec.KVHeads, spec.HeadDim})
	if err != nil {
		return nil, err
	}
	kv := &kvPool{spec: spec}
	if spec.Elem() == compute.F16 {
		kv.kh, kv.vh = make([][]uint16, spec.Layers), make([][]uint16, spec.Layers)
		for l := range kv.kh {
			kv.kh[l], kv.vh[l] = make([]uint16, per), make([]uint16, per)
		}
		return kv, nil
	}
	kv.k, kv.v = make([][]float32, spec.Layers), make([][]float32, spec.Layers)
	for l := range kv.k {
		kv.k[l], kv.v[l] = make([]float32, per), make([]float32, per)
	}
	return kv, nil
}

// Free drops the backend's references to a tensor; the memory goes back to the Go heap at the
// next collection. Using t afterwards panics.
func (b *backend) Free(t compute.Tensor) {
	if t == nil {
		return
	}
	x := asTensor(t, "Free", "t")
	x.f, x.i, x.h, x.q, x.qe = nil, nil, nil, nil, nil
}

// FreeKV drops the backend's references to a KV pool, as Free does for a tensor.
func (b *backend) FreeKV(kv compute.KV) {
	if kv == nil {
		return
	}
	p, ok := kv.(*kvPool)
	if !ok {
		panic(fmt.Sprintf("cpu: FreeKV of %T, which the cpu backend did not make", kv))
	}
	p.k, p.v, p.kh, p.vh = nil, nil, nil, nil
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

// ReadInt32 copies the first len(dst) elements of src into dst, and reports what Sync would.
func (b *backend) ReadInt32(src compute.Tensor, dst []int32) error {
	copy(dst, i32(src, "ReadInt32", "src", len(dst)))
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

// weights returns t's elements, F32 in f or F16/BF16 in h (the other nil), or panics if t is
// neither or has fewer than n elements.
func weights(t compute.Tensor, op, arg string, n int) (f []float32, h []uint16) {
	ct := asTensor(t, op, arg)
	switch ct.dtype {
	case compute.F32:
		f = ct.f
	case compute.F16, compute.BF16:
		h = ct.h
	default:
		panic(fmt.Sprintf("cpu: %s: %s is %v, want F32, F16 or BF16", op, arg, ct.dtype))
	}
	if len(f)+len(h) < n {
		panic(fmt.Sprintf("cpu: %s: %s %v has %d elements, the op needs %d", op, arg, ct.shape, len(f)+len(h), n))
	}
	return f, h
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
