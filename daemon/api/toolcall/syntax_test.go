package toolcall

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestToolSyntaxSplit(t *testing.T) {
	tests := []struct {
		name    string
		syntax  *Syntax
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
		{"hermes", Hermes, `<tool_call>{"name": "a", "arguments": {"x": 1}}</tool_call>`, "", []string{`a({"x":1})`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			content, calls := tt.syntax.Split(tt.text)
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
	_, calls := mistralSyntax.Split(`[TOOL_CALLS]a[ARGS]{}`)
	if id := calls[0].ID; len(id) != 9 {
		t.Errorf("a Mistral call id %q: Mistral's templates take 9 letters and digits", id)
	}
	_, calls = mistralSyntax.Split(`[TOOL_CALLS]a[CALL_ID]abc123XYZ[ARGS]{}`)
	if id := calls[0].ID; id != "abc123XYZ" {
		t.Errorf("the model's call id became %q", id)
	}
}

// TestToolStreamSyntaxes feeds replies of each family in every split into two pieces: the
// content before a call is sent as it comes (none of a call, nor white space before a bare
// Llama call), and finish finds the calls.
func TestToolStreamSyntaxes(t *testing.T) {
	for _, tc := range []struct {
		syntax      *Syntax
		reply, sent string
		calls       int
	}{
		{llamaSyntax, "\n {\"name\": \"a\", \"parameters\": {}}", "", 1},
		{llamaSyntax, "Sure {not a call}", "Sure {not a call}", 0},
		{llamaSyntax, "Ok<|python_tag|>{\"name\": \"a\", \"parameters\": {}}", "Ok", 1},
		{mistralSyntax, "Ok [TOOL_CALLS]a[ARGS]{}", "Ok ", 1},
	} {
		for cut := range len(tc.reply) + 1 {
			sent, calls := pushPieces(&Stream{syntax: tc.syntax}, tc.reply[:cut], tc.reply[cut:])
			if sent != tc.sent || len(calls) != tc.calls {
				t.Fatalf("%s, %q cut at %d: sent %q, calls %+v", tc.syntax.name, tc.reply, cut, sent, calls)
			}
		}
	}
}

func TestDetectToolSyntax(t *testing.T) {
	for _, tc := range []struct {
		template string
		want     *Syntax
	}{
		// The lines of each family's template that write its calls back (Llama 3.2, Ministral 3,
		// Qwen3), and the bundled model's.
		{`{{- '{"name": "' + tool_call.name + '", ' }}{{- '"parameters": ' }}{{- tool_call.arguments | tojson }}{{- "<|eot_id|>" }}` +
			`{{- "<|start_header_id|>" + message['role'] + "<|end_header_id|>\n\n"+ message['content'] | trim + "<|eot_id|>" }}`, llamaSyntax},
		{`{{- '[TOOL_CALLS]' + tool['function']['name'] + '[ARGS]' + arguments }}`, mistralSyntax},
		{`{{- '<tool_call>\n{"name": "' }}`, Hermes},
		{`{%- for message in messages -%}{{ message.content }}{%- endfor -%}`, Hermes},
	} {
		if got := Detect(tc.template); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.template, got.name, tc.want.name)
		}
	}
}
