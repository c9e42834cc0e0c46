package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// tfdField is the tfd object of a response.
type tfdField struct {
	TFD struct {
		Seed       uint64 `json:"seed"`
		TokensHash string `json:"tokens_hash"`
		Drafted    int    `json:"drafted"`
		Accepted   int    `json:"accepted"`
	} `json:"tfd"`
}

func tfdOf(t *testing.T, raw string) tfdField {
	t.Helper()
	var f tfdField
	if err := json.Unmarshal([]byte(raw), &f); err != nil || len(f.TFD.TokensHash) != 16 {
		t.Fatalf("no tfd object in %s (%v)", raw, err)
	}
	return f
}

// TestServe builds tfd, serves the bundled model on a free port and talks to it with the
// official OpenAI Go client: a streamed chat, a whole chat, a completion, a repeated greedy
// request; then SIGINT must stop the process cleanly.
func TestServe(t *testing.T) {
	if testing.Short() {
		t.Skip("builds tfd and serves the bundled model; skipped with -short")
	}
	srv := startServer(t, "[sessions]\nparallel = 1\n")
	stderr := srv.log
	client := openai.NewClient(option.WithBaseURL("http://"+srv.addr+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	const maxTokens = 24
	chat := openai.ChatCompletionNewParams{
		Model:       "gopher",
		Messages:    []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Write a function that reverses a slice of ints.")},
		Temperature: openai.Float(0),
		MaxTokens:   openai.Int(maxTokens),
	}

	// Streamed chat, with usage in a last chunk.
	streamed := chat
	streamed.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := client.Chat.Completions.NewStreaming(ctx, streamed)
	var acc openai.ChatCompletionAccumulator
	var streamHash string
	for stream.Next() {
		chunk := stream.Current()
		acc.AddChunk(chunk)
		if strings.Contains(chunk.RawJSON(), `"tfd"`) {
			streamHash = tfdOf(t, chunk.RawJSON()).TFD.TokensHash
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("streamed chat: %v\n%s", err, stderr)
	}
	streamText := acc.Choices[0].Message.Content
	checkReply(t, "streamed chat", streamText, acc.Choices[0].FinishReason, acc.Usage, maxTokens)

	// The same request whole: the same greedy reply.
	whole, err := client.Chat.Completions.New(ctx, chat)
	if err != nil {
		t.Fatalf("chat: %v\n%s", err, stderr)
	}
	checkReply(t, "chat", whole.Choices[0].Message.Content, whole.Choices[0].FinishReason, whole.Usage, maxTokens)
	wholeTFD := tfdOf(t, whole.RawJSON())
	if whole.Choices[0].Message.Content != streamText || wholeTFD.TFD.TokensHash != streamHash {
		t.Errorf("streamed and whole greedy replies differ: %q (%s) vs %q (%s)", streamText, streamHash, whole.Choices[0].Message.Content, wholeTFD.TFD.TokensHash)
	}

	// Logprobs with the 3 likeliest alternatives: a greedy reply's token is the likeliest there.
	withLogprobs := chat
	withLogprobs.Logprobs, withLogprobs.TopLogprobs = openai.Bool(true), openai.Int(3)
	lpReply, err := client.Chat.Completions.New(ctx, withLogprobs)
	if err != nil {
		t.Fatalf("chat with logprobs: %v\n%s", err, stderr)
	}
	content := lpReply.Choices[0].Logprobs.Content
	if len(content) == 0 {
		t.Errorf("no logprobs in %s", lpReply.RawJSON())
	}
	for i, c := range content {
		top := c.TopLogprobs
		if len(top) != 3 || top[0].Token != c.Token || top[0].Logprob != c.Logprob || top[1].Logprob > top[0].Logprob || top[2].Logprob > top[1].Logprob || c.Logprob > 0 {
			t.Errorf("token %d %q (%v): top_logprobs %+v", i, c.Token, c.Logprob, top)
			break
		}
	}

	// The chat's next turn: its session still holds the first turn, which it need not compute
	// again, and the client reads that in usage.prompt_tokens_details.cached_tokens.
	turn := chat
	turn.Messages = append(slices.Clone(chat.Messages), whole.Choices[0].Message.ToParam(), openai.UserMessage("Now for strings."))
	second, err := client.Chat.Completions.New(ctx, turn)
	if err != nil {
		t.Fatalf("second turn: %v\n%s", err, stderr)
	}
	if cached := second.Usage.PromptTokensDetails.CachedTokens; cached < whole.Usage.PromptTokens {
		t.Errorf("the second turn reused %d prompt tokens; the first turn's prompt alone is %d", cached, whole.Usage.PromptTokens)
	}

	// A completion, twice: the same greedy tokens.
	completion := openai.CompletionNewParams{
		Model:       "gopher",
		Prompt:      openai.CompletionNewParamsPromptUnion{OfString: openai.String("package main\n\nimport (\n")},
		Temperature: openai.Float(0),
		MaxTokens:   openai.Int(16),
	}
	var hashes []string
	for range 2 {
		c, err := client.Completions.New(ctx, completion)
		if err != nil {
			t.Fatalf("completion: %v\n%s", err, stderr)
		}
		checkReply(t, "completion", c.Choices[0].Text, string(c.Choices[0].FinishReason), c.Usage, 16)
		hashes = append(hashes, tfdOf(t, c.RawJSON()).TFD.TokensHash)
	}
	if hashes[0] != hashes[1] {
		t.Errorf("the same greedy completion gave tokens_hash %s then %s", hashes[0], hashes[1])
	}

	// A sampled completion with a seed, drafted (the default) and with "draft": false: the same
	// tokens, and the drafted one reports its drafts.
	sampled := completion
	sampled.Prompt = openai.CompletionNewParamsPromptUnion{OfString: openai.String("func (b *Buffer) Len() int { return len(b.buf) }\n\nfunc (b *Buffer) Cap() int {")}
	sampled.Temperature, sampled.Seed, sampled.MaxTokens = openai.Float(0.7), openai.Int(11), openai.Int(64)
	var drafted, undrafted tfdField
	for _, draft := range []bool{true, false} {
		c, err := client.Completions.New(ctx, sampled, option.WithJSONSet("draft", draft))
		if err != nil {
			t.Fatalf("sampled completion (draft %v): %v\n%s", draft, err, stderr)
		}
		if draft {
			drafted = tfdOf(t, c.RawJSON())
		} else {
			undrafted = tfdOf(t, c.RawJSON())
		}
	}
	if drafted.TFD.TokensHash != undrafted.TFD.TokensHash || drafted.TFD.Seed != 11 {
		t.Errorf("drafted reply %+v differs from the undrafted %+v", drafted.TFD, undrafted.TFD)
	}
	if drafted.TFD.Drafted == 0 || undrafted.TFD.Drafted != 0 {
		t.Errorf("draft counts: drafted reply %+v, undrafted %+v", drafted.TFD, undrafted.TFD)
	}
	t.Logf("drafts: %d proposed, %d accepted", drafted.TFD.Drafted, drafted.TFD.Accepted)

	// An unknown model is a 404 the client reports as an API error.
	bad := completion
	bad.Model = "gpt-4o"
	var apiErr *openai.Error
	if _, err := client.Completions.New(ctx, bad); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound || apiErr.Code != "model_not_found" {
		t.Errorf("unknown model: %v", err)
	}

	srv.stop(t)
}

// checkReply checks a reply's text, finish reason and usage against each other.
func checkReply(t *testing.T, what, text, finish string, u openai.CompletionUsage, maxTokens int64) {
	t.Helper()
	if strings.TrimSpace(text) == "" {
		t.Errorf("%s: empty text", what)
	}
	if u.PromptTokens <= 0 || u.CompletionTokens <= 0 || u.CompletionTokens > maxTokens || u.TotalTokens != u.PromptTokens+u.CompletionTokens {
		t.Errorf("%s: inconsistent usage %+v", what, u)
	}
	switch {
	case finish == "length" && u.CompletionTokens != maxTokens,
		finish == "stop" && u.CompletionTokens >= maxTokens,
		finish != "length" && finish != "stop":
		t.Errorf("%s: finish_reason %q with %d of %d tokens", what, finish, u.CompletionTokens, maxTokens)
	}
	t.Logf("%s (%s, %d tokens): %q", what, finish, u.CompletionTokens, text)
}

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
	client := openai.NewClient(option.WithBaseURL("http://"+srv.addr+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stream := client.Completions.NewStreaming(ctx, openai.CompletionNewParams{
		Model:       "gopher",
		Prompt:      openai.CompletionNewParamsPromptUnion{OfString: openai.String("package main\n")},
		Temperature: openai.Float(0),
		MaxTokens:   openai.Int(2000),
	})
	chunks := 0
	for stream.Next() {
		if chunks++; chunks == 1 {
			if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The stream ends with tfd's error event (shutting down) and [DONE], or with its finish
	// reason if it completed within the grace: either way an API answer, not a broken connection.
	if err := stream.Err(); err != nil && !strings.Contains(err.Error(), `"code":"shutting_down"`) {
		t.Errorf("the stream did not end properly after %d chunks: %v\n%s", chunks, err, srv.log)
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
