package api

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"tfd/daemon/config"
)

// TestStallTimeout streams replies to clients that read at different paces: one that stops
// reading has its reply cancelled (and its stream ended at the host) exactly stall_timeout after
// the write it never took, with one log line naming the response; one that reads slowly but
// within the bound, or any client when the bound is off, gets its whole reply.
func TestStallTimeout(t *testing.T) {
	const never = -1
	tests := []struct {
		name      string
		stall     time.Duration
		takeAfter func(i int) time.Duration
		cancelled bool
		took      time.Duration // from the request to the handler's return
	}{
		{"stops reading", time.Minute, func(i int) time.Duration { return map[bool]time.Duration{true: 0, false: never}[i < 2] },
			true, time.Minute},
		{"reads slowly within the bound", time.Minute, func(int) time.Duration { return 59 * time.Second },
			false, 7 * 59 * time.Second}, // role chunk, 4 tokens, final chunk, [DONE]
		{"a short bound", 5 * time.Second, func(i int) time.Duration { return map[bool]time.Duration{true: 0, false: 6 * time.Second}[i < 3] },
			true, 5 * time.Second},
		{"no bound", 0, func(i int) time.Duration { return map[bool]time.Duration{true: 0, false: 2 * time.Hour}[i < 2] },
			false, 5 * 2 * time.Hour},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var log strings.Builder
				env := newTestEnv(t, func(_ *ServedModel, o *HandlerOptions) {
					o.StallTimeout = tc.stall
					o.Logger = slog.New(slog.NewTextHandler(&log, nil))
				})
				client := &slowClient{takeAfter: tc.takeAfter}
				r := httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader(`{"messages":[{"role":"user","content":"Hi"}],"stream":true}`))
				start := time.Now()
				env.h.ServeHTTP(client, r)
				if took := time.Since(start); took != tc.took {
					t.Errorf("the handler returned after %s, want %s", took, tc.took)
				}
				stalled := strings.Contains(log.String(), `level=WARN msg="client stalled: reply cancelled" id=chatcmpl-`)
				env.host.mu.Lock()
				cancels := env.host.cancels
				env.host.mu.Unlock()
				if tc.cancelled {
					if !stalled || !strings.Contains(log.String(), "stalled_for="+seconds(tc.stall)) || cancels != 1 {
						t.Errorf("the stalled reply was not cancelled (host cancels %d), or not logged so:\n%s", cancels, &log)
					}
					return
				}
				if stalled || cancels != 0 || !strings.HasSuffix(client.String(), "data: [DONE]\n\n") {
					t.Errorf("a reply to a reading client was cut (host cancels %d):\n%s\n%s", cancels, client, &log)
				}
			})
		})
	}
}

// TestStallTimeoutReload: the stall timeout is routing: SetRouting (a reload) changes it for
// the next requests.
func TestStallTimeoutReload(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		env := newTestEnv(t, func(_ *ServedModel, o *HandlerOptions) { o.StallTimeout = time.Minute })
		rt := *env.h.routing.Load()
		rt.StallTimeout = 10 * time.Second
		env.h.SetRouting(rt)
		client := &slowClient{takeAfter: func(i int) time.Duration { return map[bool]time.Duration{true: 0, false: -1}[i < 1] }}
		start := time.Now()
		env.h.ServeHTTP(client, httptest.NewRequest("POST", "/v1/completions", strings.NewReader(`{"prompt":"Hi","stream":true}`)))
		if took := time.Since(start); took != 10*time.Second {
			t.Errorf("cancelled after %s, want the new 10s", took)
		}
	})
}

var _ http.ResponseWriter = (*slowClient)(nil)

// TestStalledClientOverTCP is the stall over a real connection: a client with a small receive
// buffer asks for a long stream and reads nothing. Once the kernel's buffers are full the
// server's write blocks, and stall_timeout later the stream is cancelled at the host.
func TestStalledClientOverTCP(t *testing.T) {
	var log strings.Builder // read once the server has stopped
	env := newTestEnv(t, func(m *ServedModel, o *HandlerOptions) {
		m.Context = 1 << 24
		o.StallTimeout = 200 * time.Millisecond
		o.Logger = slog.New(slog.NewTextHandler(&log, nil))
	})
	env.host.repeat = true
	env.host.cancelled = make(chan struct{})
	srv := httptest.NewServer(env.h)
	defer srv.Close()
	dialer := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var err error
		c.Control(func(fd uintptr) { err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return err
	}}
	conn, err := dialer.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"prompt":"Hi","stream":true,"max_tokens":8000000}`
	fmt.Fprintf(conn, "POST /v1/completions HTTP/1.1\r\nHost: tfd\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	select {
	case <-env.host.cancelled:
	case <-time.After(20 * time.Second):
		conn.Close()
		srv.Close()
		t.Fatalf("the stream of a client that reads nothing was not cancelled\n%s", &log)
	}
	srv.Close() // waits for the handler, which logs after the cancel
	if !strings.Contains(log.String(), `msg="client stalled: reply cancelled" id=cmpl-`) {
		t.Errorf("no log line for the stall:\n%s", &log)
	}
}

// TestWholeAnswerWriteBound: a whole answer, reply or error, must be taken within the stall
// timeout (DefaultStallTimeout when it is off) from when its header goes out; a client that
// takes nothing is dropped then.
func TestWholeAnswerWriteBound(t *testing.T) {
	for _, tc := range []struct {
		name, path, body string
		stall, bound     time.Duration
	}{
		{"reply", "/v1/chat/completions", `{"messages":[{"role":"user","content":"Hi"}]}`, 10 * time.Second, 10 * time.Second},
		{"reply, stall timeout off", "/v1/completions", `{"prompt":"Hi"}`, 0, config.DefaultStallTimeout},
		{"error", "/v1/completions", `{"prompt":""}`, 10 * time.Second, 10 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				env := newTestEnv(t, func(_ *ServedModel, o *HandlerOptions) { o.StallTimeout = tc.stall })
				client := &slowClient{takeAfter: func(int) time.Duration { return -1 }}
				start := time.Now()
				env.h.ServeHTTP(client, httptest.NewRequest("POST", tc.path, strings.NewReader(tc.body)))
				if len(client.deadlines) != 1 || client.deadlines[0] != tc.bound {
					t.Errorf("write deadlines %v at the writes, want one of %s", client.deadlines, tc.bound)
				}
				if took := time.Since(start); took != tc.bound {
					t.Errorf("the handler returned after %s, want %s", took, tc.bound)
				}
			})
		})
	}
}
