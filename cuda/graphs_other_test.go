//go:build !linux || !(amd64 || arm64)

package cuda

import "tfd/compute"

// Where there is no cuda backend every GPU test skips; these keep the tests compiling.

func setGraphs(b compute.Backend, on bool) {}

func setAttentionTile(b compute.Backend, mode string) {}

func setAttentionWarp(b compute.Backend, mode string) {}

func setDependentLaunch(b compute.Backend, on bool) bool { return false }

func setMMATile(b compute.Backend, s int) {}

func setSplitX(b compute.Backend, on bool) {}

func setWGQuarters(b compute.Backend, mode string) {}

func setWGT(b compute.Backend, mode string) {}

func setQKRoPE(b compute.Backend, on bool) {}

func setStagedReads(b compute.Backend, on bool) {}

func graphState(b compute.Backend) (on bool, captures, replays int, err error) {
	return false, 0, 0, nil
}

func uploadAs(b compute.Backend, dt compute.DType, shape []int, data []byte, pack bool) (compute.Tensor, error) {
	return b.Upload(dt, shape, data)
}

func isPacked(t compute.Tensor) bool { return false }
