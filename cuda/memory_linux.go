//go:build amd64 || arm64

package cuda

import (
	"fmt"
	"math"
	"unsafe"

	"tfd/compute"
	"tfd/kernels"
)

// tensor is the backend's compute.Tensor: a device allocation of n elements of dtype.
type tensor struct {
	b     *backend
	ptr   devPtr
	dtype compute.DType
	shape []int
	n     int
	// packed says that a BF16 matrix is stored in the matrix unit's packed order
	// (kernels.PackMMA), as Upload stores them when the tensor cores are on: n elements, held in
	// kernels.MMAPackedLen of them (whole bands of 16 rows).
	packed bool
	// runs is, for an I32 tensor last written from the host (Upload, WriteInt32), the runs of
	// equal consecutive values it holds; 0 when unknown. Attention reads it off its bases to
	// choose its kernel (the bits do not depend on it).
	runs int
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

// kvPool is the backend's compute.KV: one allocation holding, for each layer l, its keys at
// [2l] and its values at [2l+1], each [slots, kvHeads, headDim] of the spec's dtype (F32 or F16).
type kvPool struct {
	b    *backend
	ptr  devPtr
	spec compute.KVSpec
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

// layer returns the addresses of layer l's keys and values.
func (kv *kvPool) layer(l int) (k, v devPtr) {
	return kv.half(2 * l), kv.half(2*l + 1)
}

// half returns the address of the pool's half i: layer i/2's keys for even i, its values for odd.
func (kv *kvPool) half(i int) devPtr {
	return kv.ptr + devPtr(i)*devPtr(kv.spec.Slots)*devPtr(kv.slotBytes())
}

func ptrOf(t any) devPtr {
	switch t := t.(type) {
	case *tensor:
		return t.ptr
	case *kvPool:
		return t.ptr
	}
	return 0
}

// Upload copies data to the device. 2-D and larger F16 and BF16 tensors (weight matrices,
// embedding tables) stay 16-bit; 1-D ones (norm weights, biases) are widened to F32 exactly; F32
// and I32 stay as they are, and quantized matrices keep their format's bytes (quant_linux.go; for
// MXFP4 its codes, then its scales). With the tensor cores on, a BF16 matrix whose rows the
// matrix unit takes (kernels.UsesMMA) is stored in its packed order (pack_linux.go), which
// MatMul and Embed read. It waits until the copy is done, so data may be reused at once.
func (b *backend) Upload(dtype compute.DType, shape []int, data []byte) (compute.Tensor, error) {
	pack := b.mma && dtype == compute.BF16 && len(shape) == 2 && kernels.UsesMMA("bf16", shape[1])
	return b.upload(dtype, shape, data, pack)
}

// upload is Upload, with the choice of the packed order made by the caller.
func (b *backend) upload(dtype compute.DType, shape []int, data []byte, pack bool) (compute.Tensor, error) {
	n, err := compute.CheckUpload(dtype, shape, data)
	if err != nil {
		return nil, fmt.Errorf("cuda: %w", err)
	}
	// MXFP4 (GPT-OSS's experts) is kept as stored for expert_matmul_mxfp4.
	if _, _, _, ok := kernels.QuantFormat(dtype); dtype.Quantized() && !ok && dtype != compute.MXFP4 {
		return nil, fmt.Errorf("cuda: Upload of %v %v: %w", dtype, shape, compute.ErrNoQuantizedKernels)
	}
	if (dtype == compute.F16 || dtype == compute.BF16) && len(shape) < 2 {
		data, dtype = compute.WidenToF32(dtype, data), compute.F32
	}
	t := &tensor{b: b, dtype: dtype, shape: append([]int(nil), shape...), n: n, packed: pack}
	if n == 0 {
		return t, nil
	}
	if dtype == compute.I32 {
		t.runs = runsOfWords(data)
	}
	err = b.wait(false, func() error {
		if pack {
			p, err := deviceAlloc(2 * kernels.MMAPackedLen(shape[0], shape[1]))
			if err != nil {
				return err
			}
			t.ptr = p
			return b.uploadPacked(p, data, shape[0], shape[1])
		}
		p, err := deviceAlloc(len(data))
		if err != nil {
			return err
		}
		t.ptr = p
		if err := check("cuMemcpyHtoDAsync", cuMemcpyHtoDAsync(p, unsafe.Pointer(&data[0]), uintptr(len(data)), b.w.stream)); err != nil {
			return err
		}
		return check("cuStreamSynchronize", cuStreamSynchronize(b.w.stream))
	})
	if t.ptr != 0 {
		b.live[t] = struct{}{}
	}
	if err != nil {
		return nil, fmt.Errorf("cuda: Upload of %v %v: %w", dtype, shape, err)
	}
	return t, nil
}

// Alloc returns a zeroed F32 or I32 tensor.
func (b *backend) Alloc(dtype compute.DType, shape ...int) (compute.Tensor, error) {
	if dtype != compute.F32 && dtype != compute.I32 {
		return nil, fmt.Errorf("cuda: Alloc of %v: only F32 and I32 tensors can be allocated", dtype)
	}
	n, err := compute.Elements(shape)
	if err != nil {
		return nil, err
	}
	t := &tensor{b: b, dtype: dtype, shape: append([]int(nil), shape...), n: n}
	if n == 0 {
		return t, nil
	}
	if t.ptr, err = b.alloc(4 * n); err != nil {
		return nil, fmt.Errorf("cuda: Alloc of %v %v: %w", dtype, shape, err)
	}
	b.live[t] = struct{}{}
	return t, nil
}

// NewKV returns a zeroed pool.
func (b *backend) NewKV(spec compute.KVSpec) (compute.KV, error) {
	if spec.Layers <= 0 || spec.KVHeads <= 0 || spec.HeadDim <= 0 || spec.Slots <= 0 {
		return nil, fmt.Errorf("cuda: NewKV: every dimension of %+v must be positive", spec)
	}
	if err := compute.CheckKVDType(spec.DType); err != nil {
		return nil, fmt.Errorf("cuda: NewKV: %w", err)
	}
	if spec.HeadDim%4 != 0 || spec.HeadDim > 256 {
		return nil, fmt.Errorf("cuda: NewKV: head size %d: the attention kernel takes multiples of 4 up to 256", spec.HeadDim)
	}
	n, err := compute.Elements([]int{2, spec.Layers, spec.Slots, spec.KVHeads, spec.HeadDim})
	if err != nil || spec.Slots > math.MaxInt32/(spec.KVHeads*spec.HeadDim) {
		return nil, fmt.Errorf("cuda: NewKV: %+v is too large", spec)
	}
	kv := &kvPool{b: b, spec: spec}
	if kv.ptr, err = b.alloc(spec.Elem().Size() * n); err != nil {
		return nil, fmt.Errorf("cuda: NewKV of %.1f GiB: %w", float64(spec.Bytes())/(1<<30), err)
	}
	b.live[kv] = struct{}{}
	return kv, nil
}

// alloc allocates bytes on the device and records their zeroing on the stream, ahead of any op
// that could use them.
func (b *backend) alloc(bytes int) (devPtr, error) {
	var p devPtr
	err := b.wait(false, func() (err error) {
		p, err = deviceAlloc(bytes)
		return err
	})
	if err != nil {
		return 0, err
	}
	c := b.record()
	*c = command{kind: cmdZero, args: [maxArgs]uint64{uint64(p), uint64(bytes)}}
	return p, nil
}

// Free releases a tensor once the work recorded so far is done with it.
func (b *backend) Free(t compute.Tensor) {
	if t != nil {
		b.free(t)
	}
}

// FreeKV releases a KV pool once the work recorded so far is done with it.
func (b *backend) FreeKV(kv compute.KV) {
	if kv != nil {
		b.free(kv)
	}
}

// free releases a tensor or pool of this backend: the one place device memory goes back.
func (b *backend) free(t any) {
	switch t := t.(type) {
	case *tensor:
		if t.b != b {
			panic("cuda: Free of a tensor another backend made")
		}
	case *kvPool:
		if t.b != b {
			panic("cuda: Free of a KV pool another backend made")
		}
	default:
		panic(fmt.Sprintf("cuda: Free of %T, which the cuda backend did not make", t))
	}
	if _, ok := b.live[t]; !ok {
		return // empty, or freed already
	}
	delete(b.live, t)
	p := ptrOf(t)
	err := b.wait(true, func() error { return check("cuMemFree", cuMemFree(p)) })
	b.arenaAt = 0
	if err != nil && b.pending == nil {
		b.pending = err
	}
	switch t := t.(type) {
	case *tensor:
		t.ptr = 0
	case *kvPool:
		t.ptr = 0
	}
}

// WriteInt32 copies src into the pinned arena now and records its copy to the device.
func (b *backend) WriteInt32(dst compute.Tensor, src []int32) {
	d := b.tensorOf(dst, "WriteInt32", "dst", compute.I32, len(src))
	if len(src) == 0 {
		return
	}
	b.writeHost(d.ptr, unsafe.Slice((*byte)(unsafe.Pointer(&src[0])), 4*len(src)))
	d.runs = runsOf(src)
}

// runsOf counts the runs of equal consecutive values in v.
func runsOf(v []int32) int {
	n := 0
	for i := range v {
		if i == 0 || v[i] != v[i-1] {
			n++
		}
	}
	return n
}

// runsOfWords is runsOf of the 4-byte words of data (which need not be aligned for int32).
func runsOfWords(data []byte) int {
	n := 0
	for i := 0; i+4 <= len(data); i += 4 {
		if i == 0 || string(data[i:i+4]) != string(data[i-4:i]) {
			n++
		}
	}
	return n
}

// writeHost copies src (not empty) into the pinned arena now and records its copy to dst.
func (b *backend) writeHost(dst devPtr, src []byte) {
	bytes := len(src)
	if b.arenaAt+bytes > len(b.arena) {
		// The arena's copies are done after a sync; an error it meets waits for the next Sync.
		if err := b.Sync(); err != nil && b.pending == nil {
			b.pending = err
		}
		if bytes > len(b.arena) {
			b.replaceHost(&b.arena, bytes)
		}
	}
	copy(b.arena[b.arenaAt:], src)
	c := b.record()
	*c = command{kind: cmdHtoD, args: [maxArgs]uint64{uint64(dst), uint64(uintptr(unsafe.Pointer(&b.arena[b.arenaAt]))), uint64(bytes)}}
	b.arenaAt += (bytes + 255) &^ 255
}

// ReadFloat32 waits for all recorded work and copies the first len(dst) elements of src into
// dst, through pinned memory.
func (b *backend) ReadFloat32(src compute.Tensor, dst []float32) error {
	s := b.tensorOf(src, "ReadFloat32", "src", compute.F32, len(dst))
	if len(dst) == 0 {
		return b.Sync()
	}
	if b.pinnedHolds(dst) {
		// The backend's own page-locked memory (HostFloat32): the GPU copies into it directly.
		c := b.record()
		*c = command{kind: cmdDtoH, args: [maxArgs]uint64{uint64(uintptr(unsafe.Pointer(&dst[0]))), uint64(s.ptr), uint64(4 * len(dst))}}
		return b.Sync()
	}
	err := b.read(s, 4*len(dst))
	copy(dst, unsafe.Slice((*float32)(unsafe.Pointer(&b.stage[0])), len(dst)))
	return err
}

// ReadInt32 waits for the recorded work and copies the first len(dst) elements of src into dst.
func (b *backend) ReadInt32(src compute.Tensor, dst []int32) error {
	s := b.tensorOf(src, "ReadInt32", "src", compute.I32, len(dst))
	if len(dst) == 0 {
		return b.Sync()
	}
	err := b.read(s, 4*len(dst))
	copy(dst, unsafe.Slice((*int32)(unsafe.Pointer(&b.stage[0])), len(dst)))
	return err
}

// read copies the first bytes of s into the pinned stage once the recorded work is done, and
// reports what Sync does.
func (b *backend) read(s *tensor, bytes int) error {
	if bytes > len(b.stage) {
		b.replaceHost(&b.stage, bytes)
	}
	c := b.record()
	*c = command{kind: cmdDtoH, args: [maxArgs]uint64{uint64(uintptr(unsafe.Pointer(&b.stage[0]))), uint64(s.ptr), uint64(bytes)}}
	return b.Sync()
}

// replaceHost swaps a pinned buffer for one of at least bytes, after the recorded work is done.
func (b *backend) replaceHost(buf *[]byte, bytes int) {
	bytes = (bytes + stageBytes - 1) &^ (stageBytes - 1)
	err := b.wait(true, func() error {
		if err := check("cuMemFreeHost", cuMemFreeHost(sliceData(*buf))); err != nil {
			return err
		}
		var err error
		*buf, err = hostSlice(bytes)
		return err
	})
	b.arenaAt = 0
	if err != nil {
		panic(fmt.Sprintf("cuda: cannot allocate %d bytes of pinned host memory: %v", bytes, err))
	}
}

// deviceAlloc allocates device memory; worker thread only.
func deviceAlloc(bytes int) (devPtr, error) {
	var p devPtr
	if err := check(fmt.Sprintf("cuMemAlloc of %d bytes", bytes), cuMemAlloc(&p, uintptr(bytes))); err != nil {
		return 0, err
	}
	return p, nil
}

// hostAlloc allocates pinned host memory; worker thread only.
func hostAlloc(bytes int) (unsafe.Pointer, error) {
	var p unsafe.Pointer
	if err := check(fmt.Sprintf("cuMemAllocHost of %d bytes", bytes), cuMemAllocHost(&p, uintptr(bytes))); err != nil {
		return nil, err
	}
	return p, nil
}

func hostSlice(bytes int) ([]byte, error) {
	p, err := hostAlloc(bytes)
	if err != nil {
		return nil, err
	}
	return unsafe.Slice((*byte)(p), bytes), nil
}

func sliceData(b []byte) unsafe.Pointer {
	if b == nil {
		return nil
	}
	return unsafe.Pointer(unsafe.SliceData(b))
}
