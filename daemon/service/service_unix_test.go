//go:build unix

package service

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"tfd/daemon/service/servicetest"
)

// TestInstallModes: what install makes has the modes the service user needs and no wider, even
// from a root shell whose umask hides everything (077): the folders the service writes 0750,
// its log 0640, the config and the files the service manager reads 0644, and the folders on
// the way to them 0755.
func TestInstallModes(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	r := &servicetest.Runner{Fail: map[string]bool{"launchctl print": true, "dscl . -read": true}, Out: macUsers()}
	m, _ := newTestManager(t, Launchd, r)
	if err := m.Install(context.Background()); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]fs.FileMode{
		m.Paths.WorkingDir:               0o750,
		m.Paths.LogDir:                   0o750,
		m.Paths.logFile():                0o640,
		filepath.Dir(m.Paths.LogDir):     0o755, // var/log, made on the way
		m.Paths.ConfigDir:                0o755,
		m.Paths.ConfigFile():             0o644,
		m.Paths.ServiceFile(Launchd):     0o644,
		m.Paths.newsyslogFile():          0o644,
		m.Paths.Executable:               0o755,
		filepath.Dir(m.Paths.Executable): 0o755,
	} {
		if info, err := os.Stat(path); err != nil || info.Mode().Perm() != want {
			t.Errorf("%s: mode %v (%v), want %04o", path, info.Mode().Perm(), err, want)
		}
	}
}

// TestInstallRefusesLogSymlink: the log folder is the service's, so a symlink at the log's
// path may be its doing; root must not chmod or chown what it points at.
func TestInstallRefusesLogSymlink(t *testing.T) {
	r := &servicetest.Runner{Fail: map[string]bool{"launchctl print": true, "dscl . -read": true}, Out: macUsers()}
	m, _ := newTestManager(t, Launchd, r)
	target := filepath.Join(t.TempDir(), "precious")
	os.WriteFile(target, []byte("x"), 0o600)
	os.MkdirAll(m.Paths.LogDir, 0o750)
	os.Symlink(target, m.Paths.logFile())
	if err := m.Install(context.Background()); err == nil || !strings.Contains(err.Error(), "not a file tfd wrote") {
		t.Errorf("install over a symlinked log: %v", err)
	}
	if info, _ := os.Stat(target); info.Mode().Perm() != 0o600 {
		t.Errorf("install changed the symlink's target to %v", info.Mode().Perm())
	}
	for _, c := range r.Take() {
		if strings.Contains(c, m.Paths.logFile()) {
			t.Errorf("install ran %q", c)
		}
	}
}

// TestInstallWarnsUnreadable: install says when the service user cannot read the model or the
// API keys, or when everyone can read the keys, and how to fix it.
func TestInstallWarnsUnreadable(t *testing.T) {
	for _, p := range []Platform{Launchd, Systemd} {
		r := &servicetest.Runner{Fail: map[string]bool{"launchctl print": true, "dscl . -read": true}, Out: macUsers()}
		m, out := newTestManager(t, p, r)
		home := filepath.Join(t.TempDir(), "home")
		os.MkdirAll(filepath.Join(home, "model"), 0o755)
		os.Chmod(home, 0o700)
		keys := filepath.Join(filepath.Dir(m.Paths.ConfigDir), "keys")
		os.MkdirAll(m.Paths.ConfigDir, 0o755)
		os.WriteFile(keys, []byte("k1\n"), 0o644)
		os.WriteFile(m.Paths.ConfigFile(), []byte("[server]\napi_keys_file = \""+keys+"\"\n[model]\npath = \""+filepath.Join(home, "model")+"\"\n"), 0o644)
		if err := m.Install(context.Background()); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{
			"cannot read model.path " + filepath.Join(home, "model") + ": it cannot enter " + home + " (mode 0700)",
			"every user of this machine can read the API keys in " + keys,
		} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("%s: install did not warn %q:\n%s", p, want, out)
			}
		}
		if strings.Contains(out.String(), "cannot read the config") {
			t.Errorf("%s: a readable config was reported unreadable:\n%s", p, out)
		}
		// Keys readable by no one else: under launchd the fix is the _tfd group, under systemd
		// a credential.
		os.Chmod(keys, 0o600)
		out.Reset()
		m.checkConfig(serviceIDs{497, 497})
		want := map[Platform]string{Launchd: "sudo chown root:_tfd " + keys, Systemd: "LoadCredential="}[p]
		if !strings.Contains(out.String(), "cannot read the API keys") || !strings.Contains(out.String(), want) {
			t.Errorf("%s: unreadable keys: %s", p, out)
		}
	}
	// systemd hides home folders from the service whatever their modes.
	m, out := newTestManager(t, Systemd, &servicetest.Runner{})
	os.MkdirAll(m.Paths.ConfigDir, 0o755)
	os.WriteFile(m.Paths.ConfigFile(), []byte("[model]\npath = \"/home/a/models/qwen\"\n"), 0o644)
	m.checkConfig(serviceIDs{})
	if !strings.Contains(out.String(), "ProtectHome=yes") {
		t.Errorf("a model under /home: %s", out)
	}
	// A model tfd pull put in the service's models folder: with DynamicUser the working folder
	// is a link into a folder only root may enter from outside, and the service still reads it.
	m, out = newTestManager(t, Systemd, &servicetest.Runner{})
	private := filepath.Join(t.TempDir(), "private")
	model := filepath.Join(private, "tfd", "models", "acme", "tiny")
	os.MkdirAll(model, 0o755)
	os.Chmod(private, 0o700)
	os.MkdirAll(filepath.Dir(m.Paths.WorkingDir), 0o755)
	if err := os.Symlink(filepath.Join(private, "tfd"), m.Paths.WorkingDir); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(m.Paths.ConfigDir, 0o755)
	pulled := filepath.Join(m.Paths.ModelsDir(), "acme", "tiny")
	os.WriteFile(m.Paths.ConfigFile(), []byte("[model]\npath = \""+pulled+"\"\n"), 0o644)
	m.checkConfig(serviceIDs{})
	if strings.Contains(out.String(), "cannot read model.path") {
		t.Errorf("a model in the service's models folder was reported unreadable: %s", out)
	}
}

// TestPullModelsDir: tfd pull puts models where the service reads them when the service is
// installed or it runs as root, else in the user's cache.
func TestPullModelsDir(t *testing.T) {
	m, _ := newTestManager(t, Systemd, &servicetest.Runner{})
	cache := t.TempDir()
	mine := filepath.Join(cache, "tfd", "models")
	if got := m.Paths.PullModelsDir(Systemd, false, cache); got != mine {
		t.Errorf("not installed, not root: %s, want %s", got, mine)
	}
	if got := m.Paths.PullModelsDir(Systemd, true, cache); got != m.Paths.ModelsDir() {
		t.Errorf("as root: %s, want %s", got, m.Paths.ModelsDir())
	}
	os.MkdirAll(m.Paths.ServiceDir, 0o755)
	os.WriteFile(m.Paths.ServiceFile(Systemd), nil, 0o644)
	if got := m.Paths.PullModelsDir(Systemd, false, cache); got != m.Paths.ModelsDir() {
		t.Errorf("installed: %s, want %s", got, m.Paths.ModelsDir())
	}
	if got, want := DefaultPaths("linux", "amd64", "").ModelsDir(), "/var/lib/tfd/models"; got != want {
		t.Errorf("Linux: %s, want %s", got, want)
	}
	if got, want := DefaultPaths("darwin", "arm64", "").ModelsDir(), "/opt/homebrew/var/tfd/models"; got != want {
		t.Errorf("macOS: %s, want %s", got, want)
	}
}

// TestExecRunnerAttach: an attached command reads the caller's input and writes its output; its
// end by Ctrl-C is no error, any other failure is.
func TestExecRunnerAttach(t *testing.T) {
	ctx := context.Background()
	var out strings.Builder
	if err := (ExecRunner{}).Attach(ctx, strings.NewReader("a line\n"), &out, &out, "sh", "-c", "cat"); err != nil || out.String() != "a line\n" {
		t.Errorf("cat: %q, %v", out.String(), err)
	}
	if err := (ExecRunner{}).Attach(ctx, nil, &out, &out, "sh", "-c", "kill -INT $$"); err != nil {
		t.Errorf("a command ended by SIGINT: %v", err)
	}
	if err := (ExecRunner{}).Attach(ctx, nil, &out, &out, "sh", "-c", "exit 3"); err == nil || !strings.Contains(err.Error(), "exit status 3") {
		t.Errorf("a command that failed: %v", err)
	}
}
