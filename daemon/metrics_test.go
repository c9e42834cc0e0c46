package daemon

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"tfd/scheduler"
)

// TestWorkedAroundLogsOncePerKind: every error the host works around is counted under its kind,
// and only the first of each kind is logged.
func TestWorkedAroundLogsOncePerKind(t *testing.T) {
	var log bytes.Buffer
	m := NewMetrics(func() scheduler.Stats { return scheduler.Stats{} })
	report := workedAround(slog.New(slog.NewTextHandler(&log, nil)), m)
	for range 3 {
		report("draft", errors.New("head broken"))
	}
	report("warm", errors.New("tick broken"))
	if n := strings.Count(log.String(), "worked around"); n != 2 {
		t.Errorf("%d log lines, want one per kind:\n%s", n, log.String())
	}
	var got dto.Metric
	if err := m.errors.WithLabelValues("draft").Write(&got); err != nil || got.GetCounter().GetValue() != 3 {
		t.Errorf("tfd_errors_total{where=draft} = %v (%v), want 3", got.GetCounter().GetValue(), err)
	}
}
