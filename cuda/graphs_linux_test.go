//go:build amd64 || arm64

package cuda

import "tfd/compute"

// setGraphs turns the cuda backend's graphs on or off (graph_linux.go).
func setGraphs(b compute.Backend, on bool) { b.(*backend).setGraphs(on) }

// graphState reports the cuda backend's graph state: on, graphs captured and replayed, and why
// they were turned off if they failed.
func graphState(b compute.Backend) (on bool, captures, replays int, err error) {
	return b.(*backend).graphState()
}

// uploadAs uploads as Upload does, with the weights stored in the matrix unit's packed order or
// row-major as pack says, whatever the backend's setting (pack_linux.go).
func uploadAs(b compute.Backend, dt compute.DType, shape []int, data []byte, pack bool) (compute.Tensor, error) {
	return b.(*backend).upload(dt, shape, data, pack)
}

// isPacked says whether a tensor of the cuda backend is stored in the packed order.
func isPacked(t compute.Tensor) bool { return t.(*tensor).packed }

// setDependentLaunch turns programmatic dependent launch on or off where the device has it, for
// forwards of any rows, and reports whether it is on (pdl_linux.go).
func setDependentLaunch(b compute.Backend, on bool) bool {
	c := b.(*backend)
	c.setDependentLaunch(on)
	c.pdlRows = 0
	return on && c.pdlAllowed
}

// setMMATile forces the tensor-core matmuls' tile size S (1, 2, 4), or 0 for kernels.MMATile's
// choice, as TFD_CUDA_MMA_TILE does.
func setMMATile(b compute.Backend, s int) { b.(*backend).mmaTile = s }

// setSplitX has the S = 2 tiles read x split once (mma_split_x) or split it in every group, as
// TFD_CUDA_XSPLIT=0 does.
func setSplitX(b compute.Backend, on bool) { b.(*backend).splitX = on }

// setWGQuarters sets a cuda backend's choice of matmul_wg1_bf16_N as TFD_CUDA_WG_QUARTERS would.
func setWGQuarters(b compute.Backend, mode string) { b.(*backend).wgQuarters = mode }

// setWGT sets a cuda backend's choice of matmul_wgtP_bf16_N as TFD_CUDA_WGT would, where the
// device and driver have it.
func setWGT(b compute.Backend, mode string) {
	if cb := b.(*backend); cb.arch == "sm_90a" && tmaAvailable() {
		var err error
		if cb.wgt, err = parseWGT(mode); err != nil {
			panic(err) // the tests' own modes
		}
	}
}

// setQKRoPE lets QKRoPEWrite fuse (on) or makes it decline, so that the engine runs the norms,
// RoPE and KVWrite one by one.
func setQKRoPE(b compute.Backend, on bool) { b.(*backend).qkRoPEOff = !on }

// setStagedReads makes ReadFloat32 copy through the pinned stage even into the backend's own
// page-locked memory (on), or copy into that memory directly (off, the default).
func setStagedReads(b compute.Backend, on bool) { b.(*backend).stagedReads = on }
