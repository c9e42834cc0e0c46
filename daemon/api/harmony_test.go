package api

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"tfd/daemon/api/toolcall"
)

// harmonyTokenizer is the fake tokenizer with the harmony format's markers as special tokens.
type harmonyTokenizer struct {
	*fakeTokenizer
	markers []int32
}

func newHarmonyTokenizer() *harmonyTokenizer {
	t := &harmonyTokenizer{fakeTokenizer: newFakeTokenizer()}
	for _, m := range toolcall.HarmonyMarkers {
		t.markers = append(t.markers, int32(len(t.pieces)))
		t.pieces = append(t.pieces, m)
	}
	return t
}

func (t *harmonyTokenizer) IsSpecial(id int32) bool {
	return t.fakeTokenizer.IsSpecial(id) || slices.Contains(t.markers, id)
}

// harmonyTemplate is the fake template, told as GPT-OSS's by its text.
type harmonyTemplate struct{ *fakeTemplate }

func (harmonyTemplate) Source() string {
	return `{{- "<|start|>assistant<|channel|>final<|message|>" + message.content + "<|end|>" }}`
}

// TestChatHarmony: a GPT-OSS reply's analysis channel comes back as reasoning_content and its
// final channel as content, whole and streamed, the markers left out; with tools offered, a
// message to functions.NAME comes back as a tool call with finish_reason tool_calls.
func TestChatHarmony(t *testing.T) {
	tok := newHarmonyTokenizer()
	newEnv := func(pieces ...string) *testEnv {
		env := newTestEnv(t, func(m *ServedModel, _ *HandlerOptions) {
			m.Tokenizer, m.Template, m.Context = tok, harmonyTemplate{&fakeTemplate{}}, 512
		})
		env.host.script = append(tok.ids(pieces...), tokEOS)
		return env
	}
	answer := []string{"<|channel|>", "analysis", "<|message|>", "User greets.", "<|end|>",
		"<|start|>", "assistant", "<|channel|>", "final", "<|message|>", "Hello", "!"}
	call := []string{"<|channel|>", "analysis", "<|message|>", "Need weather.", "<|end|>", "<|start|>", "assistant",
		"<|channel|>", "commentary to=functions.get_weather ", "<|constrain|>", "json", "<|message|>", `{"city": "Paris"}`}
	const tools = `,"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}]`
	for _, tt := range []struct {
		name               string
		script             []string
		tools              string
		content, reasoning string
		calls              string // the calls' names and arguments
		finish             string
	}{
		{"an answer", answer, "", "Hello!", "User greets.", "", "stop"},
		{"a call", call, tools, "", "Need weather.", `get_weather{"city":"Paris"}`, "tool_calls"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			body := `{"messages":[{"role":"user","content":"Hi"}]` + tt.tools + `}`
			var whole struct {
				Choices []struct {
					Message      chatMessage `json:"message"`
					FinishReason string      `json:"finish_reason"`
				} `json:"choices"`
			}
			w := newEnv(tt.script...).do("POST", "/v1/chat/completions", body)
			if err := json.Unmarshal(w.Body.Bytes(), &whole); err != nil {
				t.Fatal(err)
			}
			m := whole.Choices[0].Message
			if got := deref(m.Content); got != tt.content || deref(m.ReasoningContent) != tt.reasoning ||
				callsOf(m.ToolCalls) != tt.calls || whole.Choices[0].FinishReason != tt.finish {
				t.Errorf("whole: %s", w.Body)
			}
			if tt.calls != "" && m.Content != nil {
				t.Errorf("whole: content %q beside tool calls, want null", *m.Content)
			}

			w = newEnv(tt.script...).do("POST", "/v1/chat/completions", strings.TrimSuffix(body, "}")+`,"stream":true}`)
			var content, reasoning strings.Builder
			var calls []toolcall.Call
			finish := ""
			for _, line := range strings.Split(w.Body.String(), "\n\n") {
				data, ok := strings.CutPrefix(line, "data: ")
				if !ok || data == "[DONE]" {
					continue
				}
				var c struct {
					Choices []struct {
						Delta        chatMessage `json:"delta"`
						FinishReason *string     `json:"finish_reason"`
					} `json:"choices"`
				}
				if err := json.Unmarshal([]byte(data), &c); err != nil {
					t.Fatal(err)
				}
				for _, ch := range c.Choices {
					content.WriteString(deref(ch.Delta.Content))
					reasoning.WriteString(deref(ch.Delta.ReasoningContent))
					calls = mergeCallDeltas(t, calls, ch.Delta.ToolCalls)
					if ch.FinishReason != nil {
						finish = *ch.FinishReason
					}
				}
			}
			if content.String() != tt.content || reasoning.String() != tt.reasoning || callsOf(calls) != tt.calls || finish != tt.finish {
				t.Errorf("stream: content %q, reasoning %q, calls %s, finish %q\n%s", content.String(), reasoning.String(), callsOf(calls), finish, w.Body)
			}
		})
	}
}

// callsOf writes calls as name and arguments, one after another.
func callsOf(calls []toolcall.Call) string {
	var b strings.Builder
	for _, c := range calls {
		b.WriteString(c.Function.Name + c.Function.Arguments)
	}
	return b.String()
}
