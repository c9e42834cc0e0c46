//go:build unix

package hub

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestModes: what a pull makes is readable by every user, the service's among them, even from a
// root shell whose umask hides everything (077): folders 0755, files 0644.
func TestModes(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	_, c, dir := newHub(t, nil)
	models := filepath.Join(dir, "models")
	if _, err := c.Pull(context.Background(), Ref{Repo: modelRepo}, "", models, nil); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]fs.FileMode{
		models:                                               0o755,
		filepath.Join(models, "acme"):                        0o755,
		filepath.Join(models, "acme", "tiny"):                0o755,
		filepath.Join(models, "acme", "tiny", shard1):        0o644,
		filepath.Join(models, "acme", "tiny", "config.json"): 0o644,
	} {
		info, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode().Perm() != want {
			t.Errorf("%s: mode %04o, want %04o", path, info.Mode().Perm(), want)
		}
	}
}
