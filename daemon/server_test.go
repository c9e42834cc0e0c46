package daemon

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestServe: serve answers on its listener until its context ends, then closes the host and
// the listener.
func TestServe(t *testing.T) {
	// Only this test's goroutines: an earlier test's daemon may still be winding down (its
	// drains and idle connections end on their own), which on a loaded machine takes longer
	// than goleak's retries and is no leak of serve's.
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "Hello, world!") })
	var hostClosed atomic.Bool
	url, stop := serveForTest(t, hello, closerFunc(func(context.Context) error { hostClosed.Store(true); return nil }))
	resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"Hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "Hello, world!" {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	http.DefaultClient.CloseIdleConnections()
	stop()
	if !hostClosed.Load() {
		t.Error("serve did not close the host")
	}
	if c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://")); err == nil {
		c.Close()
		t.Error("the listener is still open")
	}
}

// TestServeDuringGrace: while running replies have their grace, tfd still accepts connections
// and answers new requests 503 shutting_down with Retry-After, and /health says it is stopping.
func TestServeDuringGrace(t *testing.T) {
	passed := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("%s %s passed the gate while stopping", r.Method, r.URL.Path)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closing, release := make(chan struct{}), make(chan struct{})
	host := closerFunc(func(context.Context) error { // replies still running until released
		close(closing)
		<-release
		return nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- serve(ctx, ln, passed, host, func() time.Duration { return time.Minute }, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	cancel()
	<-closing
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	url := "http://" + ln.Addr().String()
	for _, tc := range []struct{ method, path, body, want string }{
		{"POST", "/v1/completions", `{"prompt":"Hi"}`, `"code":"shutting_down"`},
		{"GET", "/v1/models", "", `"code":"shutting_down"`},
		{"GET", "/health", "", `{"status":"stopping"}`},
	} {
		req, _ := http.NewRequest(tc.method, url+tc.path, strings.NewReader(tc.body))
		resp, err := client.Do(req)
		if err != nil {
			t.Errorf("%s %s during the grace: %v", tc.method, tc.path, err)
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(body), tc.want) {
			t.Errorf("%s %s during the grace: %d, Retry-After %q: %s", tc.method, tc.path, resp.StatusCode, resp.Header.Get("Retry-After"), body)
		}
	}
	close(release)
	if err := <-served; err != nil {
		t.Fatalf("serve: %v", err)
	}
	if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		c.Close()
		t.Error("the listener is still open after the shutdown")
	}
}

// serveForTest serves h with serve on a free loopback port, with host (nil: one that has
// nothing to close) and a grace of a second. stop ends serve and waits for it (and so for every
// handler).
func serveForTest(t *testing.T, h http.Handler, host closer) (url string, stop func()) {
	t.Helper()
	if host == nil {
		host = closerFunc(func(context.Context) error { return nil })
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- serve(ctx, ln, h, host, func() time.Duration { return time.Second }, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-served; err != nil {
				t.Errorf("serve: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return "http://" + ln.Addr().String(), stop
}
