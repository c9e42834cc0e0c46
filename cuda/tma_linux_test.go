package cuda

import (
	"testing"

	"tfd/kernels"
)

// TestWGTPlan checks TFD_CUDA_WGT's settings as the backend reads them: off, a variant
// everywhere, or kernels.UsesWGT's choice.
func TestWGTPlan(t *testing.T) {
	gateUp := [3]int{12288, 12288}
	dn, dp, dok := kernels.UsesWGT(256, 4096, gateUp, 132)
	for _, c := range []struct {
		mode string
		n, p int
		ok   bool
	}{{"0", 0, 0, false}, {"128:4", 128, 4, true}, {"128:1", 128, 1, true}, {"64:4", 64, 4, true}, {"64:1", 64, 1, true}, {"", dn, dp, dok}} {
		b := &backend{wgt: c.mode, sms: 132}
		if n, p, ok := b.wgtPlan(256, 4096, gateUp); n != c.n || p != c.p || ok != c.ok {
			t.Errorf("TFD_CUDA_WGT=%q: %d, %d, %v; want %d, %d, %v", c.mode, n, p, ok, c.n, c.p, c.ok)
		}
	}
	if !dok {
		t.Errorf("gate and up at 256 rows: not the copy engine's tile")
	}
}
