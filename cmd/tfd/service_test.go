package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"tfd/configs"
	"tfd/daemon"
)

// recorder is a CommandRunner that records commands and answers from a script: a command whose
// line starts with a key of fail fails; one that starts with a key of out prints its value.
type recorder struct {
	mu   sync.Mutex // guards cmds
	cmds []string
	fail map[string]bool
	out  map[string]string
}

func (r *recorder) Run(_ context.Context, name string, args ...string) (string, error) {
	line := strings.Join(append([]string{name}, args...), " ")
	r.mu.Lock()
	r.cmds = append(r.cmds, line)
	r.mu.Unlock()
	for prefix := range r.fail {
		if strings.HasPrefix(line, prefix) {
			return "", &os.PathError{Op: line, Err: os.ErrNotExist}
		}
	}
	for prefix, out := range r.out {
		if strings.HasPrefix(line, prefix) {
			return out, nil
		}
	}
	return "", nil
}

// Attach records the command as "attach: LINE" and prints its out value.
func (r *recorder) Attach(ctx context.Context, _ io.Reader, stdout, _ io.Writer, name string, args ...string) error {
	out, err := r.Run(ctx, name, args...)
	r.mu.Lock()
	r.cmds[len(r.cmds)-1] = "attach: " + r.cmds[len(r.cmds)-1]
	r.mu.Unlock()
	io.WriteString(stdout, out)
	return err
}

// noDaemon is a transport to no daemon, so that a tfd serving on this machine does not change
// what status says.
type noDaemon struct{}

func (noDaemon) RoundTrip(*http.Request) (*http.Response, error) {
	return nil, errors.New("connection refused (test)")
}

// fakeManager returns a managerFunc for systemd rooted in a temporary folder.
func fakeManager(t *testing.T, rec *recorder) managerFunc {
	root := t.TempDir()
	if rec == nil {
		rec = &recorder{fail: map[string]bool{"systemctl is-active": true}}
	}
	return func(cmd string, stdout io.Writer) (*daemon.ServiceManager, error) {
		return &daemon.ServiceManager{
			Platform:      daemon.Systemd,
			Paths:         daemon.DefaultServicePaths("linux", "amd64", "/usr/local/bin/tfd").Under(root),
			Runner:        rec,
			DefaultConfig: configs.Default,
			Out:           stdout,
			Client:        &http.Client{Transport: noDaemon{}},
		}, nil
	}
}

func TestServiceCommands(t *testing.T) {
	rec := &recorder{fail: map[string]bool{"systemctl is-active": true}, out: map[string]string{"journalctl": "a journal line\n"}}
	newManager := fakeManager(t, rec)
	m, _ := newManager("", io.Discard)
	steps := []struct {
		args   []string
		code   int
		stdout string
	}{
		{[]string{"install"}, 0, "wrote the default config"},
		{[]string{"status"}, 0, "installed"},
		{[]string{"restart"}, 0, "restart done"},
		{[]string{"install"}, 0, "kept the config"},
		{[]string{"logs", "-n", "3", "--no-follow"}, 0, "a journal line"},
		{[]string{"uninstall"}, 0, "left in place: the binary"},
		{[]string{"status"}, exitFailure, "not installed"},
	}
	for _, s := range steps {
		var stdout, stderr bytes.Buffer
		if code := runWith(s.args, &stdout, &stderr, newManager); code != s.code || !strings.Contains(stdout.String(), s.stdout) {
			t.Errorf("tfd %v: exit %d, want %d\nstdout: %s\nstderr: %s", s.args, code, s.code, &stdout, &stderr)
		}
	}
	if _, err := os.Stat(m.Paths.ConfigFile()); err != nil {
		t.Errorf("uninstall removed the config: %v", err)
	}
	if _, err := os.Stat(filepath.Join(m.Paths.ServiceDir, daemon.ServiceUnit)); !os.IsNotExist(err) {
		t.Errorf("uninstall left the unit: %v", err)
	}
	want := []string{"systemctl daemon-reload", "systemctl enable tfd.service", "systemctl restart tfd.service"}
	if got := strings.Join(rec.cmds[:3], "|"); got != strings.Join(want, "|") {
		t.Errorf("install ran %q, want %q", rec.cmds[:3], want)
	}
	if !slices.Contains(rec.cmds, "attach: journalctl -u tfd.service -n 3 --no-pager") {
		t.Errorf("logs did not run journalctl: %q", rec.cmds)
	}
}
