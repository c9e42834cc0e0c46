package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"tfd/configs"
	"tfd/daemon/service"
	"tfd/daemon/service/servicetest"
)

// fakeManager returns a managerFunc for systemd rooted in a temporary folder.
func fakeManager(t *testing.T, rec *servicetest.Runner) managerFunc {
	root := t.TempDir()
	if rec == nil {
		rec = &servicetest.Runner{Fail: map[string]bool{"systemctl is-active": true}}
	}
	paths := service.DefaultPaths("linux", "amd64", "/usr/local/bin/tfd") // the binary in place: install copies nothing
	for _, p := range []*string{&paths.ServiceDir, &paths.ConfigDir, &paths.LogDir, &paths.WorkingDir, &paths.Executable} {
		*p = filepath.Join(root, *p)
	}
	return func(cmd string, stdout io.Writer) (*service.Manager, error) {
		return &service.Manager{
			Platform:      service.Systemd,
			Paths:         paths,
			Runner:        rec,
			DefaultConfig: configs.Default,
			Out:           stdout,
			Client:        servicetest.NoDaemon(),
		}, nil
	}
}

func TestServiceCommands(t *testing.T) {
	rec := &servicetest.Runner{Fail: map[string]bool{"systemctl is-active": true}, Out: map[string]string{"journalctl": "a journal line\n"}}
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
	if _, err := os.Stat(m.Paths.ServiceFile(service.Systemd)); !os.IsNotExist(err) {
		t.Errorf("uninstall left the unit: %v", err)
	}
	cmds := rec.Take()
	want := []string{"systemctl daemon-reload", "systemctl enable tfd.service", "systemctl restart tfd.service"}
	if got := strings.Join(cmds[:3], "|"); got != strings.Join(want, "|") {
		t.Errorf("install ran %q, want %q", cmds[:3], want)
	}
	if !slices.Contains(cmds, "attach: journalctl -u tfd.service -n 3 --no-pager") {
		t.Errorf("logs did not run journalctl: %q", cmds)
	}
}
