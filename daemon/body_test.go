package daemon

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"tfd/daemon/api"
	"tfd/daemon/status"
)

// TestStalledBody sends, on many connections at once, a request whose body stops short of its
// Content-Length, to a served API Handler and to a live handler with no model. Each is answered when the body deadline passes, 408 (or 401 when the request
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
			const bodyTimeout = 300 * time.Millisecond
			var h http.Handler = newTestHandler(api.HandlerOptions{Routing: api.Routing{APIKeys: tc.keys}, BodyTimeout: bodyTimeout})
			if tc.down {
				live := newLiveHandler(nil, nil, func() status.Report { return status.Report{} }, func() []string { return nil }, bodyTimeout)
				live.fail(errors.New("no model is loaded: fix the config"))
				h = live
			}
			url, _ := serveForTest(t, h, nil)
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
	var e struct {
		Error struct{ Message, Code string }
	} // OpenAI's error shape, as much as is checked
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
		return fmt.Errorf("status %d, body not an OpenAI error: %w", resp.StatusCode, err)
	}
	resp.Body.Close()
	if resp.StatusCode != status || e.Error.Code != code {
		return fmt.Errorf("status %d code %q, want %d %q: %s", resp.StatusCode, e.Error.Code, status, code, e.Error.Message)
	}
	if !resp.Close {
		return fmt.Errorf("the answer keeps the connection open (Connection: %q)", resp.Header.Get("Connection"))
	}
	if rest, err := io.ReadAll(br); err != nil || len(rest) > 0 {
		return fmt.Errorf("the connection was not closed after the answer: read %q, %v", rest, err)
	}
	return nil
}
