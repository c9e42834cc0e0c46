package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// soakClient is one kind of client in the soak: what it sends and what it must get back.
type soakClient int

const (
	wellBehaved   soakClient = iota // reads its whole reply, streamed or not
	vanishing                       // hangs up after the first few events of a streamed reply
	stallingRead                    // asks for a long streamed reply and stops reading it
	stallingWrite                   // sends part of its body and then nothing
)

// kindOf spreads the kinds over the soak's requests: a quarter vanish, one in 50 stalls as a
// reader and one in 50 mid-body, the rest behave.
func kindOf(i int) soakClient {
	switch {
	case i%50 == 7:
		return stallingRead
	case i%50 == 23:
		return stallingWrite
	case i%4 == 1:
		return vanishing
	}
	return wellBehaved
}

// TestSoak runs 300 requests at concurrency 32 against a real listening daemon serving the
// bundled model, while a quarter of the clients vanish mid-reply, a few stop reading and a few
// stop sending their body. Every well-behaved request must get its whole reply with exactly one
// terminal event, every stalled one must be let go within its deadline, and afterwards no
// session, goroutine or file descriptor may be left over.
func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("the soak takes tens of seconds; it runs without -short (make test)")
	}
	const (
		requests    = 300
		concurrency = 32
		stall       = time.Second // server.stall_timeout
		bodyTimeout = time.Second
	)
	d := startDaemonWith(t, fmt.Sprintf("[server]\nstall_timeout = %q\n[model]\ncontext = 2048\n[sessions]\nlayout = \"2048x2,512x8\"\ngrow = 64\nqueue = 512\n", stall),
		RunOptions{BodyTimeout: bodyTimeout})
	addr := strings.TrimPrefix(d.url, "http://")
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: concurrency}}
	if err := soakWellBehaved(client, d.url, 0); err != nil { // warm up before counting
		t.Fatal(err)
	}
	client.CloseIdleConnections()
	goroutines, fds := settledGoroutines(0), openFiles(t)

	start := time.Now()
	jobs := make(chan int)
	var mu sync.Mutex // guards failures and counts
	var failures []string
	counts := map[soakClient]int{}
	var wg sync.WaitGroup
	for range concurrency {
		wg.Go(func() {
			for i := range jobs {
				kind := kindOf(i)
				var err error
				switch kind {
				case wellBehaved:
					err = soakWellBehaved(client, d.url, i)
				case vanishing:
					err = soakVanishing(client, d.url, i)
				case stallingRead:
					err = soakStallingReader(addr, d.log)
				case stallingWrite:
					err = soakStallingBody(addr, bodyTimeout)
				}
				mu.Lock()
				counts[kind]++
				if err != nil {
					failures = append(failures, fmt.Sprintf("request %d (kind %d): %v", i, kind, err))
				}
				mu.Unlock()
			}
		})
	}
	for i := range requests {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	t.Logf("%d requests (%v by kind) in %v", requests, counts, time.Since(start).Round(time.Millisecond))
	for _, f := range failures {
		t.Error(f)
	}

	deadline := time.Now().Add(waitBound) // the closing connections' goroutines end on their own time
	for {
		rep, err := fetchStatus(client, addr)
		if err != nil {
			t.Fatal(err)
		}
		client.CloseIdleConnections() // the status request's included
		left := settledGoroutines(goroutines)
		open := openFiles(t)
		if rep.Host.SessionsInUse == 0 && rep.Host.Waiting == 0 && left <= goroutines && open <= fds {
			break
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("left over after the soak: %d sessions in use, %d waiting, %d goroutines (%d before), %d open files (%d before)\n%s",
				rep.Host.SessionsInUse, rep.Host.Waiting, left, goroutines, open, fds, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// soakPrompt varies the prompts so that the requests do not all share one session's start.
func soakPrompt(i int) string {
	return fmt.Sprintf("func f%d(x int) int {\n\treturn x * %d", i, i%7)
}

// soakWellBehaved sends a completion, streamed for odd i, and checks that the whole reply came
// with exactly one finish reason (and, streamed, exactly one [DONE] at the end).
func soakWellBehaved(client *http.Client, url string, i int) error {
	streamed := i%2 == 1
	body := fmt.Sprintf(`{"prompt":%q,"max_tokens":%d,"stream":%t}`, soakPrompt(i), 8+i%17, streamed)
	resp, err := client.Post(url+"/v1/completions", "application/json", strings.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("read the reply: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %s: %s", resp.Status, data)
	}
	if !streamed {
		var r struct {
			Choices []struct {
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(data, &r); err != nil || len(r.Choices) != 1 || r.Choices[0].FinishReason == "" {
			return fmt.Errorf("a whole reply without one finished choice (%v): %s", err, data)
		}
		return nil
	}
	finishes, dones := 0, 0
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	for _, line := range lines {
		payload, ok := strings.CutPrefix(line, "data: ")
		switch {
		case !ok:
			continue
		case payload == "[DONE]":
			dones++
			continue
		}
		var chunk struct {
			Choices []struct {
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Error *json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal([]byte(payload), &chunk); err != nil || chunk.Error != nil {
			return fmt.Errorf("a bad or failed chunk (%v): %s", err, payload)
		}
		for _, c := range chunk.Choices {
			if c.FinishReason != nil {
				finishes++
			}
		}
	}
	if finishes != 1 || dones != 1 || lines[len(lines)-1] != "data: [DONE]" {
		return fmt.Errorf("a stream with %d finish reasons and %d [DONE]s, want one of each, [DONE] last:\n%s", finishes, dones, data)
	}
	return nil
}

// soakVanishing starts a streamed reply, reads its first few events and hangs up.
func soakVanishing(client *http.Client, url string, i int) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	body := fmt.Sprintf(`{"prompt":%q,"max_tokens":200,"stream":true}`, soakPrompt(i))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/completions", strings.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %s", resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	for n := 0; n < 2+i%5 && sc.Scan(); {
		if strings.HasPrefix(sc.Text(), "data: ") {
			n++
		}
	}
	return nil // cancel hangs up
}

// smallWindow dials with a 4 KiB receive buffer, so that a reader that stops reading makes the
// server's writes block soon.
var smallWindow = net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
	var err error
	c.Control(func(fd uintptr) { err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	return err
}}

// soakStallingReader asks for a long streamed reply with 5 alternatives a token (large events,
// greedy, so its length is the same every run), reads its first 512 bytes and stops reading until
// the daemon's log says it let the reply go, as server.stall_timeout asks; then the connection
// must end.
func soakStallingReader(addr string, log *lockedBuffer) error {
	conn, err := smallWindow.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	body := `{"prompt":"package main\n\nimport (","max_tokens":1900,"temperature":0,"stream":true,"logprobs":5}`
	fmt.Fprintf(conn, "POST /v1/completions HTTP/1.1\r\nHost: tfd\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	first := make([]byte, 512)
	if _, err := io.ReadFull(conn, first); err != nil {
		return fmt.Errorf("the first 512 bytes: %w", err)
	}
	id := regexp.MustCompile(`"id":"(cmpl-[a-z0-9]+)"`).FindSubmatch(first)
	if id == nil {
		return fmt.Errorf("no response id in the first 512 bytes: %q", first)
	}
	letGo := fmt.Sprintf(`msg="client stalled: reply cancelled" id=%s`, id[1])
	for deadline := time.Now().Add(waitBound); !strings.Contains(log.String(), letGo); {
		if time.Now().After(deadline) {
			return fmt.Errorf("the reply of a client that stopped reading was not let go within %v", waitBound)
		}
		time.Sleep(20 * time.Millisecond)
	}
	conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.Copy(io.Discard, conn); err != nil {
		return fmt.Errorf("the connection did not end after the stall: %w", err)
	}
	return nil
}

// soakStallingBody sends 300 of the 1000 bytes its Content-Length promises and waits: the server
// must answer 408 and close the connection within the body timeout (and some slack).
func soakStallingBody(addr string, bodyTimeout time.Duration) error {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/completions HTTP/1.1\r\nHost: tfd\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"prompt\":\"%s", strings.Repeat("x", 289))
	conn.SetReadDeadline(time.Now().Add(bodyTimeout + 10*time.Second))
	answer, err := io.ReadAll(conn)
	if err != nil {
		return fmt.Errorf("no answer and close after a stalled body: %w (got %q)", err, answer)
	}
	if !strings.HasPrefix(string(answer), "HTTP/1.1 408 ") {
		return fmt.Errorf("a stalled body was answered %q, want 408", strings.SplitN(string(answer), "\r\n", 2)[0])
	}
	return nil
}

// settledGoroutines waits up to 5 s for the goroutine count to fall to at most want, and returns
// it; with want 0 it waits for the count to stop falling (connections closing).
func settledGoroutines(want int) int {
	n := runtime.NumGoroutine()
	for range 100 {
		if want > 0 && n <= want {
			return n
		}
		time.Sleep(50 * time.Millisecond)
		next := runtime.NumGoroutine()
		if want == 0 && next == n {
			return n
		}
		n = next
	}
	return n
}

// openFiles counts this process's open file descriptors.
func openFiles(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot count open files here: %v", err)
	}
	return len(entries)
}
