package daemon

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"tfd/daemon/metrics"
	"tfd/daemon/status"
	"tfd/scheduler"
)

// TestDaemonEndpointsNeedKeys: with API keys set, /metrics and /v1/tfd/status want one as the
// API does; /health stays open for monitors. Without keys all are open.
func TestDaemonEndpointsNeedKeys(t *testing.T) {
	for _, keys := range [][]string{nil, {"sk-one"}} {
		env := newTestEnv(t, func(_ *Model, o *HandlerOptions) { o.APIKeys = keys })
		metrics := metrics.New(func() scheduler.Stats { return scheduler.Stats{} })
		live := newLiveHandler(env.h, metrics, func() status.Report { return status.Report{Status: "serving"} }, func() []string { return keys })
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
