//go:build amd64 || arm64

package cuda

import (
	"testing"

	"tfd/kernels"
)

// TestCommandsHoldEveryKernel: a command holds the arguments of every kernel, so opening the
// backend never fails on one (it checks the same at load, on a machine with a GPU).
func TestCommandsHoldEveryKernel(t *testing.T) {
	for _, k := range kernels.All() {
		if len(k.Params) > maxArgs {
			t.Errorf("kernel %s takes %d parameters; commands hold %d (maxArgs)", k.Name, len(k.Params), maxArgs)
		}
	}
}
