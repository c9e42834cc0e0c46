package daemon

import (
	"cmp"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"tfd/daemon/api"
	"tfd/daemon/metrics"
	"tfd/daemon/status"
	"tfd/scheduler"
)

// TestDaemonEndpointsNeedKeys: with API keys set, /metrics and /v1/tfd/status want one as the
// API does; /health stays open for monitors. Without keys all are open.
func TestDaemonEndpointsNeedKeys(t *testing.T) {
	for _, keys := range [][]string{nil, {"sk-one"}} {
		h := newTestHandler(api.HandlerOptions{Routing: api.Routing{APIKeys: keys}})
		m := metrics.New(func() scheduler.Stats { return scheduler.Stats{} })
		live := newLiveHandler(newFront(h), m, func() status.Report { return status.Report{Status: "serving"} }, func() []string { return keys }, api.DefaultBodyTimeout)
		for _, tc := range []struct {
			path, auth string
			keyed      int // the status when keys are set
		}{
			{"/metrics", "", http.StatusUnauthorized},
			{"/metrics", "Bearer sk-wrong", http.StatusUnauthorized},
			{"/metrics", "Bearer sk-one", http.StatusOK},
			{status.Path, "", http.StatusUnauthorized},
			{status.Path, "bearer sk-one", http.StatusOK},
			{"/v1/models", "", http.StatusUnauthorized},
			{"/health", "", http.StatusOK},
		} {
			r := httptest.NewRequest(http.MethodGet, tc.path, nil)
			if tc.auth != "" {
				r.Header.Set("Authorization", tc.auth)
			}
			w := httptest.NewRecorder()
			live.ServeHTTP(w, r)
			want := tc.keyed
			if len(keys) == 0 {
				want = http.StatusOK
			}
			if w.Code != want {
				t.Errorf("keys %q: GET %s with %q: status %d, want %d", keys, tc.path, tc.auth, w.Code, want)
			}
		}
	}
}

// newTestHandler returns an API Handler for a model named gopher that has no tokenizer, template
// or host: enough for what the daemon's tests send it (/health, /v1/models, a body that never
// arrives, a missing key), which is answered before the model would be needed.
func newTestHandler(opts api.HandlerOptions) *api.Handler {
	opts.Logger = cmp.Or(opts.Logger, slog.New(slog.NewTextHandler(io.Discard, nil)))
	return api.NewHandler(api.ServedModel{Name: "gopher", Context: 64}, opts)
}
