package service

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"tfd/daemon/service/servicetest"
)

// TestServiceBinaryPlace: the service runs a fixed binary; only Homebrew's own stays where it is.
func TestServiceBinaryPlace(t *testing.T) {
	for _, c := range []struct{ goos, running, exe, source string }{
		{"linux", "/home/a/tfd/bin/tfd", "/usr/local/bin/tfd", "/home/a/tfd/bin/tfd"},
		{"linux", "/usr/local/bin/tfd", "/usr/local/bin/tfd", ""},
		{"linux", "/home/linuxbrew/.linuxbrew/Cellar/tfd/1.0/bin/tfd", "/usr/local/bin/tfd", "/home/linuxbrew/.linuxbrew/Cellar/tfd/1.0/bin/tfd"},
		{"darwin", "/Users/a/src/tfd/bin/tfd", "/usr/local/bin/tfd", "/Users/a/src/tfd/bin/tfd"},
		{"darwin", "/opt/homebrew/Cellar/tfd/1.0/bin/tfd", "/opt/homebrew/bin/tfd", ""},
		{"darwin", "/opt/homebrew/bin/tfd", "/opt/homebrew/bin/tfd", ""},
		{"darwin", "/usr/local/Cellar/tfd/1.0/bin/tfd", "/usr/local/bin/tfd", ""},
	} {
		p := DefaultPaths(c.goos, "arm64", c.running)
		if p.Executable != c.exe || p.Source != c.source {
			t.Errorf("%s %s: runs %q from %q, want %q from %q", c.goos, c.running, p.Executable, p.Source, c.exe, c.source)
		}
	}
}

// TestInstallCopiesBinary: install puts a root-owned 0755 copy of the running binary at the
// fixed place, over an older one, atomically, and the service file runs that copy.
func TestInstallCopiesBinary(t *testing.T) {
	for _, p := range []Platform{Launchd, Systemd} {
		r := &servicetest.Runner{Fail: map[string]bool{"launchctl print": true, "dscl . -read": true}, Out: macUsers()}
		m, out := newTestManager(t, p, r)
		os.MkdirAll(filepath.Dir(m.Paths.Executable), 0o755)
		os.WriteFile(m.Paths.Executable, []byte("#!tfd, old\n"), 0o755)
		if err := m.Install(context.Background()); err != nil {
			t.Fatal(err)
		}
		checkFile(t, m.Paths.Executable, "#!tfd, built\n")
		if info, err := os.Stat(m.Paths.Executable); err != nil || info.Mode().Perm() != 0o755 {
			t.Errorf("%s: the binary's mode is %v (%v), want 0755", p, info.Mode(), err)
		}
		tmp := filepath.Join(filepath.Dir(m.Paths.Executable), ".tfd.install")
		if _, err := os.Stat(tmp); !os.IsNotExist(err) {
			t.Errorf("%s: the copy's temporary file is still there: %v", p, err)
		}
		cmds := strings.Join(r.Take(), "\n")
		if !strings.Contains(cmds, "chown 0:0 "+tmp+"\n") {
			t.Errorf("%s: the copy was not given to root before it was renamed into place:\n%s", p, cmds)
		}
		text, _ := m.render()
		if !strings.Contains(text, m.Paths.Executable) || strings.Contains(text, m.Paths.Source) {
			t.Errorf("%s: the service file does not run the copy %s:\n%s", p, m.Paths.Executable, text)
		}
		if !strings.Contains(out.String(), "copied "+m.Paths.Source+" to "+m.Paths.Executable) {
			t.Errorf("%s: install did not say it copied the binary:\n%s", p, out)
		}
	}
}

// TestInstallRefusesTemporaryBuild: a binary from go run (or anything else in the temporary
// folder) is refused before anything is changed, with the way to a lasting build.
func TestInstallRefusesTemporaryBuild(t *testing.T) {
	r := &servicetest.Runner{}
	m, _ := newTestManager(t, Systemd, r)
	for _, src := range []string{
		filepath.Join(m.TempDir, "anything", "tfd"),
		"/var/folders/xy/T/go-build1234/b001/exe/tfd",
		"/home/a/.cache/gotmp/go-build987/b001/exe/tfd",
	} {
		m.Paths.Source = src
		err := m.Install(context.Background())
		if err == nil || !strings.Contains(err.Error(), "temporary build") || !strings.Contains(err.Error(), "make build") {
			t.Errorf("install from %s: %v", src, err)
		}
	}
	if cmds := r.Take(); len(cmds) > 0 {
		t.Errorf("a refused install ran %q", cmds)
	}
	for _, f := range []string{m.Paths.ServiceFile(Systemd), m.Paths.Executable, m.Paths.ConfigFile()} {
		if _, err := os.Stat(f); !os.IsNotExist(err) {
			t.Errorf("a refused install wrote %s", f)
		}
	}
	if temporaryBuild("/usr/local/src/tfd/bin/tfd", m.TempDir) {
		t.Error("a build outside the temporary folder was taken for a temporary one")
	}
}
