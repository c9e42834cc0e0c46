package service

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"tfd/daemon/service/servicetest"
	"tfd/daemon/status"
)

// fakeDaemon serves /health openly and /v1/tfd/status, behind key when it is set, as tfd does
// once its status needs a key.
func fakeDaemon(t *testing.T, key string) *httptest.Server {
	t.Helper()
	d := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/health":
			json.NewEncoder(w).Encode(map[string]string{"status": "ok", "model": "gopher"})
		case r.URL.Path != status.Path:
			http.NotFound(w, r)
		case key != "" && r.Header.Get("Authorization") != "Bearer "+key:
			http.Error(w, "no key", http.StatusUnauthorized)
		default:
			var rep status.Report
			rep.Status, rep.PID, rep.Model, rep.Backend = "serving", 777, "gopher", "cpu"
			rep.Config.Generation, rep.Plan.Text = 3, "memory plan\n  limit ...\n"
			json.NewEncoder(w).Encode(rep)
		}
	}))
	t.Cleanup(d.Close)
	return d
}

// TestStatusForeground: with no service installed, a tfd serve answering on the configured
// address is reported as running in the foreground, with its model and pid; the status report
// is asked for with the first API key, and without a readable key what /health says is shown.
func TestStatusForeground(t *testing.T) {
	d := fakeDaemon(t, "k1")
	r := &servicetest.Runner{Fail: map[string]bool{"systemctl is-active": true}}
	m, _ := newTestManager(t, Systemd, r)
	m.Client = nil
	keys := filepath.Join(t.TempDir(), "keys")
	os.WriteFile(keys, []byte("# the keys\nk1\nk2\n"), 0o600)
	os.MkdirAll(m.Paths.ConfigDir, 0o755)
	config := "[server]\nlisten = \"" + d.Listener.Addr().String() + "\"\napi_keys_file = \"" + keys + "\"\n"
	os.WriteFile(m.Paths.ConfigFile(), []byte(config), 0o644)

	st := m.Status(context.Background())
	var text bytes.Buffer
	st.Write(&text)
	if st.Installed || !st.Answered || st.Daemon == nil {
		t.Errorf("status %+v", st)
	}
	for _, want := range []string{"tfd is running in the foreground (not installed as a service) on " + d.Listener.Addr().String() + " (pid 777)",
		"model gopher on cpu", "generation 3"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, &text)
		}
	}

	os.Remove(keys)
	st = m.Status(context.Background())
	text.Reset()
	st.Write(&text)
	for _, want := range []string{"running in the foreground", "model gopher; no status report: it needs an API key", "sudo tfd status"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("without the keys, status lacks %q:\n%s", want, &text)
		}
	}
	if !st.Answered {
		t.Error("a tfd that answers /health was not counted as answering")
	}
}

// TestServiceLogs: tfd logs hands the terminal to tail -F on the log file under launchd and to
// journalctl -f under systemd, with the lines asked for; --no-follow drops the following.
func TestServiceLogs(t *testing.T) {
	ctx := context.Background()
	r := &servicetest.Runner{Out: map[string]string{"tail": "a line\n"}}
	m, _ := newTestManager(t, Launchd, r)
	var out bytes.Buffer
	if err := m.Logs(ctx, 5, true, nil, &out, &out); err == nil || !strings.Contains(err.Error(), "no log at "+m.Paths.logFile()) {
		t.Errorf("logs before any log: %v", err)
	}
	os.MkdirAll(m.Paths.LogDir, 0o750)
	os.WriteFile(m.Paths.logFile(), []byte("a line\n"), 0o640)
	if err := m.Logs(ctx, 5, true, nil, &out, &out); err != nil {
		t.Fatal(err)
	}
	if err := m.Logs(ctx, 0, false, nil, &out, &out); err != nil {
		t.Fatal(err)
	}
	want := []string{"attach: tail -F -n 5 " + m.Paths.logFile(), "attach: tail -n 0 " + m.Paths.logFile()}
	if got := r.Take(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("logs ran %q, want %q", got, want)
	}
	if out.String() != "a line\na line\n" {
		t.Errorf("logs printed %q", out.String())
	}

	m, _ = newTestManager(t, Systemd, r)
	m.Logs(ctx, 20, true, nil, &out, &out)
	m.Logs(ctx, 20, false, nil, &out, &out)
	want = []string{"attach: journalctl -u tfd.service -n 20 --no-pager -f", "attach: journalctl -u tfd.service -n 20 --no-pager"}
	if got := r.Take(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("logs ran %q, want %q", got, want)
	}
}
