//go:build openai

// The test that talks to a real tfd with the official openai-go client. It is behind the openai
// build tag because compiling that client takes minutes on a small machine: make test-openai
// runs it, and .ci/run runs make test-openai after make test.

package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
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
