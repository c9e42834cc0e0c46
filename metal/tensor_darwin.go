//go:build darwin && arm64

package metal

import (
	"fmt"
	"math"
	"unsafe"

	"tfd/compute"
	"tfd/kernels"
)

// buffer is one MTLBuffer in shared storage, with its CPU address; to the residency keeper it
// is an allocation. Every tensor and every KV layer is a buffer of its own at offset 0, so each
// starts where Metal put it: 16-byte aligned as VLOAD needs, which newBuffer checks.
type buffer struct {
	mtl   mtlBuffer
	bytes uint64
	host  unsafe.Pointer // contents: the same memory the GPU reads (unified memory)
}

func (a *buffer) size() uint64 { return a.bytes }

// free releases the MTLBuffer once; the keeper calls it after the buffer left the residency set.
func (a *buffer) free() {
	release(a.mtl.id)
	a.mtl, a.host = mtlBuffer{}, nil
}

// newBuffer makes a zeroed buffer of bytes (> 0) in shared storage; it is not yet tracked.
func (b *backend) newBuffer(bytes int) (*buffer, error) {
	if uint64(bytes) > b.maxBuf {
		return nil, fmt.Errorf("metal: a buffer of %.2f GiB is past %s's largest, %.2f GiB (maxBufferLength)",
			float64(bytes)/(1<<30), b.device, float64(b.maxBuf)/(1<<30))
	}
	m := b.dev.newBufferWithLength(uint64(bytes), resourceStorageModeShared|resourceCPUCacheModeDefaultCache|resourceHazardTrackingModeDefault)
	if m.id == 0 {
		return nil, fmt.Errorf("metal: newBufferWithLength:options: of %d bytes returned nil (%.1f GiB of the %.1f GiB working set are in tensors)",
			bytes, float64(b.liveBytes())/(1<<30), float64(b.workingSet)/(1<<30))
	}
	a := &buffer{mtl: m, bytes: uint64(bytes), host: m.contents()}
	if g := m.gpuAddress(); g%16 != 0 || uintptr(a.host)%16 != 0 {
		a.free()
		return nil, fmt.Errorf("metal: a new buffer starts at GPU address %#x, CPU address %p: not 16-byte aligned, as the kernels' vector loads need", g, a.host)
	}
	return a, nil
}

// track hands a new buffer to the residency keeper.
func (b *backend) track(a *buffer) { b.residency().track(a) }

// liveBytes sums the tensors and pools not yet freed, for error messages.
func (b *backend) liveBytes() uint64 {
	var n uint64
	for t := range b.live {
		for _, a := range buffersOf(t) {
			n += a.bytes
		}
	}
	return n
}

// tensor is the backend's compute.Tensor: a buffer of n elements of dtype; buf is nil for an
// empty tensor and after Free.
type tensor struct {
	b     *backend
	buf   *buffer
	dtype compute.DType
	shape []int
	n     int
}

func (t *tensor) DType() compute.DType { return t.dtype }
func (t *tensor) Shape() []int         { return t.shape }

// rowLen returns the elements of one row: the product of all but the first dimension.
func (t *tensor) rowLen() int {
	n := 1
	for _, d := range t.shape[1:] {
		n *= d
	}
	return n
}

// kvPool is the backend's compute.KV: a buffer per layer holding its keys, then its values,
// each [slots, kvHeads, headDim] of the spec's dtype (F32 or F16). A buffer per layer keeps each well under maxBufferLength.
type kvPool struct {
	b      *backend
	layers []*buffer // nil after Free
	spec   compute.KVSpec
}

func (kv *kvPool) Slots() int { return kv.spec.Slots }

// stride returns the elements of one slot in one layer.
func (kv *kvPool) stride() int { return kv.spec.KVHeads * kv.spec.HeadDim }

// slotBytes returns the bytes of one slot in one layer's keys (or values).
func (kv *kvPool) slotBytes() int { return kv.stride() * kv.spec.Elem().Size() }

// kernels returns the suffix of the kernels that write and read the pool.
func (kv *kvPool) kernels() kernels.KV {
	if kv.spec.Elem() == compute.F16 {
		return kernels.KVF16
	}
	return kernels.KVF32
}

// values returns the byte offset of the values within a layer's buffer.
func (kv *kvPool) values() uint64 { return uint64(kv.spec.Slots) * uint64(kv.slotBytes()) }

// buffersOf returns the buffers of a tensor or pool.
func buffersOf(t any) []*buffer {
	switch t := t.(type) {
	case *tensor:
		if t.buf != nil {
			return []*buffer{t.buf}
		}
	case *kvPool:
		return t.layers
	}
	return nil
}

// Upload copies data into a new buffer. 2-D and larger F16 and BF16 tensors (weight matrices,
// embedding tables) stay 16-bit; 1-D ones (norm weights, biases) are widened to F32 exactly; F32
// and I32 stay as they are, and quantized matrices keep their format's bytes (quant_darwin.go; for
// MXFP4 its codes, then its scales).
// The copy is done on return.
func (b *backend) Upload(dtype compute.DType, shape []int, data []byte) (compute.Tensor, error) {
	n, err := compute.CheckUpload(dtype, shape, data)
	if err != nil {
		return nil, fmt.Errorf("metal: %w", err)
	}
	// MXFP4 (GPT-OSS's experts) is kept as stored for expert_matmul_mxfp4.
	if _, _, _, ok := kernels.QuantFormat(dtype); dtype.Quantized() && !ok && dtype != compute.MXFP4 {
		return nil, fmt.Errorf("metal: Upload of %v %v: %w", dtype, shape, compute.ErrNoQuantizedKernels)
	}
	if (dtype == compute.F16 || dtype == compute.BF16) && len(shape) < 2 {
		data, dtype = compute.WidenToF32(dtype, data), compute.F32
	}
	t := &tensor{b: b, dtype: dtype, shape: append([]int(nil), shape...), n: n}
	if n == 0 {
		return t, nil
	}
	if t.buf, err = b.newBuffer(len(data)); err != nil {
		return nil, fmt.Errorf("metal: Upload of %v %v: %w", dtype, shape, err)
	}
	copy(unsafe.Slice((*byte)(t.buf.host), len(data)), data)
	b.track(t.buf)
	b.live[t] = struct{}{}
	return t, nil
}

// Alloc returns a zeroed F32 or I32 tensor (Metal clears new buffers).
func (b *backend) Alloc(dtype compute.DType, shape ...int) (compute.Tensor, error) {
	if dtype != compute.F32 && dtype != compute.I32 {
		return nil, fmt.Errorf("metal: Alloc of %v: only F32 and I32 tensors can be allocated", dtype)
	}
	n, err := compute.Elements(shape)
	if err != nil {
		return nil, err
	}
	t := &tensor{b: b, dtype: dtype, shape: append([]int(nil), shape...), n: n}
	if n == 0 {
		return t, nil
	}
	if t.buf, err = b.newBuffer(4 * n); err != nil {
		return nil, fmt.Errorf("metal: Alloc of %v %v: %w", dtype, shape, err)
	}
	b.track(t.buf)
	b.live[t] = struct{}{}
	return t, nil
}

// NewKV returns a zeroed pool, a buffer per layer.
func (b *backend) NewKV(spec compute.KVSpec) (compute.KV, error) {
	if spec.Layers <= 0 || spec.KVHeads <= 0 || spec.HeadDim <= 0 || spec.Slots <= 0 {
		return nil, fmt.Errorf("metal: NewKV: every dimension of %+v must be positive", spec)
	}
	if err := compute.CheckKVDType(spec.DType); err != nil {
		return nil, fmt.Errorf("metal: NewKV: %w", err)
	}
	if spec.HeadDim%4 != 0 || spec.HeadDim > 256 {
		return nil, fmt.Errorf("metal: NewKV: head size %d: the attention kernel takes multiples of 4 up to 256", spec.HeadDim)
	}
	perLayer, err := compute.Elements([]int{2, spec.Slots, spec.KVHeads, spec.HeadDim})
	if err != nil || spec.Slots > math.MaxInt32/(spec.KVHeads*spec.HeadDim) {
		return nil, fmt.Errorf("metal: NewKV: %+v is too large", spec)
	}
	kv := &kvPool{b: b, spec: spec}
	for range spec.Layers {
		a, err := b.newBuffer(spec.Elem().Size() * perLayer)
		if err != nil {
			for _, a := range kv.layers {
				b.residency().untrack(a, a.free)
			}
			return nil, fmt.Errorf("metal: NewKV of %.1f GiB: %w", float64(spec.Bytes())/(1<<30), err)
		}
		b.track(a)
		kv.layers = append(kv.layers, a)
	}
	b.live[kv] = struct{}{}
	return kv, nil
}

// Free releases a tensor; work encoded before it keeps the buffer alive (a command buffer
// retains what it uses), and the keeper releases it once it has left the residency set.
func (b *backend) Free(t compute.Tensor) {
	if t != nil {
		b.free(t)
	}
}

// FreeKV releases a KV pool as Free releases a tensor.
func (b *backend) FreeKV(kv compute.KV) {
	if kv != nil {
		b.free(kv)
	}
}

// free releases a tensor or pool of this backend: the one place buffers go back.
func (b *backend) free(t any) {
	switch t := t.(type) {
	case *tensor:
		if t.b != b {
			panic("metal: Free of a tensor another backend made")
		}
	case *kvPool:
		if t.b != b {
			panic("metal: Free of a KV pool another backend made")
		}
	default:
		panic(fmt.Sprintf("metal: Free of %T, which the metal backend did not make", t))
	}
	if _, ok := b.live[t]; !ok {
		return // empty, or freed already
	}
	delete(b.live, t)
	for _, a := range buffersOf(t) {
		b.residency().untrack(a, a.free)
	}
	switch t := t.(type) {
	case *tensor:
		t.buf = nil
	case *kvPool:
		t.layers = nil
	}
}

// WriteInt32 copies src into dst through the CPU, which shares dst's memory with the GPU. Work
// already encoded may read dst, so if there is any it is committed and waited for first (the
// engine writes its rows before a forward's ops, after the last one's read, so it never is);
// an error it meets is kept for the next Sync.
func (b *backend) WriteInt32(dst compute.Tensor, src []int32) {
	d := b.tensorOf(dst, "WriteInt32", "dst", compute.I32, len(src))
	if len(src) == 0 {
		return
	}
	if b.cmd.id != 0 {
		if err := b.flush(); err != nil && b.pending == nil {
			b.pending = err
		}
	}
	copy(hostInt32s(d.buf, len(src)), src)
}

// ReadFloat32 commits and waits for the work encoded so far and copies the first len(dst)
// elements of src into dst.
func (b *backend) ReadFloat32(src compute.Tensor, dst []float32) error {
	s := b.tensorOf(src, "ReadFloat32", "src", compute.F32, len(dst))
	err := b.Sync()
	if len(dst) > 0 {
		copy(dst, unsafe.Slice((*float32)(s.buf.host), len(dst)))
	}
	return err
}

// hostInt32s views n int32 at a buffer's CPU address.
func hostInt32s(a *buffer, n int) []int32 { return unsafe.Slice((*int32)(a.host), n) }

// ReadInt32 commits and waits for the work encoded so far and copies the first len(dst)
// elements of src into dst.
func (b *backend) ReadInt32(src compute.Tensor, dst []int32) error {
	s := b.tensorOf(src, "ReadInt32", "src", compute.I32, len(dst))
	err := b.Sync()
	if len(dst) > 0 {
		copy(dst, hostInt32s(s.buf, len(dst)))
	}
	return err
}
