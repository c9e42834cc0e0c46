package batch

import (
	"slices"
	"testing"
)

func TestParseLayout(t *testing.T) {
	got, err := ParseLayout("4, 8x2,16")
	if err != nil || !slices.Equal(got, Layout{16, 8, 8, 4}) {
		t.Errorf("ParseLayout(\"4, 8x2,16\") = %v, %v; want [16 8 8 4], largest first", got, err)
	}
	if got, err := ParseLayout(" "); got != nil || err != nil {
		t.Errorf("an empty layout gave %v, %v; want nil: sizes come from memory", got, err)
	}
	for _, bad := range []string{"x", "4x", "0", "4x-1", "1x5000", "8,,4"} {
		if _, err := ParseLayout(bad); err == nil {
			t.Errorf("ParseLayout(%q) accepted", bad)
		}
	}
}

func TestLayoutString(t *testing.T) {
	l := Layout{16384, 65536, 32768, 32768, 16384}
	if s := l.String(); s != "65536,32768x2,16384x2" {
		t.Errorf("String = %q", s)
	}
	back, err := ParseLayout(l.String())
	if err != nil || !slices.Equal(back, l.Sorted()) || back.Total() != l.Total() {
		t.Errorf("ParseLayout(String) = %v, %v; want %v", back, err, l.Sorted())
	}
}
