package api

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestBodyDeadline: a request with a body gets a read deadline BodyTimeout from its start; once
// the body is in, the deadline goes (net/http's watch for a departing client reads on under it
// while the reply streams); a body that does not arrive keeps it and is answered 408 when it
// passes. A request without a body sets none.
func TestBodyDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		env := newTestEnv(t, func(_ *ServedModel, o *HandlerOptions) { o.BodyTimeout = 5 * time.Second })
		start := time.Now()
		w := &deadlineRecorder{ResponseRecorder: httptest.NewRecorder()}
		env.h.ServeHTTP(w, httptest.NewRequest("POST", "/v1/completions", strings.NewReader(`{"prompt":"Hi"}`)))
		if w.Code != http.StatusOK || len(w.read) != 2 || !w.read[0].Equal(start.Add(5*time.Second)) || !w.read[1].IsZero() {
			t.Errorf("a whole body: status %d, read deadlines %v, want the bound then none", w.Code, w.read)
		}

		w = &deadlineRecorder{ResponseRecorder: httptest.NewRecorder()}
		env.h.ServeHTTP(w, httptest.NewRequest("GET", "/v1/models", nil))
		if len(w.read) != 0 {
			t.Errorf("no body: read deadlines %v", w.read)
		}

		w = &deadlineRecorder{ResponseRecorder: httptest.NewRecorder()}
		r := httptest.NewRequest("POST", "/v1/completions", io.MultiReader(strings.NewReader(`{"prompt":`), &lateReader{w: w}))
		r.ContentLength = 100
		env.h.ServeHTTP(w, r)
		if w.Code != http.StatusRequestTimeout || len(w.read) != 1 || time.Since(start) != 5*time.Second ||
			w.Header().Get("Connection") != "close" || !strings.Contains(w.Body.String(), "did not arrive within 5s of the request (10 of its 100 bytes came)") {
			t.Errorf("a late body: status %d after %s, read deadlines %v, Connection %q: %s", w.Code, time.Since(start), w.read, w.Header().Get("Connection"), w.Body)
		}
	})
}

// deadlineRecorder is an httptest.ResponseRecorder that records the read deadlines set on it
// and keeps the last for lateReader.
type deadlineRecorder struct {
	*httptest.ResponseRecorder
	mu   sync.Mutex // guards read
	read []time.Time
}

func (d *deadlineRecorder) SetReadDeadline(t time.Time) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.read = append(d.read, t)
	return nil
}

// lateReader is a body whose client sends nothing more: a read waits until w's read deadline
// and fails as a connection's read does.
type lateReader struct{ w *deadlineRecorder }

func (l *lateReader) Read([]byte) (int, error) {
	l.w.mu.Lock()
	deadline := l.w.read[len(l.w.read)-1]
	l.w.mu.Unlock()
	time.Sleep(time.Until(deadline))
	return 0, &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
}
