package cuda

import (
	"fmt"
	"unsafe"

	"github.com/ebitengine/purego"

	"tfd/kernels"
)

// The copy engine's matmul (kernels.MatMulsWGTLaunch) reads x and the weights through tensor
// maps, which the driver encodes on the host (cuTensorMapEncodeTiled, CUDA 12.0) and a launch
// passes by value, and fills more shared memory than a kernel may ask for by default
// (cuFuncSetAttribute). Both are bound when the driver has them; without them the many-row
// matmuls stay on the warpgroup's tile (b.wgt).

var (
	// cuTensorMapEncodeTiled(map, dtype, rank, addr, dims, strides, box, elementStrides,
	// interleave, swizzle, l2Promotion, oobFill)
	fnTensorMapEncodeTiled uintptr
	cuFuncSetAttribute     func(f cuFunction, attr int32, value int32) cuResult
	tmaBindings            = []binding{
		{name: "cuTensorMapEncodeTiled", addr: &fnTensorMapEncodeTiled},
		{name: "cuFuncSetAttribute", fn: &cuFuncSetAttribute},
	}
)

const (
	attrMaxSharedPerBlockOptin   = 97 // CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
	funcAttrMaxDynamicSharedSize = 8  // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
	tensorMapUint32              = 2  // CU_TENSOR_MAP_DATA_TYPE_UINT32
	tensorMapL2Promotion256      = 3  // CU_TENSOR_MAP_L2_PROMOTION_L2_256B
)

// tmaAvailable reports whether the driver has what the copy engine's matmul needs.
func tmaAvailable() bool { return fnTensorMapEncodeTiled != 0 && cuFuncSetAttribute != nil }

// allowDynamicShared lets each kernel that declares dynamic shared memory ask for up to the
// device's most a block may have; worker thread only (at Open).
func (b *backend) allowDynamicShared() error {
	var most int32
	if err := check("cuDeviceGetAttribute", cuDeviceGetAttribute(&most, attrMaxSharedPerBlockOptin, b.dev)); err != nil {
		return err
	}
	for _, def := range kernels.All() {
		if !def.Dynamic {
			continue
		}
		if err := check("cuFuncSetAttribute "+def.Name, cuFuncSetAttribute(b.k.byName[def.Name].fn, funcAttrMaxDynamicSharedSize, most)); err != nil {
			return err
		}
	}
	return nil
}

// tensorMap is a CUtensorMap, 128 bytes the driver fills; a launch passes a pointer to one and
// the driver copies it into the kernel's parameters.
type tensorMap [16]uint64

// mapKey names an encoded map: the buffer at addr, shaped as shape says.
type mapKey struct {
	addr  uint64
	shape kernels.WGTMap
}

// tensorMaps are the maps encoded so far, each kept at one address for as long as the backend
// lives: recorded launches carry that address until the worker launches them. A map is a
// matrix's (one a packed matrix) or x's split scratch's (one a scratch and shape of a forward),
// so there are a few hundred at most.
type tensorMaps struct {
	byKey map[mapKey]*tensorMap
}

// tensorMap returns the host address of the map of the buffer at addr shaped as s: s.Rows rows
// of s.Chunks·256 32-bit words, boxes of s.Box rows by 256 words, rows past the end read as
// zeros.
func (b *backend) tensorMap(addr uint64, s kernels.WGTMap) (uint64, error) {
	k := mapKey{addr, s}
	if m := b.maps.byKey[k]; m != nil {
		return uint64(uintptr(unsafe.Pointer(m))), nil
	}
	// Go keeps heap objects where they are; a [16]uint64 is 8-byte aligned, the driver asks 64.
	raw := make([]tensorMap, 2)
	m := (*tensorMap)(unsafe.Add(unsafe.Pointer(&raw[0]), (64-uintptr(unsafe.Pointer(&raw[0]))%64)%64))
	dims := [2]uint64{uint64(s.Chunks) * 256, uint64(s.Rows)}
	strides := [1]uint64{uint64(s.Chunks) * 1024}
	box := [2]uint32{256, uint32(s.Box)}
	elems := [2]uint32{1, 1}
	// The driver encodes with the context current: on the worker's thread, once a map.
	err := b.wait(false, func() error {
		r, _, _ := purego.SyscallN(fnTensorMapEncodeTiled, uintptr(unsafe.Pointer(m)), tensorMapUint32, 2, uintptr(addr),
			uintptr(unsafe.Pointer(&dims[0])), uintptr(unsafe.Pointer(&strides[0])), uintptr(unsafe.Pointer(&box[0])),
			uintptr(unsafe.Pointer(&elems[0])), 0, 0, tensorMapL2Promotion256, 0)
		if res := cuResult(int32(r)); res != 0 {
			return fmt.Errorf("cuda: cuTensorMapEncodeTiled of %d rows of %d chunks at %#x: %w", s.Rows, s.Chunks, addr, cuError(res))
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	if b.maps.byKey == nil {
		b.maps.byKey = map[mapKey]*tensorMap{}
	}
	b.maps.byKey[k] = m
	return uint64(uintptr(unsafe.Pointer(m))), nil
}
