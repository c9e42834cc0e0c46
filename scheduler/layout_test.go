package scheduler

import (
	"slices"
	"testing"
)

func TestParseLayout(t *testing.T) {
	got, err := ParseLayout("8, 4x2")
	if err != nil || !slices.Equal(got, []int{4, 4, 8}) {
		t.Errorf("ParseLayout(\"8, 4x2\") = %v, %v; want [4 4 8]", got, err)
	}
	if got, err := ParseLayout(" "); got != nil || err != nil {
		t.Errorf("an empty layout gave %v, %v; want nil: sizes come from memory", got, err)
	}
	for _, bad := range []string{"x", "4x", "0", "4x-1", "1x5000", "8,,4"} {
		if _, err := ParseLayout(bad); err == nil {
			t.Errorf("ParseLayout(%q) accepted", bad)
		}
	}
	if s := FormatLayout([]int{16384, 65536, 32768, 32768, 16384}); s != "65536,32768x2,16384x2" {
		t.Errorf("FormatLayout = %q", s)
	}
}
