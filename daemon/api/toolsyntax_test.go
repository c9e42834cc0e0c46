package api

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestToolSyntaxSplit(t *testing.T) {
	tests := []struct {
		name    string
		syntax  *toolSyntax
		text    string
		content string
		calls   []string // name(arguments)
	}{
		{"llama bare call", llamaSyntax, " {\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}", "", []string{`get_weather({"city":"Paris"})`}},
		{"llama two calls", llamaSyntax, `{"name": "a", "parameters": {"x": 1}}; {"name": "b", "arguments": "{\"y\": 2}"}`, "", []string{`a({"x":1})`, `b({"y":2})`}},
		{"llama python_tag", llamaSyntax, `Looking.<|python_tag|>{"name": "a", "parameters": {}}`, "Looking.", []string{`a({})`}},
		{"llama JSON that is no call", llamaSyntax, `{"answer": 42}`, `{"answer": 42}`, nil},
		{"llama text then JSON", llamaSyntax, `Here: {"name": "a", "parameters": {}}`, `Here: {"name": "a", "parameters": {}}`, nil},
		{"llama trailing text", llamaSyntax, `{"name": "a", "parameters": {}} and more`, `{"name": "a", "parameters": {}} and more`, nil},
		{"llama arguments not an object", llamaSyntax, `{"name": "a", "parameters": [1]}`, `{"name": "a", "parameters": [1]}`, nil},
		{"mistral array", mistralSyntax, `[TOOL_CALLS][{"name": "a", "arguments": {"x": 1}}, {"name": "b", "arguments": {}}]`, "", []string{`a({"x":1})`, `b({})`}},
		{"mistral ARGS", mistralSyntax, `Sure. [TOOL_CALLS]a[ARGS]{"x": 1}[TOOL_CALLS]b[ARGS]{}`, "Sure.", []string{`a({"x":1})`, `b({})`}},
		{"mistral CALL_ID", mistralSyntax, `[TOOL_CALLS]a[CALL_ID]abc123XYZ[ARGS]{"x": 1}`, "", []string{`a({"x":1})`}},
		{"mistral broken arguments", mistralSyntax, `[TOOL_CALLS]a[ARGS]{"x": `, `[TOOL_CALLS]a[ARGS]{"x":`, nil},
		{"hermes", hermesSyntax, `<tool_call>{"name": "a", "arguments": {"x": 1}}</tool_call>`, "", []string{`a({"x":1})`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			content, calls := tt.syntax.split(tt.text)
			var got []string
			for _, c := range calls {
				if c.Type != "function" || c.ID == "" || !json.Valid([]byte(c.Function.Arguments)) {
					t.Errorf("call %+v", c)
				}
				got = append(got, c.Function.Name+"("+c.Function.Arguments+")")
			}
			if content != tt.content || strings.Join(got, " ") != strings.Join(tt.calls, " ") {
				t.Errorf("content %q, calls %v; want %q, %v", content, got, tt.content, tt.calls)
			}
		})
	}
	_, calls := mistralSyntax.split(`[TOOL_CALLS]a[ARGS]{}`)
	if id := calls[0].ID; len(id) != 9 {
		t.Errorf("a Mistral call id %q: Mistral's templates take 9 letters and digits", id)
	}
	_, calls = mistralSyntax.split(`[TOOL_CALLS]a[CALL_ID]abc123XYZ[ARGS]{}`)
	if id := calls[0].ID; id != "abc123XYZ" {
		t.Errorf("the model's call id became %q", id)
	}
}

// TestToolStreamSyntaxes feeds replies of each family in every split into two pieces: the
// content before a call is sent as it comes (none of a call, nor white space before a bare
// Llama call), and finish finds the calls.
func TestToolStreamSyntaxes(t *testing.T) {
	for _, tc := range []struct {
		syntax      *toolSyntax
		reply, sent string
		calls       int
	}{
		{llamaSyntax, "\n {\"name\": \"a\", \"parameters\": {}}", "", 1},
		{llamaSyntax, "Sure {not a call}", "Sure {not a call}", 0},
		{llamaSyntax, "Ok<|python_tag|>{\"name\": \"a\", \"parameters\": {}}", "Ok", 1},
		{mistralSyntax, "Ok [TOOL_CALLS]a[ARGS]{}", "Ok ", 1},
	} {
		for cut := range len(tc.reply) + 1 {
			sent, calls := pushPieces(&toolStream{syntax: tc.syntax}, tc.reply[:cut], tc.reply[cut:])
			if sent != tc.sent || len(calls) != tc.calls {
				t.Fatalf("%s, %q cut at %d: sent %q, calls %+v", tc.syntax.name, tc.reply, cut, sent, calls)
			}
		}
	}
}

func TestDetectToolSyntax(t *testing.T) {
	for _, tc := range []struct {
		template string
		want     *toolSyntax
	}{
		// The lines of each family's template that write its calls back (Llama 3.2, Ministral 3,
		// Qwen3), and the bundled model's.
		{`{{- '{"name": "' + tool_call.name + '", ' }}{{- '"parameters": ' }}{{- tool_call.arguments | tojson }}{{- "<|eot_id|>" }}` +
			`{{- "<|start_header_id|>" + message['role'] + "<|end_header_id|>\n\n"+ message['content'] | trim + "<|eot_id|>" }}`, llamaSyntax},
		{`{{- '[TOOL_CALLS]' + tool['function']['name'] + '[ARGS]' + arguments }}`, mistralSyntax},
		{`{{- '<tool_call>\n{"name": "' }}`, hermesSyntax},
		{`{%- for message in messages -%}{{ message.content }}{%- endfor -%}`, hermesSyntax},
	} {
		if got := detectToolSyntax(tc.template); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.template, got.name, tc.want.name)
		}
	}
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
				Content   *string    `json:"content"`
				ToolCalls []toolCall `json:"tool_calls"`
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
					ToolCalls []toolCall `json:"tool_calls"`
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
		var calls []toolCall
		finish := ""
		for _, line := range strings.Split(w.Body.String(), "\n\n") {
			data, ok := strings.CutPrefix(line, "data: ")
			if !ok || data == "[DONE]" {
				continue
			}
			var c struct {
				Choices []struct {
					Delta struct {
						ToolCalls []toolCall `json:"tool_calls"`
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
