package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// server is a running `tfd serve`.
type server struct {
	addr   string
	cmd    *exec.Cmd
	exited chan error
	log    *syncBuffer
}

// TestMain removes the binary buildOnce built, after every test has run.
func TestMain(m *testing.M) {
	code := m.Run()
	if bin, err := buildOnce(); err == nil {
		os.RemoveAll(filepath.Dir(bin))
	}
	os.Exit(code)
}

// buildOnce builds tfd once for all the tests of the package; it returns the binary's path.
var buildOnce = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "tfd-test-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "tfd")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

// startServer builds tfd and starts `tfd serve` on a free port with config as its config file,
// the flags extra and no TFD_* variables, then waits for /health.
func startServer(t *testing.T, configText string, extra ...string) *server {
	t.Helper()
	bin, err := buildOnce()
	if err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(t.TempDir(), "tfd.toml")
	if err := os.WriteFile(config, []byte(configText), 0o644); err != nil {
		t.Fatal(err)
	}
	s := &server{addr: freeAddr(t), exited: make(chan error, 1), log: &syncBuffer{}}
	s.cmd = exec.Command(bin, append([]string{"serve", "--config", config, "--listen", s.addr}, extra...)...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TFD_") {
			s.cmd.Env = append(s.cmd.Env, kv)
		}
	}
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.exited <- s.cmd.Wait() }()
	t.Cleanup(func() { s.cmd.Process.Kill() }) // harmless once it has exited
	deadline := time.Now().Add(2 * time.Minute)
	for {
		select {
		case err := <-s.exited:
			t.Fatalf("tfd serve exited before it was healthy: %v\n%s", err, s.log)
		case <-time.After(100 * time.Millisecond):
		}
		if resp, err := http.Get("http://" + s.addr + "/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("tfd serve not healthy after 2 minutes\n%s", s.log)
		}
	}
}

// stop sends SIGINT and expects a clean exit.
func (s *server) stop(t *testing.T) { s.signal(t, os.Interrupt) }

// signal sends sig and expects the process to exit 0.
func (s *server) signal(t *testing.T, sig os.Signal) {
	t.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-s.exited:
		if err != nil {
			t.Errorf("tfd serve exited with %v after %v\n%s", err, sig, s.log)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("tfd serve still running 30 s after %v\n%s", sig, s.log)
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// syncBuffer collects the server's output from its copying goroutine while tests read it.
type syncBuffer struct {
	mu  sync.Mutex // guards buf
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestSIGTERMDuringStream stops tfd with SIGTERM, as launchd and systemd do, while a reply
// streams: the client gets a proper end of its stream and the process exits 0.
func TestSIGTERMDuringStream(t *testing.T) {
	if testing.Short() {
		t.Skip("builds tfd and serves the bundled model; skipped with -short")
	}
	srv := startServer(t, "[server]\nshutdown_timeout = \"200ms\"\n[sessions]\nparallel = 2\n")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	body := `{"model":"gopher","prompt":"package main\n","temperature":0,"max_tokens":2000,"stream":true}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+srv.addr+"/v1/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var events []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if events = append(events, data); len(events) == 1 {
			if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The stream ends with tfd's error event (shutting down) and [DONE], or with its finish
	// reason if it completed within the grace: either way an API answer, not a broken connection.
	n := len(events)
	if err := sc.Err(); err != nil || n < 2 || events[n-1] != "[DONE]" ||
		!strings.Contains(events[n-2], `"code":"shutting_down"`) && !strings.Contains(events[n-2], `"finish_reason":"length"`) {
		t.Errorf("the stream did not end properly after %d events (%v): last %q\n%s", n, err, events[max(0, n-2):], srv.log)
	}
	select {
	case err := <-srv.exited:
		if err != nil {
			t.Errorf("tfd serve exited with %v after SIGTERM\n%s", err, srv.log)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("tfd serve still running 30 s after SIGTERM\n%s", srv.log)
	}
}
