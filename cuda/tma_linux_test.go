package cuda

import (
	"testing"

	"tfd/kernels"
)

// TestWGTPlan checks TFD_CUDA_WGT's settings as the backend reads them: off, a variant
// everywhere, or kernels.UsesWGT's choice; anything else is refused.
func TestWGTPlan(t *testing.T) {
	gateUp := [3]int{12288, 12288}
	dn, dp, dok := kernels.UsesWGT(256, 4096, gateUp, 132)
	for _, c := range []struct {
		mode string
		n, p int
		ok   bool
	}{{"0", 0, 0, false}, {"128:4", 128, 4, true}, {"128:1", 128, 1, true}, {"64:4", 64, 4, true}, {"64:1", 64, 1, true}, {"", dn, dp, dok}} {
		s, err := parseWGT(c.mode)
		if err != nil {
			t.Fatalf("TFD_CUDA_WGT=%q: %v", c.mode, err)
		}
		b := &backend{wgt: s, sms: 132}
		if n, p, ok := b.wgtPlan(256, 4096, gateUp); n != c.n || p != c.p || ok != c.ok {
			t.Errorf("TFD_CUDA_WGT=%q: %d, %d, %v; want %d, %d, %v", c.mode, n, p, ok, c.n, c.p, c.ok)
		}
	}
	if !dok {
		t.Errorf("gate and up at 256 rows: not the copy engine's tile")
	}
	for _, bad := range []string{"1", "256:1", "128:2", "128"} {
		if _, err := parseWGT(bad); err == nil {
			t.Errorf("TFD_CUDA_WGT=%q accepted", bad)
		}
	}
}
