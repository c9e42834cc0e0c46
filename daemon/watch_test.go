package daemon

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestLinkChain(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "store", "v2.toml")
	must(t, os.MkdirAll(filepath.Dir(real), 0o755))
	writeText(t, real, "")
	must(t, os.Symlink(real, filepath.Join(dir, "current.toml")))
	must(t, os.Symlink("current.toml", filepath.Join(dir, "tfd.toml")))
	got := linkChain(filepath.Join(dir, "tfd.toml"))
	want := []string{filepath.Join(dir, "tfd.toml"), filepath.Join(dir, "current.toml"), real}
	if !slices.Equal(got, want) {
		t.Errorf("linkChain = %q, want %q", got, want)
	}
	if got := linkChain(filepath.Join(dir, "absent.toml")); len(got) != 1 {
		t.Errorf("a missing file: %q", got)
	}
}
