package daemon

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"tfd/daemon/status"
	"time"
)

// TestStalledBody sends, on many connections at once, a request whose body stops short of its
// Content-Length. Each is answered when the body deadline passes, 408 (or 401 when the request
// has no key and the body is never read), in OpenAI's error shape, and its connection is closed.
func TestStalledBody(t *testing.T) {
	const conns = 20
	for _, tc := range []struct {
		name   string
		keys   []string
		down   bool // the daemon has no model: its liveHandler answers
		status int
		code   string
	}{
		{"read by the handler", nil, false, http.StatusRequestTimeout, "request_timeout"},
		{"never read: no API key", []string{"sk-one"}, false, http.StatusUnauthorized, "invalid_api_key"},
		{"never read: no model", nil, true, http.StatusServiceUnavailable, "no_model"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t, func(_ *Model, o *HandlerOptions) { o.BodyTimeout, o.APIKeys = 300*time.Millisecond, tc.keys })
			var h http.Handler = env.h
			if tc.down {
				live := newLiveHandler(env.h, nil, func() status.Report { return status.Report{} }, func() []string { return nil })
				live.fail(errors.New("no model is loaded: fix the config"))
				h = live
			}
			url, _ := serveForTest(t, h)
			var wg sync.WaitGroup
			for i := range conns {
				wg.Go(func() {
					if err := stalledBody(strings.TrimPrefix(url, "http://"), tc.status, tc.code); err != nil {
						t.Errorf("connection %d: %v", i, err)
					}
				})
			}
			wg.Wait()
		})
	}
}

// stalledBody sends a request with part of its body and checks that the answer comes with status
// and code, and that the server then closes the connection.
func stalledBody(addr string, status int, code string) error {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second)) // the test's bound, far past the server's
	fmt.Fprint(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: tfd\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n"+`{"messages":[`)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return fmt.Errorf("no answer: %w", err)
	}
	var e apiErrorJSON
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
		return fmt.Errorf("status %d, body not an OpenAI error: %w", resp.StatusCode, err)
	}
	resp.Body.Close()
	if resp.StatusCode != status || deref(e.Error.Code) != code {
		return fmt.Errorf("status %d code %q, want %d %q: %s", resp.StatusCode, deref(e.Error.Code), status, code, e.Error.Message)
	}
	if !resp.Close {
		return fmt.Errorf("the answer keeps the connection open (Connection: %q)", resp.Header.Get("Connection"))
	}
	if rest, err := io.ReadAll(br); err != nil || len(rest) > 0 {
		return fmt.Errorf("the connection was not closed after the answer: read %q, %v", rest, err)
	}
	return nil
}

// TestBodyDeadline: a request with a body gets a read deadline BodyTimeout from its start; once
// the body is in, the deadline goes (net/http's watch for a departing client reads on under it
// while the reply streams); a body that does not arrive keeps it and is answered 408 when it
// passes. A request without a body sets none.
func TestBodyDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		env := newTestEnv(t, func(_ *Model, o *HandlerOptions) { o.BodyTimeout = 5 * time.Second })
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
