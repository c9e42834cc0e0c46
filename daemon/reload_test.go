package daemon

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"tfd/daemon/api"
	"tfd/daemon/config"
)

// TestApplyStallTimeout: a config reload that changes server.stall_timeout hands it to the
// serving Handler, which bounds the writing of its next answer by it.
func TestApplyStallTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newTestHandler(api.HandlerOptions{Routing: api.Routing{StallTimeout: time.Minute}})
		s := &server{logger: slog.New(slog.NewTextHandler(io.Discard, nil)), cur: &instance{handler: newFront(h)}}
		old, next := config.Default(), config.Default()
		next.Server.StallTimeout = 5 * time.Second
		routing, err := readRouting(next)
		if err != nil {
			t.Fatal(err)
		}
		s.applyRouting(old, next, routing, config.Diff(old, next), &reloadReport{})
		w := &writeDeadlines{ResponseRecorder: httptest.NewRecorder()}
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/v1/models", nil))
		if len(w.at) != 1 || !w.at[0].Equal(time.Now().Add(5*time.Second)) {
			t.Errorf("write deadlines %v at %v after the reload, want one 5s on", w.at, time.Now())
		}
	})
}

// writeDeadlines is an httptest.ResponseRecorder that records the write deadlines set on it.
type writeDeadlines struct {
	*httptest.ResponseRecorder
	mu sync.Mutex // guards at
	at []time.Time
}

func (d *writeDeadlines) SetWriteDeadline(t time.Time) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.at = append(d.at, t)
	return nil
}
