//go:build openai

// Tool calls read by the official openai-go client's types. Behind the openai build tag, as
// cmd/tfd's client test, because compiling that client is slow on a small machine: make
// test-openai runs it. The bundled model does not write tool calls by itself, so the reply here
// is scripted (the fake host), while the template is the bundled model's own.

package api

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"tfd/engine/chattemplate"
	"tfd/models"
)

// TestOpenAIToolRoundTrip: a scripted call comes back as openai-go reads it, whole and
// streamed through its ChatCompletionAccumulator; the client turns it into the next request's
// assistant message with ToParam, adds the tool's result with ToolMessage, and the bundled
// template renders both in the prompt of the final answer.
func TestOpenAIToolRoundTrip(t *testing.T) {
	cfg, err := models.FS().Open("tokenizer_config.json")
	if err != nil {
		t.Fatal(err)
	}
	var raw json.RawMessage
	if err := json.NewDecoder(cfg).Decode(&raw); err != nil {
		t.Fatal(err)
	}
	cfg.Close()
	bundled, err := chattemplate.FromTokenizerConfig(raw)
	if err != nil {
		t.Fatal(err)
	}
	const said = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>"
	newEnv := func() *testEnv {
		env := newTestEnv(t, func(m *ServedModel, _ *HandlerOptions) { m.Context, m.Template = 4096, bundled })
		env.host.script = append(env.tok.ids(said), tokEOS)
		return env
	}
	params := openai.ChatCompletionNewParams{
		Model:    "gopher",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in Oslo?")},
		Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: "get_weather", Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}},
		})},
	}
	body, err := json.Marshal(params)
	if err != nil {
		t.Fatal(err)
	}

	var whole openai.ChatCompletion
	w := newEnv().do("POST", "/v1/chat/completions", string(body))
	if err := json.Unmarshal(w.Body.Bytes(), &whole); err != nil {
		t.Fatal(err)
	}
	if c := whole.Choices[0]; c.FinishReason != "tool_calls" || len(c.Message.ToolCalls) != 1 || c.Message.ToolCalls[0].Function.Name != "get_weather" ||
		c.Message.ToolCalls[0].Function.Arguments != `{"city":"Oslo"}` || !strings.HasPrefix(c.Message.ToolCalls[0].ID, "call_") {
		t.Fatalf("whole: %s", w.Body)
	}

	var streamed map[string]any
	json.Unmarshal(body, &streamed)
	streamed["stream"] = true
	body, _ = json.Marshal(streamed)
	w = newEnv().do("POST", "/v1/chat/completions", string(body))
	var acc openai.ChatCompletionAccumulator
	var finished []openai.FinishedChatCompletionToolCall
	for _, event := range strings.Split(w.Body.String(), "\n\n") {
		data, ok := strings.CutPrefix(event, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var chunk openai.ChatCompletionChunk
		if err := json.Unmarshal([]byte(data), &chunk); err != nil {
			t.Fatal(err)
		}
		if !acc.AddChunk(chunk) {
			t.Fatalf("the accumulator refused %s", data)
		}
		if call, ok := acc.JustFinishedToolCall(); ok {
			finished = append(finished, call)
		}
	}
	msg := acc.Choices[0].Message
	if len(msg.ToolCalls) != 1 || msg.ToolCalls[0].Function.Arguments != `{"city":"Oslo"}` || acc.Choices[0].FinishReason != "tool_calls" ||
		len(finished) != 1 || finished[0].Name != "get_weather" || finished[0].ID != msg.ToolCalls[0].ID {
		t.Fatalf("streamed: %+v, finished %+v\n%s", msg, finished, w.Body)
	}

	// The round trip: the call as the client sends it back, and the tool's result.
	params.Messages = append(params.Messages, msg.ToParam(), openai.ToolMessage(`{"temp": 12}`, msg.ToolCalls[0].ID))
	body, _ = json.Marshal(params)
	env := newEnv()
	env.host.script = append(env.tok.ids("It is 12 degrees."), tokEOS)
	w = env.do("POST", "/v1/chat/completions", string(body))
	var final openai.ChatCompletion
	if err := json.Unmarshal(w.Body.Bytes(), &final); err != nil || final.Choices[0].Message.Content != "It is 12 degrees." || final.Choices[0].FinishReason != "stop" {
		t.Fatalf("final answer: %v %s", err, w.Body)
	}
	prompt := env.tok.Decode(env.host.lastRequest(t).Prompt)
	for _, part := range []string{
		"<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\":\"Oslo\"}}\n</tool_call><|im_end|>\n",
		"<|im_start|>user\n<tool_response>\n{\"temp\": 12}\n</tool_response><|im_end|>\n<|im_start|>assistant\n",
	} {
		if !strings.Contains(prompt, part) {
			t.Errorf("the final prompt lacks %q:\n%s", part, prompt)
		}
	}
}
