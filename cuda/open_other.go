//go:build !linux || !(amd64 || arm64)

package cuda

import (
	"errors"
	"fmt"
	"runtime"

	"tfd/compute"
)

func open() (compute.Backend, error) {
	return nil, fmt.Errorf("%w: cuda: CUDA is Linux-only (amd64, arm64); this is %s/%s", compute.ErrNoDevice, runtime.GOOS, runtime.GOARCH)
}

// compileForTest is the test hook that compiles the kernels with NVRTC, which is Linux-only.
func compileForTest(arch string) (string, error) {
	return "", errors.New("cuda: NVRTC is Linux-only")
}
