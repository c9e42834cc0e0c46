// Package cuda is the compute backend for NVIDIA GPUs. It registers itself as "cuda".
//
// There is no cgo: libcuda (the driver API) and NVRTC are opened at run time with purego, so the
// package builds everywhere with CGO_ENABLED=0. Open fails with an error that names what is
// missing and where it looked when there is no driver or no NVRTC; on anything but Linux on amd64
// or arm64 it fails with an error saying that CUDA is Linux-only.
//
// The kernels come from tfd/kernels, compiled once per process by NVRTC for the device's own
// architecture (sm_XY from its compute capability), without fast math.
//
// Threading: a CUDA context is current on one OS thread, so each backend owns a goroutine locked
// to its thread that makes every driver call. Ops are recorded into fixed batches of commands
// and handed to it; ReadFloat32 and Sync wait for it. Recording an op allocates nothing. A run of
// kernel launches that repeats (a decode step) is captured once as a CUDA graph and replayed;
// TFD_CUDA_GRAPHS=0 turns that off. On compute capability 9.0 and later each kernel may start
// while the one before it ends, waiting inside for its results (programmatic dependent launch,
// pdl_linux.go) in forwards of a few rows, where it pays; TFD_CUDA_PDL=0 turns that off.
//
// Matmuls with BF16 weights whose rows are a multiple of 32 long run on the tensor cores
// (mma.sync, kernels/src/mma.kern), faster than the CUDA cores in an 8B model's forward at every
// row count measured (docs/performance.md); TFD_CUDA_MMA=0 puts them on the CUDA cores, as every
// other matmul. Attention runs on the CUDA cores in F32; TFD_CUDA_ATTN_MMA=1 puts its products on
// the tensor cores at F32's precision (kernels/src/attention_mma.kern, its own bits, for every row
// of a model), off by default while decoding rows run slower with it.
//
// Memory: 2-D F16 and BF16 weights stay F16 and BF16 on the device; F32 weights stay F32; 1-D
// tensors (norm weights, biases) are widened to F32 when uploaded. Activations are F32 and the KV
// pool is F32: the simplest exact choice, at twice the memory of a 16-bit cache.
//
// Batch invariance: every output element is reduced by one fixed arrangement of threads in one
// fixed order that depends on the op's shape (the reduction length, the head size), never on the
// number of rows or a row's place among them. The orders are written beside each kernel in
// tfd/kernels/src. They are not the CPU backend's orders, so the two agree to a tolerance, not bit
// for bit.
package cuda

import "tfd/compute"

func init() {
	compute.Register("cuda", driver{})
}

// driver opens CUDA backends.
type driver struct{}

// Open returns a backend on the first CUDA device, or an error saying what is missing.
func (driver) Open() (compute.Backend, error) {
	return open()
}
