//go:build amd64 || arm64

package cuda

import (
	"encoding/binary"
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

// TestRunsOf: the runs of equal consecutive bases that Attention chooses its kernel by, counted
// alike from values and from their bytes.
func TestRunsOf(t *testing.T) {
	for _, c := range []struct {
		v    []int32
		want int
	}{
		{nil, 0}, {[]int32{7}, 1}, {[]int32{0, 0, 0, 0}, 1}, {[]int32{5000, 6000, 0, 0, 0}, 3},
		{[]int32{0, 1, 0, 1}, 4}, {[]int32{-1, -1, 256, 256}, 2},
	} {
		b := make([]byte, 1+4*len(c.v)) // one byte ahead: words not aligned for int32
		for i, x := range c.v {
			binary.LittleEndian.PutUint32(b[1+4*i:], uint32(x))
		}
		if got, gotWords := runsOf(c.v), runsOfWords(b[1:]); got != c.want || gotWords != c.want {
			t.Errorf("runs of %v: %d, from bytes %d, want %d", c.v, got, gotWords, c.want)
		}
	}
}
