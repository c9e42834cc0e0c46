package daemon

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeDaemon serves /health openly and /v1/tfd/status, behind key when it is set, as tfd does
// once its status needs a key.
func fakeDaemon(t *testing.T, key string) *httptest.Server {
	t.Helper()
	d := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/health":
			writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "model": "gopher"})
		case r.URL.Path != statusPath:
			http.NotFound(w, r)
		case key != "" && r.Header.Get("Authorization") != "Bearer "+key:
			http.Error(w, "no key", http.StatusUnauthorized)
		default:
			var rep StatusReport
			rep.Status, rep.PID, rep.Model, rep.Backend = "serving", 777, "gopher", "cpu"
			rep.Config.Generation, rep.Plan.Text = 3, "memory plan\n  limit ...\n"
			writeJSON(w, http.StatusOK, rep)
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
	r := &fakeRunner{fail: map[string]bool{"systemctl is-active": true}}
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
