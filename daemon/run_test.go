package daemon

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	_ "tfd/cpu" // the bundled model runs on the CPU backend
	"tfd/daemon/config"
	"tfd/daemon/metrics"
	"tfd/daemon/status"
	"tfd/scheduler/schedulertest"
)

// daemonUnderTest is an in-process Run serving the bundled model on the CPU.
type daemonUnderTest struct {
	url    string
	dir    string // the config's folder
	cancel context.CancelFunc
	done   chan error
	log    *lockedBuffer
}

// startDaemon writes configText to a folder of its own and runs the daemon on it.
func startDaemon(t *testing.T, configText string) *daemonUnderTest {
	t.Helper()
	return startDaemonWith(t, configText, RunOptions{})
}

// startDaemonWith is startDaemon with RunOptions' test hooks set as in opts.
func startDaemonWith(t *testing.T, configText string, opts RunOptions) *daemonUnderTest {
	t.Helper()
	d := &daemonUnderTest{dir: t.TempDir(), done: make(chan error, 1), log: &lockedBuffer{}}
	file := filepath.Join(d.dir, "tfd.toml")
	writeText(t, file, configText)
	src := config.Sources{File: file, FileRequired: true, Flags: []config.Flag{{Name: "--listen", Key: "server.listen", Value: "127.0.0.1:0"}}}
	eff, err := config.Load(src)
	if err != nil {
		t.Fatal(err)
	}
	logger, level := NewLeveledLogger(d.log)
	ready := make(chan net.Addr, 1)
	ctx, cancel := context.WithCancel(context.Background())
	d.cancel = cancel
	go func() {
		opts.Sources, opts.Logger, opts.Level, opts.Debounce = src, logger, level, 50*time.Millisecond
		opts.Ready = func(a net.Addr) { ready <- a }
		d.done <- Run(ctx, eff, opts)
	}()
	// Stopped at the end whatever happens below, so that a daemon slow to start does not run on
	// into the next tests (whose leak checks would see it).
	t.Cleanup(func() { d.stop(t) })
	select {
	case a := <-ready:
		d.url = "http://" + a.String()
	case err := <-d.done:
		d.cancel() // Run has returned: nothing for stop to wait for
		d.cancel = nil
		t.Fatalf("Run: %v\n%s", err, d.log)
	case <-time.After(waitBound):
		t.Fatalf("not serving after %v\n%s", waitBound, d.log)
	}
	return d
}

// stop ends Run and expects a clean return.
func (d *daemonUnderTest) stop(t *testing.T) {
	t.Helper()
	if d.cancel == nil {
		return
	}
	d.cancel()
	d.cancel = nil
	select {
	case err := <-d.done:
		if err != nil {
			t.Errorf("Run returned %v\n%s", err, d.log)
		}
	case <-time.After(waitBound):
		t.Fatalf("Run still running %v after its context ended\n%s", waitBound, d.log)
	}
}

func (d *daemonUnderTest) status(t *testing.T) status.Report {
	t.Helper()
	rep, err := fetchStatus(http.DefaultClient, strings.TrimPrefix(d.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// fetchStatus asks the daemon listening on addr for its status report, without a key.
func fetchStatus(client *http.Client, addr string) (status.Report, error) {
	resp, err := client.Get("http://" + addr + status.Path)
	if err != nil {
		return status.Report{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return status.Report{}, fmt.Errorf("%s answered %s", status.Path, resp.Status)
	}
	var rep status.Report
	err = json.NewDecoder(resp.Body).Decode(&rep)
	return rep, err
}

// waitGeneration waits until the daemon has applied config generation gen and, when sessions
// is not 0, the host has taken the new layout (it does at its next turn; running replies finish in
// their sessions of the old one). The bound is generous: a reload that loads the model again
// takes seconds under the race detector on a small machine, and only a hang should fail here.
func (d *daemonUnderTest) waitGeneration(t *testing.T, gen, sessions int) status.Report {
	t.Helper()
	deadline := time.Now().Add(waitBound)
	for {
		rep := d.status(t)
		if rep.Config.Generation >= gen && (sessions == 0 || rep.Host.Sessions == sessions) {
			return rep
		}
		if time.Now().After(deadline) {
			t.Fatalf("config generation %d with %d sessions, want %d with %d\n%s", rep.Config.Generation, rep.Host.Sessions, gen, sessions, d.log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// streamed is what a streamed completion delivered.
type streamed struct {
	status int
	text   string
	finish string
	hash   string
	err    string // an error event's message
	done   bool   // data: [DONE] arrived
}

// stream sends a streamed completion and reads it to the end.
func stream(ctx context.Context, url, body string) (streamed, error) {
	return streamNotify(ctx, url, body, nil)
}

// streamNotify is stream that closes first, if not nil, when the first text arrives.
func streamNotify(ctx context.Context, url, body string, first chan struct{}) (streamed, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/completions", strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return streamed{}, err
	}
	defer resp.Body.Close()
	s := streamed{status: resp.StatusCode}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			s.done = true
			continue
		}
		var ev struct {
			Choices []struct {
				Text         string  `json:"text"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			TFD *struct {
				TokensHash string `json:"tokens_hash"`
			} `json:"tfd"`
			Error *struct{ Message string } `json:"error"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			return s, fmt.Errorf("bad event %q: %w", data, err)
		}
		for _, c := range ev.Choices {
			s.text += c.Text
			if first != nil && s.text != "" {
				close(first)
				first = nil
			}
			if c.FinishReason != nil {
				s.finish = *c.FinishReason
			}
		}
		if ev.TFD != nil {
			s.hash = ev.TFD.TokensHash
		}
		if ev.Error != nil {
			s.err = ev.Error.Message
		}
	}
	return s, sc.Err()
}

// TestReload edits the config while replies stream, in each way editors write files, and checks
// that no request fails, each edit reaches the next requests, and an invalid edit changes nothing.
func TestReload(t *testing.T) {
	// Rounds timed on a still clock: every instance grants the drafts proposed, so the drafts
	// counted at the end do not wait on how busy the machine is (on a loaded one, pricing by real
	// timings granted none in 37 replies).
	d := startDaemonWith(t, "[sessions]\nparallel = 2\n", RunOptions{Clock: schedulertest.StillClock()})
	file := filepath.Join(d.dir, "tfd.toml")
	if rep := d.status(t); rep.Host.Sessions != 2 || rep.Config.Generation != 1 {
		t.Fatalf("start: %+v", rep.Host)
	}
	traffic := startTraffic(t, d.url)

	// In place: greedy sampling by default; two requests without a seed give the same reply.
	editInPlace(t, file, "[sessions]\nparallel = 2\n[sampling]\ntemperature = 0\n")
	d.waitGeneration(t, 2, 0)
	first, _ := stream(context.Background(), d.url, `{"prompt":"func main() {","max_tokens":12,"stream":true}`)
	second, _ := stream(context.Background(), d.url, `{"prompt":"func main() {","max_tokens":12,"stream":true}`)
	if first.hash == "" || first.hash != second.hash {
		t.Errorf("with sampling.temperature = 0 two requests differ: %+v, %+v", first, second)
	}

	// A new file renamed over the old one (vim, most editors): four sessions.
	tmp := filepath.Join(d.dir, ".tfd.toml.swp")
	writeText(t, tmp, "[sessions]\nparallel = 4\n[sampling]\ntemperature = 0\n")
	must(t, os.Rename(tmp, file))
	d.waitGeneration(t, 3, 4)

	// An invalid edit is refused; the old config keeps serving.
	writeText(t, file, "[sessions]\nparallel = \"many\"\n")
	waitLog(t, d, `outcome=invalid`)
	if rep := d.status(t); rep.Config.Generation != 3 || rep.Host.Sessions != 4 || rep.Config.LastReload.Outcome != metrics.ReloadInvalid {
		t.Errorf("after an invalid edit: generation %d, %+v, %+v", rep.Config.Generation, rep.Host, rep.Config.LastReload)
	}

	// A symlink swapped to point at another file (a config managed elsewhere): three sessions,
	// then an edit of the link's target in place: a new context, so the model loads again.
	other := filepath.Join(d.dir, "managed.toml")
	writeText(t, other, "[sessions]\nparallel = 3\n")
	link := filepath.Join(d.dir, "tfd.toml.new")
	must(t, os.Symlink("managed.toml", link))
	must(t, os.Rename(link, file))
	d.waitGeneration(t, 4, 3)
	editInPlace(t, other, "[model]\ncontext = 1024\n[sessions]\nparallel = 3\n")
	rep := d.waitGeneration(t, 5, 3)
	if rep.Plan.Context != 1024 || rep.Host.Layout != "1024x3" || rep.Plan.KVCache != "f32" {
		t.Errorf("after the context edit: %+v, context %d, keys and values %q", rep.Host, rep.Plan.Context, rep.Plan.KVCache)
	}
	// F16 keys and values: the model loads again, its sessions in half the memory.
	editInPlace(t, other, "[model]\ncontext = 1024\n[sessions]\nparallel = 3\nkv_cache = \"f16\"\n")
	if half := d.waitGeneration(t, 6, 3); half.Plan.KVCache != "f16" || 2*half.Plan.SessionsBytes != rep.Plan.SessionsBytes {
		t.Errorf("after kv_cache = \"f16\": keys and values %q, sessions %d bytes, against %d in F32", half.Plan.KVCache, half.Plan.SessionsBytes, rep.Plan.SessionsBytes)
	}

	n := traffic.stop(t)
	if n < 4 {
		t.Errorf("only %d requests streamed during the edits", n)
	}
	metrics := get(t, d.url+"/metrics")
	for _, want := range []string{`tfd_config_reloads_total{outcome="applied"} 5`, `tfd_config_reloads_total{outcome="invalid"} 1`,
		`tfd_requests_total{outcome="error"} 0`, "tfd_memory_plan_context_tokens 1024", "tfd_time_to_first_token_seconds_count"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	// The counts are the serving instance's: the kv_cache edit above loaded a new one.
	for _, want := range []string{`tfd_tokens_total{driver="lone"} `, `tfd_tokens_total{driver="shared"} `, "tfd_handoffs_total "} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	// Draft tokens are counted by the serving instance too, which may not have served a reply
	// yet when the last edit is reported applied: replies follow until one has drafted, which
	// the still clock makes the first that can.
	drafted := regexp.MustCompile(`(?m)^tfd_draft_tokens_total\{depth="1",outcome="proposed",source="(mtp|ngram)"\} [1-9]`)
	for i := 0; !drafted.MatchString(metrics); i++ {
		if i == 20 {
			t.Fatalf("no draft tokens counted after %d replies with drafts on:\n%s", n+i, metrics)
		}
		if s, err := stream(context.Background(), d.url, `{"prompt":"package main\n","max_tokens":16,"stream":true}`); err != nil || !s.done {
			t.Fatalf("a reply after the edits: %+v %v", s, err)
		}
		metrics = get(t, d.url+"/metrics")
	}
}

// traffic streams completions one after another until stopped, recording any failure.
type traffic struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex // guards fails and n
	fails  []string
	n      int
}

func startTraffic(t *testing.T, url string) *traffic {
	ctx, cancel := context.WithCancel(context.Background())
	tr := &traffic{cancel: cancel}
	for range 2 {
		tr.wg.Go(func() {
			for i := 0; i < 500 && ctx.Err() == nil; i++ {
				s, err := stream(context.Background(), url, `{"prompt":"package main\n","max_tokens":16,"stream":true}`)
				tr.mu.Lock()
				tr.n++
				if err != nil || s.status != http.StatusOK || !s.done || s.err != "" || s.finish == "" {
					tr.fails = append(tr.fails, fmt.Sprintf("%+v %v", s, err))
				}
				tr.mu.Unlock()
			}
		})
	}
	return tr
}

// stop ends the traffic, fails the test for any failed request, and returns how many ran.
func (tr *traffic) stop(t *testing.T) int {
	tr.cancel()
	tr.wg.Wait()
	for _, f := range tr.fails {
		t.Errorf("a request failed during the reloads: %s", f)
	}
	return tr.n
}

// TestStopLetsRepliesFinish stops the daemon while a short reply streams: the reply ends normally.
func TestStopLetsRepliesFinish(t *testing.T) {
	d := startDaemon(t, "[server]\nshutdown_timeout = \"20s\"\n[sessions]\nparallel = 1\n")
	got, first := make(chan streamed, 1), make(chan struct{})
	go func() {
		s, _ := streamNotify(context.Background(), d.url, `{"prompt":"package main\n","max_tokens":200,"temperature":0,"stream":true}`, first)
		got <- s
	}()
	<-first
	d.stop(t)
	s := <-got
	if s.status != http.StatusOK || !s.done || s.err != "" || (s.finish != "length" && s.finish != "stop") {
		t.Errorf("the reply did not end normally: %+v", s)
	}
}

// TestStopCancelsAfterGrace stops the daemon while a long reply streams: after the grace the
// reply gets an error event and [DONE], not a dropped connection.
func TestStopCancelsAfterGrace(t *testing.T) {
	d := startDaemon(t, "[server]\nshutdown_timeout = \"100ms\"\n[sessions]\nparallel = 1\n")
	got, first := make(chan streamed, 1), make(chan struct{})
	go func() {
		s, _ := streamNotify(context.Background(), d.url, `{"prompt":"package main\n","max_tokens":2000,"temperature":0,"stream":true}`, first)
		got <- s
	}()
	<-first
	d.stop(t)
	s := <-got
	if s.status != http.StatusOK || !s.done || !strings.Contains(s.err, "shutting down") {
		t.Errorf("the cancelled reply did not end with an error event and [DONE]: %+v", s)
	}
}

// waitBound is how long a test waits for the daemon to do what it was asked before calling it a
// hang. It is generous: a reload that loads the model again (four sessions where two were loaded,
// a new context) loads and prices it beside running traffic, which under -race on a busy
// two-core machine took over a minute.
const waitBound = 3 * time.Minute

// waitLog waits until the daemon's log holds text.
func waitLog(t *testing.T, d *daemonUnderTest, text string) {
	t.Helper()
	deadline := time.Now().Add(waitBound)
	for !strings.Contains(d.log.String(), text) {
		if time.Now().After(deadline) {
			t.Fatalf("the log never said %q\n%s", text, d.log)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// writeText puts text in the file at path whole: it writes a file beside it and renames it over
// path, so the daemon's watch never reads it half written. (os.WriteFile truncates first and
// writes after; under load the two can fall further apart than the 50 ms debounce, and a reload
// then read an empty config or keys file.)
func writeText(t *testing.T, path, text string) {
	t.Helper()
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	must(t, err)
	_, err = f.WriteString(text)
	must(t, errors.Join(err, f.Chmod(0o644), f.Close()))
	must(t, os.Rename(f.Name(), path))
}

// editInPlace writes text over the start of the existing file at path in one write, as an editor
// that saves in place does, without a truncation: text must be at least as long as what the file
// holds, so the file goes from its old text to text in one step that a reload sees whole.
func editInPlace(t *testing.T, path, text string) {
	t.Helper()
	info, err := os.Stat(path)
	must(t, err)
	if info.Size() > int64(len(text)) {
		t.Fatalf("editInPlace: %d bytes over a file of %d would leave its tail", len(text), info.Size())
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	must(t, err)
	_, err = f.WriteAt([]byte(text), 0)
	must(t, errors.Join(err, f.Close()))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// lockedBuffer is a log the daemon writes while the test reads.
type lockedBuffer struct {
	mu sync.Mutex // guards b
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestReloadSwitchAfterDrain changes the context under a load limit that leaves no room for a
// second copy of the model: the old one finishes its replies and is freed before the new one
// loads, and requests that arrive meanwhile wait and then succeed. A new model.name serves the
// same model under a new id.
func TestReloadSwitchAfterDrain(t *testing.T) {
	const limits = "[memory]\nload_limit_gb = 0.09\nmargin_gb = 0\n[sessions]\nparallel = 1\n"
	d := startDaemon(t, limits+"[model]\ncontext = 1024\n")
	file := filepath.Join(d.dir, "tfd.toml")
	traffic := startTraffic(t, d.url)
	writeText(t, file, limits+"[model]\ncontext = 512\n")
	if rep := d.waitGeneration(t, 2, 0); rep.Plan.Context != 512 {
		t.Errorf("context %d after the reload", rep.Plan.Context)
	}
	waitLog(t, d, "loaded after the previous one drained")
	writeText(t, file, limits+"[model]\ncontext = 512\nname = \"gopher-512\"\n")
	d.waitGeneration(t, 3, 0)
	if models := get(t, d.url+"/v1/models"); !strings.Contains(models, `"id":"gopher-512"`) {
		t.Errorf("/v1/models after the rename: %s", models)
	}
	if n := traffic.stop(t); n < 2 {
		t.Errorf("only %d requests streamed during the switch", n)
	}
}

// TestLoadProgress: a long load logs where it is, a line every two seconds at most.
func TestLoadProgress(t *testing.T) {
	var buf bytes.Buffer
	progress := loadProgress(slog.New(slog.NewTextHandler(&buf, nil)), time.Now().Add(-3*time.Second))
	progress("weights", 3, 8) // 3 s in: a line
	progress("weights", 4, 8) // at once after it: none
	progress("weights", 8, 8) // done: the "model loaded" line says so
	if lines := strings.Count(buf.String(), "\n"); lines != 1 || !strings.Contains(buf.String(), "done=3/8") {
		t.Fatalf("logged %d lines:\n%s", lines, buf.String())
	}
}

// TestStopDuringLoad: a stop asked for while the model loads (SIGTERM from the service manager
// at boot) ends Run cleanly, with one log line, so tfd exits 0 and the stop is not a failure.
func TestStopDuringLoad(t *testing.T) {
	src := config.Sources{Flags: []config.Flag{{Name: "--listen", Key: "server.listen", Value: "127.0.0.1:0"}}}
	eff, err := config.Load(src)
	if err != nil {
		t.Fatal(err)
	}
	log := &lockedBuffer{}
	logger, level := NewLeveledLogger(log)
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the engine sees it during the load, as it would a SIGTERM then
	err = Run(ctx, eff, RunOptions{Sources: src, Logger: logger, Level: level,
		Ready: func(net.Addr) { t.Error("Run served after a stop during the load") }})
	if err != nil {
		t.Fatalf("Run = %v, want nil after a stop during the load\n%s", err, log)
	}
	if n := strings.Count(log.String(), "stopped during the model load"); n != 1 {
		t.Errorf("the log says it %d times:\n%s", n, log)
	}
}

// TestKeysFileWatched: the API keys file is watched as the config is. A key taken out of it
// stops working at once; a file without keys is refused and the keys in force stay; a config
// edit that names another keys file moves the watch to it.
func TestKeysFileWatched(t *testing.T) {
	keys := filepath.Join(t.TempDir(), "keys") // a folder apart from the config's
	writeText(t, keys, "sk-a\nsk-b\n")
	d := startDaemon(t, "[server]\napi_keys_file = \""+keys+"\"\n")
	d.expectKey(t, "sk-b", http.StatusOK)

	writeText(t, keys, "# sk-b revoked\nsk-a\n")
	d.expectKey(t, "sk-b", http.StatusUnauthorized)
	d.expectKey(t, "sk-a", http.StatusOK)
	waitLog(t, d, "changed=\"server.api_keys_file 2 keys → 1 key (the file was edited)\"")

	writeText(t, keys, "# no keys: refused, sk-a stays\n")
	waitLog(t, d, "holds no keys")
	d.expectKey(t, "sk-a", http.StatusOK)

	other := filepath.Join(t.TempDir(), "keys")
	writeText(t, other, "sk-c\n")
	writeText(t, filepath.Join(d.dir, "tfd.toml"), "[server]\napi_keys_file = \""+other+"\"\n")
	d.expectKey(t, "sk-c", http.StatusOK)
	d.expectKey(t, "sk-a", http.StatusUnauthorized)
	writeText(t, other, "sk-d\n")
	d.expectKey(t, "sk-c", http.StatusUnauthorized)
	d.expectKey(t, "sk-d", http.StatusOK)
}

// expectKey polls GET /v1/models with key until it answers want, for waitBound at most: the
// watch applies an edit within its debounce (50 ms here) and a reload, which a loaded machine
// under the race detector can stretch to seconds.
func (d *daemonUnderTest) expectKey(t *testing.T, key string, want int) {
	t.Helper()
	deadline := time.Now().Add(waitBound)
	for {
		req, _ := http.NewRequest(http.MethodGet, d.url+"/v1/models", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /v1/models with %s answers %d, want %d\n%s", key, resp.StatusCode, want, d.log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestPricedAtLoad: the daemon times forwards of 1 to MaxRows rows and the bundled model's MTP
// head as it loads, and logs them on one line.
func TestPricedAtLoad(t *testing.T) {
	d := startDaemon(t, "[sessions]\nparallel = 1\n")
	line := regexp.MustCompile(fmt.Sprintf(`msg="priced rounds" rows=1:[0-9.]+[µm]?s,2:\S+,4:\S+.*,%d:[0-9.]+[µm]?s mtp=[0-9.]+[µm]?s`, MaxRows))
	if !line.MatchString(d.log.String()) {
		t.Errorf("no priced rounds line in the log:\n%s", d.log)
	}
}
