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
	"github.com/openai/openai-go/v3/shared"
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

// TestServeSurface talks to a real tfd with the official client about the rest of OpenAI's
// surface: n = 3 seeded choices, whole and streamed, each the reply of a single-choice request
// with its seed; and a tool round trip. The bundled model does not call tools by itself, so the
// round trip's first step (a reply that is a call) is in daemon/api's TestOpenAIToolRoundTrip
// with a scripted reply; here the client sends the call back as it would after one, with the
// tool's result, and the model answers.
func TestServeSurface(t *testing.T) {
	if testing.Short() {
		t.Skip("builds tfd and serves the bundled model; skipped with -short")
	}
	srv := startServer(t, "[sessions]\nparallel = 4\n")
	client := openai.NewClient(option.WithBaseURL("http://"+srv.addr+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	chat := openai.ChatCompletionNewParams{
		Model:       "gopher",
		Messages:    []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Write a function that sums a slice.")},
		Temperature: openai.Float(0.9),
		MaxTokens:   openai.Int(24),
		N:           openai.Int(3),
		Seed:        openai.Int(40),
	}
	whole, err := client.Chat.Completions.New(ctx, chat)
	if err != nil || len(whole.Choices) != 3 {
		t.Fatalf("n = 3: %v, %d choices\n%s", err, len(whole.Choices), srv.log)
	}
	texts := map[string]bool{}
	for i, c := range whole.Choices {
		single := chat
		single.N, single.Seed = openai.Int(1), openai.Int(40+int64(i))
		alone, err := client.Chat.Completions.New(ctx, single)
		if err != nil {
			t.Fatal(err)
		}
		if int(c.Index) != i || c.Message.Content != alone.Choices[0].Message.Content || tfdOf(t, c.RawJSON()).TFD.TokensHash != tfdOf(t, alone.RawJSON()).TFD.TokensHash {
			t.Errorf("choice %d: %q; alone with seed %d: %q", i, c.Message.Content, 40+i, alone.Choices[0].Message.Content)
		}
		texts[c.Message.Content] = true
	}
	if len(texts) < 2 {
		t.Errorf("three choices of different seeds all said %q", whole.Choices[0].Message.Content)
	}
	stream := client.Chat.Completions.NewStreaming(ctx, chat)
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil || len(acc.Choices) != 3 {
		t.Fatalf("n = 3 streamed: %v, %d choices", err, len(acc.Choices))
	}
	for i, c := range acc.Choices {
		if c.Message.Content != whole.Choices[i].Message.Content || c.FinishReason != whole.Choices[i].FinishReason {
			t.Errorf("streamed choice %d: %q (%s); whole: %q (%s)", i, c.Message.Content, c.FinishReason, whole.Choices[i].Message.Content, whole.Choices[i].FinishReason)
		}
	}

	// The tool round trip, from the call on.
	call := openai.ChatCompletionMessageToolCallUnionParam{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
		ID:       "call_1",
		Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "get_weather", Arguments: `{"city":"Oslo"}`},
	}}
	tools := openai.ChatCompletionNewParams{
		Model: "gopher",
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.UserMessage("Weather in Oslo?"),
			{OfAssistant: &openai.ChatCompletionAssistantMessageParam{ToolCalls: []openai.ChatCompletionMessageToolCallUnionParam{call}}},
			openai.ToolMessage(`{"temp": 12}`, "call_1"),
		},
		Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: "get_weather", Parameters: shared.FunctionParameters{"type": "object"},
		})},
		Temperature: openai.Float(0),
		MaxTokens:   openai.Int(16),
	}
	answer, err := client.Chat.Completions.New(ctx, tools)
	if err != nil {
		t.Fatalf("the answer after a tool's result: %v\n%s", err, srv.log)
	}
	if c := answer.Choices[0]; c.FinishReason != "stop" && c.FinishReason != "length" && c.FinishReason != "tool_calls" || answer.Usage.PromptTokens < 50 {
		t.Errorf("the answer after a tool's result: %s", answer.RawJSON())
	}
	t.Logf("after the tool's result (%s): %q", answer.Choices[0].FinishReason, answer.Choices[0].Message.Content)
	srv.stop(t)
}

// TestServeStructured talks to tfd with the openai-go client as an extraction script and an agent
// would: a json_schema reply that unmarshals into a Go struct, and a required tool call whose
// result goes back with role tool before the final answer.
func TestServeStructured(t *testing.T) {
	if testing.Short() {
		t.Skip("builds tfd and serves the bundled model; skipped with -short")
	}
	srv := startServer(t, "[sessions]\nparallel = 2\n")
	client := openai.NewClient(option.WithBaseURL("http://"+srv.addr+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	type function struct {
		Name   string   `json:"name"`
		Params []string `json:"params"`
		Pure   bool     `json:"pure"`
	}
	schema := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"name":   map[string]any{"type": "string"},
			"params": map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "maxItems": 3},
			"pure":   map[string]any{"type": "boolean"},
		},
		"required":             []string{"name", "params", "pure"},
		"additionalProperties": false,
	}
	reply, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:       "gopher",
		Messages:    []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Describe a Go function that reverses a slice.")},
		Temperature: openai.Float(0.7),
		Seed:        openai.Int(3),
		MaxTokens:   openai.Int(200),
		ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "function", Schema: schema, Strict: openai.Bool(true)},
		}},
	})
	if err != nil {
		t.Fatalf("json_schema: %v\n%s", err, srv.log)
	}
	var got function
	dec := json.NewDecoder(strings.NewReader(reply.Choices[0].Message.Content))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&got); err != nil || reply.Choices[0].FinishReason != "stop" {
		t.Fatalf("json_schema reply (%s) does not unmarshal into the struct: %v\n%s", reply.Choices[0].FinishReason, err, reply.Choices[0].Message.Content)
	}
	t.Logf("json_schema: %+v", got)

	tools := []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
		Name: "get_weather",
		Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}},
			"required": []string{"city"}, "additionalProperties": false},
	})}
	ask := openai.ChatCompletionNewParams{
		Model:       "gopher",
		Messages:    []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is the weather in Oslo?")},
		Tools:       tools,
		ToolChoice:  openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")},
		Temperature: openai.Float(0),
		MaxTokens:   openai.Int(64),
	}
	first, err := client.Chat.Completions.New(ctx, ask)
	if err != nil {
		t.Fatalf("tool_choice required: %v\n%s", err, srv.log)
	}
	msg := first.Choices[0].Message
	if first.Choices[0].FinishReason != "tool_calls" || len(msg.ToolCalls) != 1 || msg.ToolCalls[0].Function.Name != "get_weather" {
		t.Fatalf("tool_choice required gave no call: %s", first.RawJSON())
	}
	var args struct{ City string }
	if err := json.Unmarshal([]byte(msg.ToolCalls[0].Function.Arguments), &args); err != nil {
		t.Fatalf("the call's arguments are not JSON: %q", msg.ToolCalls[0].Function.Arguments)
	}
	ask.Messages = append(ask.Messages, msg.ToParam(), openai.ToolMessage(`{"temp": 12, "sky": "clear"}`, msg.ToolCalls[0].ID))
	ask.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("auto")}
	final, err := client.Chat.Completions.New(ctx, ask)
	if err != nil {
		t.Fatalf("the answer after the tool's result: %v\n%s", err, srv.log)
	}
	// The call and its result are in the prompt now; the tiny model answers as it will.
	if final.Usage.PromptTokens <= first.Usage.PromptTokens+10 || final.Choices[0].FinishReason == "" {
		t.Errorf("the answer after the tool's result: %s", final.RawJSON())
	}
	t.Logf("call get_weather(%s), then (%s): %q", msg.ToolCalls[0].Function.Arguments, final.Choices[0].FinishReason, final.Choices[0].Message.Content)
	srv.stop(t)
}
