package api

import (
	"encoding/json"
	"strings"
	"testing"

	"tfd/daemon/api/toolcall"
)

// Tool calls through the handler: the parsing itself is tested in package toolcall.

// TestChatToolCalls: a chat request that offers tools gets the model's call as tool_calls with
// finish_reason tool_calls, whole and streamed; without tools the same text stays content.
func TestChatToolCalls(t *testing.T) {
	const said = `Sure.<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>`
	const tools = `"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}]`
	newEnv := func() *testEnv {
		env := newTestEnv(t, func(m *ServedModel, _ *HandlerOptions) { m.Context = 512 })
		env.host.script = append(env.tok.ids(said), tokEOS)
		return env
	}
	var whole struct {
		Choices []struct {
			Message struct {
				Content   *string         `json:"content"`
				ToolCalls []toolcall.Call `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	w := newEnv().do("POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"Weather?"}],`+tools+`}`)
	if err := json.Unmarshal(w.Body.Bytes(), &whole); err != nil {
		t.Fatal(err)
	}
	m := whole.Choices[0].Message
	if whole.Choices[0].FinishReason != "tool_calls" || m.Content == nil || *m.Content != "Sure." || len(m.ToolCalls) != 1 ||
		m.ToolCalls[0].Function.Name != "get_weather" || m.ToolCalls[0].Function.Arguments != `{"city":"Paris"}` {
		t.Errorf("whole reply: %s", w.Body)
	}

	w = newEnv().do("POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"Weather?"}],"stream":true,`+tools+`}`)
	var content strings.Builder
	var calls []toolcall.Call
	finish := ""
	for _, line := range strings.Split(w.Body.String(), "\n\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				Delta struct {
					Content   *string         `json:"content"`
					ToolCalls []toolcall.Call `json:"tool_calls"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatal(err)
		}
		for _, ch := range c.Choices {
			if ch.Delta.Content != nil {
				content.WriteString(*ch.Delta.Content)
			}
			calls = mergeCallDeltas(t, calls, ch.Delta.ToolCalls)
			if ch.FinishReason != nil {
				finish = *ch.FinishReason
			}
		}
	}
	if content.String() != "Sure." || len(calls) != 1 || calls[0].Function.Name != "get_weather" || calls[0].Function.Arguments != `{"city":"Paris"}` || finish != "tool_calls" {
		t.Errorf("stream: content %q, calls %+v, finish %q\n%s", content.String(), calls, finish, w.Body)
	}

	w = newEnv().do("POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"Weather?"}]}`)
	whole.Choices = nil
	if err := json.Unmarshal(w.Body.Bytes(), &whole); err != nil {
		t.Fatal(err)
	}
	if m := whole.Choices[0].Message; m.Content == nil || *m.Content != said || len(m.ToolCalls) != 0 || whole.Choices[0].FinishReason != "stop" {
		t.Errorf("without tools: %s", w.Body)
	}
}

func TestOffersTools(t *testing.T) {
	tool := []json.RawMessage{json.RawMessage(`{"type":"function","function":{"name":"f"}}`)}
	for _, tt := range []struct {
		tools  []json.RawMessage
		choice string
		want   bool
	}{
		{nil, ``, false}, {tool, ``, true}, {tool, `"auto"`, true}, {tool, `"required"`, true},
		{tool, `"none"`, false}, {tool, `{"type":"function","function":{"name":"f"}}`, true},
	} {
		req := &chatRequest{Tools: tt.tools, ToolChoice: json.RawMessage(tt.choice)}
		if got := offersTools(req); got != tt.want {
			t.Errorf("tools %d, tool_choice %s: %v, want %v", len(tt.tools), tt.choice, got, tt.want)
		}
	}
}

// mergeCallDeltas adds a chunk's tool-call deltas to calls as an OpenAI client does: a delta
// with an id opens the call at its index (with its name), later ones append to its arguments.
func mergeCallDeltas(t *testing.T, calls []toolcall.Call, deltas []toolcall.Call) []toolcall.Call {
	t.Helper()
	for _, d := range deltas {
		if d.Index == nil {
			t.Fatalf("a tool-call delta without index: %+v", d)
		}
		i := *d.Index
		switch {
		case d.ID != "":
			if i != len(calls) || d.Function.Name == "" || d.Type != "function" || d.Function.Arguments != "" {
				t.Fatalf("call %d opens with %+v, after %d calls", i, d, len(calls))
			}
			calls = append(calls, toolcall.Call{ID: d.ID, Type: d.Type})
			calls[i].Function.Name = d.Function.Name
		case i < len(calls) && d.Function.Name == "":
			calls[i].Function.Arguments += d.Function.Arguments
		default:
			t.Fatalf("delta %+v for a call not opened", d)
		}
	}
	return calls
}

// sourcedTemplate is a fakeTemplate that tells its source, as *chattemplate.Template does.
type sourcedTemplate struct {
	*fakeTemplate
	source string
}

func (s sourcedTemplate) Source() string { return s.source }

// specialTokenizer is the fake tokenizer with "[TOOL_CALLS]" added as a special token.
type specialTokenizer struct{ *fakeTokenizer }

func (s specialTokenizer) IsSpecial(id int32) bool {
	return s.fakeTokenizer.IsSpecial(id) || int(id) < len(s.pieces) && s.pieces[id] == "[TOOL_CALLS]"
}

// TestMistralCallsThroughTheHandler: with a Mistral template, a reply whose [TOOL_CALLS] is a
// special token (which replies otherwise leave out) comes back as a call; with tool_choice
// "none" it is not parsed, and the tools are not given to the template either.
func TestMistralCallsThroughTheHandler(t *testing.T) {
	const tools = `"tools":[{"type":"function","function":{"name":"get_weather"}}]`
	newEnv := func() *testEnv {
		tok := newFakeTokenizer()
		tok.pieces = append(tok.pieces, "[TOOL_CALLS]")
		env := newTestEnv(t, func(m *ServedModel, _ *HandlerOptions) {
			m.Context = 512
			m.Tokenizer = specialTokenizer{tok}
			m.Template = sourcedTemplate{m.Template.(*fakeTemplate), "{{ '[TOOL_CALLS]' }}"}
		})
		env.host.script = append(tok.Encode(`[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}`), tokEOS)
		return env
	}
	var whole struct {
		Choices []struct {
			Message struct {
				Content   *string         `json:"content"`
				ToolCalls []toolcall.Call `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	w := newEnv().do("POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"Weather?"}],`+tools+`}`)
	if err := json.Unmarshal(w.Body.Bytes(), &whole); err != nil {
		t.Fatal(err)
	}
	c := whole.Choices[0]
	if c.FinishReason != "tool_calls" || c.Message.Content != nil || len(c.Message.ToolCalls) != 1 || c.Message.ToolCalls[0].Function.Arguments != `{"city":"Paris"}` {
		t.Fatalf("reply: %s", w.Body)
	}

	env := newEnv()
	w = env.do("POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"Weather?"}],"tool_choice":"none",`+tools+`}`)
	whole.Choices = nil
	if err := json.Unmarshal(w.Body.Bytes(), &whole); err != nil {
		t.Fatal(err)
	}
	if c := whole.Choices[0]; len(c.Message.ToolCalls) != 0 || c.FinishReason != "stop" || *c.Message.Content != `get_weather[ARGS]{"city": "Paris"}` {
		t.Errorf("tool_choice none: %s", w.Body)
	}
	if env.tmpl.last.Tools != nil {
		t.Errorf("tool_choice none gave the template tools: %s", env.tmpl.last.Tools)
	}
}

// TestParallelToolCallsFalse: parallel_tool_calls false keeps a reply's first call only.
func TestParallelToolCallsFalse(t *testing.T) {
	const said = `<tool_call>{"name": "a", "arguments": {}}</tool_call><tool_call>{"name": "b", "arguments": {}}</tool_call>`
	for _, parallel := range []string{"true", "false"} {
		env := newTestEnv(t, func(m *ServedModel, _ *HandlerOptions) { m.Context = 512 })
		env.host.script = append(env.tok.ids(said), tokEOS)
		w := env.do("POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"parallel_tool_calls":`+parallel+`,"tools":[{"type":"function","function":{"name":"a"}}]}`)
		var r struct {
			Choices []struct {
				Message struct {
					ToolCalls []toolcall.Call `json:"tool_calls"`
				} `json:"message"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		if want := map[string]int{"true": 2, "false": 1}[parallel]; len(r.Choices[0].Message.ToolCalls) != want {
			t.Errorf("parallel_tool_calls %s: %s", parallel, w.Body)
		}
	}
}

// TestStreamedCallsNumbered: streamed, two calls come as OpenAI streams them, numbered 0 and 1,
// the first before the second is written; parallel_tool_calls false sends the first only.
func TestStreamedCallsNumbered(t *testing.T) {
	const said = `<tool_call>{"name": "a", "arguments": {}}</tool_call><tool_call>{"name": "b", "arguments": {"x": 1}}</tool_call>`
	for _, parallel := range []string{"true", "false"} {
		env := newTestEnv(t, func(m *ServedModel, _ *HandlerOptions) { m.Context = 512 })
		env.host.script = append(env.tok.ids(said), tokEOS)
		w := env.do("POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"stream":true,"parallel_tool_calls":`+parallel+`,"tools":[{"type":"function","function":{"name":"a"}}]}`)
		var calls []toolcall.Call
		finish := ""
		for _, line := range strings.Split(w.Body.String(), "\n\n") {
			data, ok := strings.CutPrefix(line, "data: ")
			if !ok || data == "[DONE]" {
				continue
			}
			var c struct {
				Choices []struct {
					Delta struct {
						ToolCalls []toolcall.Call `json:"tool_calls"`
					} `json:"delta"`
					FinishReason *string `json:"finish_reason"`
				} `json:"choices"`
			}
			if err := json.Unmarshal([]byte(data), &c); err != nil {
				t.Fatal(err)
			}
			for _, ch := range c.Choices {
				calls = mergeCallDeltas(t, calls, ch.Delta.ToolCalls)
				if ch.FinishReason != nil {
					finish = *ch.FinishReason
				}
			}
		}
		want := map[string]int{"true": 2, "false": 1}[parallel]
		if len(calls) != want || calls[0].Function.Name != "a" || want == 2 && calls[1].Function.Arguments != `{"x":1}` || finish != "tool_calls" {
			t.Errorf("parallel_tool_calls %s: calls %+v, finish %q\n%s", parallel, calls, finish, w.Body)
		}
	}
}
