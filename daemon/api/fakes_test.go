package api

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"tfd/daemon/config"
	"tfd/engine/chattemplate"
	"tfd/scheduler"
)

// fakeTokenizer is a tiny tokenizer for the HTTP layer's tests: ids below len(pieces) are the
// listed pieces, and id 1000+b is the single byte b. Encode matches the longest piece first.
type fakeTokenizer struct{ pieces []string }

const (
	tokEOS   = 0 // "<eos>", special
	tokStart = 1 // "<|im_start|>", special
)

func newFakeTokenizer() *fakeTokenizer {
	return &fakeTokenizer{pieces: []string{"<eos>", "<|im_start|>", "Hello", ",", " world", "!", "Hel", "lo", " wo", "rld", "END", "\n"}}
}

func (t *fakeTokenizer) Encode(text string) []int32 {
	var ids []int32
	for len(text) > 0 {
		best, bestLen := int32(1000+int(text[0])), 1
		for id, p := range t.pieces {
			if len(p) > bestLen && strings.HasPrefix(text, p) {
				best, bestLen = int32(id), len(p)
			}
		}
		ids = append(ids, best)
		text = text[bestLen:]
	}
	return ids
}

func (t *fakeTokenizer) piece(id int32) string {
	if id >= 1000 {
		return string([]byte{byte(id - 1000)})
	}
	return t.pieces[id]
}

func (t *fakeTokenizer) Decode(ids []int32) string {
	var b strings.Builder
	for _, id := range ids {
		b.WriteString(t.piece(id))
	}
	return b.String()
}

func (t *fakeTokenizer) IsSpecial(id int32) bool { return id == tokEOS || id == tokStart }

func (t *fakeTokenizer) NewDecoder() Decoder { return &fakeDecoder{t: t} }

type fakeDecoder struct{ t *fakeTokenizer }

func (d *fakeDecoder) Add(id int32) string { return d.t.piece(id) }
func (d *fakeDecoder) Flush() string       { return "" }

// ids encodes pieces one id each, for scripting a host.
func (t *fakeTokenizer) ids(pieces ...string) []int32 {
	var ids []int32
	for _, p := range pieces {
		ids = append(ids, t.Encode(p)...)
	}
	return ids
}

// fakeTemplate renders ChatML-like prompts and remembers its last options.
type fakeTemplate struct {
	mu   sync.Mutex
	last chattemplate.Options
}

func (f *fakeTemplate) Render(msgs []chattemplate.Message, opts chattemplate.Options) (string, error) {
	f.mu.Lock()
	f.last = opts
	f.mu.Unlock()
	if opts.Kwargs["fail"] == true {
		return "", errors.New("Conversation roles must alternate user/assistant")
	}
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString("<|im_start|>" + m.Role + "\n" + m.Content + "\n")
	}
	if opts.AddGenerationPrompt {
		b.WriteString("<|im_start|>assistant\n")
	}
	return b.String(), nil
}

// fakeHost emits a scripted token sequence for every request. It ends with FinishLength when the
// script reaches MaxTokens, else with the EOS stop token; with block set it waits for the
// stream's context after the script instead. cancelled, when set, is closed when one stream
// sees its context end.
type fakeHost struct {
	script    []int32
	top       []scheduler.TokenLogprob // sent beside each token when the request asks for top logprobs
	repeat    bool                     // play the script again and again, up to the request's MaxTokens
	block     bool
	fail      error // ends every stream with FinishError after the script
	submitErr error

	mu        sync.Mutex
	reqs      []scheduler.Request
	closed    bool
	cancelled chan struct{} // closed when a blocked stream sees its context end
	cancels   int           // streams ended by their context before the script did
}

func (f *fakeHost) Submit(ctx context.Context, req scheduler.Request) (<-chan scheduler.Event, error) {
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	f.mu.Unlock()
	if f.submitErr != nil {
		return nil, f.submitErr
	}
	ch := make(chan scheduler.Event)
	go f.run(ctx, req, ch)
	return ch, nil
}

func (f *fakeHost) run(ctx context.Context, req scheduler.Request, ch chan<- scheduler.Event) {
	defer close(ch)
	script := f.script[:min(len(f.script), req.MaxTokens)]
	if f.repeat {
		script = slices.Repeat(f.script, req.MaxTokens/len(f.script)+1)[:req.MaxTokens]
	}
	for _, tok := range script {
		select {
		case ch <- scheduler.Event{Token: tok, Logprob: -0.25, Top: f.top[:min(len(f.top), req.TopLogprobs)]}:
		case <-ctx.Done():
			f.mu.Lock()
			f.cancels++
			if f.cancelled != nil {
				close(f.cancelled)
			}
			f.mu.Unlock()
			ch <- scheduler.Event{Done: true, Reason: scheduler.FinishCancelled}
			return
		}
	}
	switch {
	case f.fail != nil:
		ch <- scheduler.Event{Done: true, Reason: scheduler.FinishError, Err: f.fail}
	case f.block:
		<-ctx.Done()
		close(f.cancelled)
		ch <- scheduler.Event{Done: true, Reason: scheduler.FinishCancelled}
	case len(script) == req.MaxTokens:
		ch <- scheduler.Event{Done: true, Reason: scheduler.FinishLength}
	default:
		ch <- scheduler.Event{Done: true, Reason: scheduler.FinishStop, StopToken: tokEOS}
	}
}

func (f *fakeHost) Close(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	return nil
}

func (f *fakeHost) lastRequest(t *testing.T) scheduler.Request {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.reqs) == 0 {
		t.Fatal("the host got no request")
	}
	return f.reqs[len(f.reqs)-1]
}

// testEnv is a handler on fakes.
type testEnv struct {
	tok  *fakeTokenizer
	tmpl *fakeTemplate
	host *fakeHost
	h    *Handler
}

// newTestEnv serves a model named gopher with a 64-token context whose host replies
// "Hello, world!" (4 tokens).
func newTestEnv(t *testing.T, edit func(*ServedModel, *HandlerOptions)) *testEnv {
	t.Helper()
	tok := newFakeTokenizer()
	env := &testEnv{tok: tok, tmpl: &fakeTemplate{}, host: &fakeHost{script: tok.ids("Hello", ",", " world", "!")}}
	m := ServedModel{Name: "gopher", Tokenizer: tok, Template: env.tmpl, EOS: []int32{tokEOS}, Context: 64, Host: env.host,
		Defaults: config.SamplingConfig{Temperature: -1, TopP: -1, TopK: -1, MinP: -1}}
	opts := HandlerOptions{
		Routing: Routing{Sampling: config.Default().Sampling},
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		Seed:    func() uint64 { return 42 },
	}
	if edit != nil {
		edit(&m, &opts)
	}
	env.h = NewHandler(m, opts)
	return env
}

// do sends a request to the handler and returns the recorded response.
func (e *testEnv) do(method, path, body string, header ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	e.h.ServeHTTP(w, r)
	return w
}

var _ http.Handler = (*Handler)(nil)

// slowClient is a ResponseWriter whose client takes write i after takeAfter(i) (never when
// negative), as a connection's write waits once the socket's buffers are full. Like a
// connection's, a write the client has not taken by the write deadline fails with
// os.ErrDeadlineExceeded; without a deadline it waits as long as the client takes. Run it under
// testing/synctest, whose clock makes the waits instant.
type slowClient struct {
	takeAfter func(i int) time.Duration

	mu       sync.Mutex // guards the fields below
	header   http.Header
	code     int
	deadline time.Time
	writes   int
	body     strings.Builder
	// deadlines records the deadline in force at each write, relative to the write's start
	// (0: none).
	deadlines []time.Duration
}

func (c *slowClient) Header() http.Header {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.header == nil {
		c.header = http.Header{}
	}
	return c.header
}

func (c *slowClient) WriteHeader(code int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.code == 0 {
		c.code = code
	}
}

func (c *slowClient) Write(p []byte) (int, error) {
	c.mu.Lock()
	if c.code == 0 {
		c.code = http.StatusOK
	}
	i, deadline := c.writes, c.deadline
	c.writes++
	var left time.Duration
	if !deadline.IsZero() {
		left = time.Until(deadline)
	}
	c.deadlines = append(c.deadlines, left)
	c.mu.Unlock()
	wait := c.takeAfter(i)
	if wait < 0 {
		wait = 24 * time.Hour // never, on the test's clock
	}
	if !deadline.IsZero() && wait > left {
		time.Sleep(left)
		return 0, &net.OpError{Op: "write", Net: "tcp", Err: os.ErrDeadlineExceeded}
	}
	time.Sleep(wait)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.body.Write(p)
	return len(p), nil
}

func (c *slowClient) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deadline = t
	return nil
}

func (c *slowClient) FlushError() error { return nil }

func (c *slowClient) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.body.String()
}
