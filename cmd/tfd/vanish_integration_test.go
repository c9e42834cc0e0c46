package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestClientsThatVanish streams 24 completions at once from a real tfd serve with 8 sessions,
// and half the clients hang up after their second chunk. Every client that stays gets a whole
// reply; afterwards no session is held and nothing waits, and the server answers the next
// request as if nothing had happened.
func TestClientsThatVanish(t *testing.T) {
	if testing.Short() {
		t.Skip("builds tfd and serves the bundled model; skipped with -short")
	}
	srv := startServer(t, "[sessions]\nparallel = 8\n")
	base := "http://" + srv.addr
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var wg sync.WaitGroup
	errs := make(chan error, 24)
	for i := range 24 {
		wg.Go(func() {
			vanish := i%2 == 1
			body := fmt.Sprintf(`{"prompt":"func f%d() {","max_tokens":48,"stream":true,"seed":%d}`, i, i)
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/completions", strings.NewReader(body))
			if err != nil {
				errs <- err
				return
			}
			reqCtx, hangUp := context.WithCancel(ctx)
			defer hangUp()
			resp, err := http.DefaultClient.Do(req.WithContext(reqCtx))
			if err != nil {
				errs <- fmt.Errorf("request %d: %v", i, err)
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b, _ := io.ReadAll(resp.Body)
				errs <- fmt.Errorf("request %d: status %d: %s", i, resp.StatusCode, b)
				return
			}
			lines := bufio.NewScanner(resp.Body)
			chunks, done := 0, false
			for lines.Scan() {
				line := lines.Text()
				if !strings.HasPrefix(line, "data: ") {
					continue
				}
				if line == "data: [DONE]" {
					done = true
					break
				}
				if chunks++; vanish && chunks == 2 {
					hangUp() // the client goes away mid-reply
					return
				}
			}
			if !done {
				errs <- fmt.Errorf("request %d: the stream ended without [DONE] after %d chunks", i, chunks)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	// Sessions come free by the next round; give the server a moment, then look.
	var host struct {
		Host struct {
			SessionsInUse int `json:"sessions_in_use"`
			Active        int `json:"active"`
			Waiting       int `json:"waiting"`
		} `json:"host"`
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get(base + "/v1/tfd/status")
		if err != nil {
			t.Fatal(err)
		}
		err = json.NewDecoder(resp.Body).Decode(&host)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if host.Host.SessionsInUse == 0 && host.Host.Active == 0 && host.Host.Waiting == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("10 s after the clients left: %+v", host.Host)
		}
	}
	resp, err := http.Post(base+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"package main","max_tokens":4}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the next request: status %d", resp.StatusCode)
	}
	srv.stop(t)
}
