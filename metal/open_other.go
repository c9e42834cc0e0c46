//go:build !darwin || !arm64

package metal

import (
	"fmt"
	"log/slog"
	"runtime"

	"tfd/compute"
)

func open(compute.ResidencyOptions, *slog.Logger) (compute.Backend, error) {
	return nil, fmt.Errorf("%w: metal: Metal is macOS on Apple silicon only (darwin/arm64); this is %s/%s", compute.ErrNoDevice, runtime.GOOS, runtime.GOARCH)
}
