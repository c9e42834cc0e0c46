package api

import (
	"strings"
	"testing"
)

func TestStopMatcher(t *testing.T) {
	tests := []struct {
		name    string
		stops   []string
		pieces  []string
		want    []string // what each push releases
		stopped bool
		flushed string
	}{
		{"no stops", nil, []string{"ab", "c"}, []string{"ab", "c"}, false, ""},
		{"hold a possible start", []string{"xyz"}, []string{"abx", "y", "q"}, []string{"ab", "", "xyq"}, false, ""},
		{"complete across pieces", []string{"xyz"}, []string{"abx", "y", "zzz"}, []string{"ab", "", ""}, true, ""},
		{"held at the end is flushed", []string{"xyz"}, []string{"ab", "xy"}, []string{"ab", ""}, false, "xy"},
		{"overlapping prefixes", []string{"aab"}, []string{"a", "a", "a", "b"}, []string{"", "", "a", ""}, true, ""},
		{"multibyte", []string{"é!"}, []string{"caf", "é", "!"}, []string{"caf", "", ""}, true, ""},
	}
	for _, tc := range tests {
		m := stopMatcher{stops: tc.stops}
		var stopped bool
		for i, p := range tc.pieces {
			out, s := m.push(p)
			if out != tc.want[i] {
				t.Errorf("%s: push %d (%q) released %q, want %q", tc.name, i, p, out, tc.want[i])
			}
			if s {
				stopped = true
				break
			}
		}
		if stopped != tc.stopped {
			t.Errorf("%s: stopped %v, want %v", tc.name, stopped, tc.stopped)
		}
		if !stopped {
			if got := m.flush(); got != tc.flushed {
				t.Errorf("%s: flush %q, want %q", tc.name, got, tc.flushed)
			}
		}
	}
}

// TestStopMatcherSplits checks every way of cutting a text into two pieces: the released text is
// always the text before the first stop string, whatever the cut.
func TestStopMatcherSplits(t *testing.T) {
	text := "func main() {\n\treturn\n}\n// end"
	stops := []string{"\n}\n", "// e"}
	want := text[:strings.Index(text, "\n}\n")]
	for cut := range len(text) + 1 {
		m := stopMatcher{stops: stops}
		a, s1 := m.push(text[:cut])
		got := a
		if !s1 {
			b, s2 := m.push(text[cut:])
			got += b
			if !s2 {
				t.Fatalf("cut %d: no stop found", cut)
			}
		}
		if got != want {
			t.Errorf("cut %d: released %q, want %q", cut, got, want)
		}
	}
}
