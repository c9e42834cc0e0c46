package daemon

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"tfd/daemon/metrics"
	"tfd/scheduler"
)

// TestWorkedAroundLogsOncePerKind: every error the host works around is counted under its kind,
// and only the first of each kind is logged.
func TestWorkedAroundLogsOncePerKind(t *testing.T) {
	var log bytes.Buffer
	m := metrics.New(func() scheduler.Stats { return scheduler.Stats{} })
	report := workedAround(slog.New(slog.NewTextHandler(&log, nil)), m)
	for range 3 {
		report("draft", errors.New("head broken"))
	}
	report("warm", errors.New("tick broken"))
	if n := strings.Count(log.String(), "worked around"); n != 2 {
		t.Errorf("%d log lines, want one per kind:\n%s", n, log.String())
	}
	w := httptest.NewRecorder()
	m.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if !strings.Contains(w.Body.String(), `tfd_errors_total{where="draft"} 3`+"\n") {
		t.Errorf("tfd_errors_total{where=draft} is not 3:\n%s", w.Body)
	}
}
