package chattemplate

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// The conversations the feature cases render.
var (
	chat = []Message{
		{Role: "system", Content: "Be brief."},
		{Role: "user", Content: "Hi"},
		{Role: "assistant", Content: "<think>\nhmm\n</think>\n\nHello!"},
		{Role: "user", Content: "Bye"},
	}
	weatherTool = json.RawMessage(`{"type": "function", "function": {"name": "get_weather",
		"description": "Météo for a city", "parameters": {"type": "object", "required": ["city"],
		"properties": {"city": {"type": "string"}, "days": {"type": "integer", "default": 1.0,
		"maximum": 1e6, "minimum": 0.5}}}}}`)
	toolChat = []Message{
		{Role: "system", Content: "You help."},
		{Role: "user", Content: "Weather in Paris?"},
		{Role: "assistant", Content: "", ReasoningContent: "Call the tool.", ToolCalls: json.RawMessage(
			`[{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
			  {"id": "c2", "type": "function", "function": {"name": "get_weather", "arguments": {"z": 1, "city": "Lyon"}}}]`)},
		{Role: "tool", Content: "18°C", ToolCallID: "c1"},
		{Role: "tool", Content: "20°C", ToolCallID: "c2"},
	}
)

const chatML = "{%- for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + " +
	"'<|im_end|>' + '\\n'}}{%- endfor %}{%- if add_generation_prompt %}{{'<|im_start|>assistant\\n'}}{%- endif %}"

// featureCase is one template feature rendered on a conversation. want is Jinja2's output as
// transformers configures it, checked with TFD_CHECK_WITH_PYTHON=1 (see testdata/hf_render.py).
type featureCase struct {
	name     string
	template string
	messages []Message
	opts     Options
	want     string
	wantErr  string // a substring of the error, when the render must fail
}

var featureCases = []featureCase{
	{name: "chatml", template: chatML, messages: chat, opts: Options{AddGenerationPrompt: true},
		want: "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\nhmm\n</think>\n\nHello!<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n"},
	{name: "chatml without generation prompt", template: chatML, messages: chat[:2],
		want: "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"},
	{name: "trim_blocks and lstrip_blocks", messages: chat,
		template: "{% for m in messages %}\n  {% if m.role == 'user' %}\n    U:{{ m.content }}\n  {% endif %}\n{% endfor %}\n",
		want:     "    U:Hi\n    U:Bye\n"},
	{name: "whitespace control", messages: chat,
		template: "a  {{- ' b ' -}}  c {%- if true %} d {% endif -%}   e\n{#- comment -#}\n f",
		want:     "a b c d ef"},
	{name: "namespace and loop.index0", messages: chat,
		template: "{% set ns = namespace(n=0, last=-1) %}{% for m in messages %}{% if m.role == 'user' %}" +
			"{% set ns.n = ns.n + 1 %}{% set ns.last = loop.index0 %}{% endif %}{% endfor %}{{ ns.n }},{{ ns.last }}",
		want: "2,3"},
	{name: "slicing", messages: chat,
		template: "{% for m in messages[::-1] %}{{ m.role[0] }}{% endfor %}|{{ messages[1:3] | length }}|" +
			"{{ messages[-1].content }}|{{ 'abcdef'[1:-1] }}|{{ 'abc'[::-1] }}|{{ messages[-2].role }}",
		want: "uaus|2|Bye|bcde|cba|assistant"},
	{name: "loop variables", messages: chat,
		template: "{% for m in messages %}{{ loop.index0 }}{{ loop.index }}{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %}",
		want:     "01TrueFalse4;12FalseFalse4;23FalseFalse4;34FalseTrue4;"},
	{name: "loop controls", messages: chat,
		template: "{% for i in range(5) %}{% if i == 1 %}{% continue %}{% endif %}{% if i == 3 %}{% break %}{% endif %}{{ i }}{% endfor %}",
		want:     "02"},
	{name: "string methods", messages: chat,
		template: "{% set c = messages[2].content %}{{ c.split('</think>')[-1].lstrip('\\n') }}|" +
			"{{ c.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') }}|" +
			"{{ c.startswith('<think>') }}{{ c.endswith('!') }}{{ c.startswith('x') }}|{{ '  x  '.strip() }}|" +
			"{{ 'xxaxx'.strip('x') }}|{{ 'A b'.upper() }}{{ 'A b'.lower() }}|{{ 'a,b'.replace(',', ';') }}",
		want: "Hello!|hmm|TrueTrueFalse|x|a|A Ba b|a;b"},
	{name: "tests", messages: chat,
		template: "{{ x is defined }}{{ messages is defined }}{{ messages[0].content is string }}{{ 3 is string }}" +
			"{{ tools is none }}{{ messages[0].tool_calls is defined }}{{ 1 is number }}{{ messages[0] is mapping }}" +
			"{{ messages is not string }}{{ enable_thinking is defined }}",
		want: "FalseTrueTrueFalseTrueFalseTrueTrueTrueFalse"},
	{name: "in operator", messages: toolChat,
		template: "{% for m in messages %}{{ 'tool_calls' in m }}{{ 'reasoning_content' in m }}{% endfor %}" +
			"{{ 'a' in 'cat' }}{{ 2 in [1, 2] }}",
		want: "FalseFalseFalseFalseTrueTrueFalseFalseFalseFalseTrueTrue"},
	{name: "filters", messages: chat,
		template: "{{ messages | length }}|{{ messages | map(attribute='role') | join(',') }}|" +
			"{{ messages | selectattr('role', 'equalto', 'user') | list | length }}|{{ nope | default('y') }}|" +
			"{{ '  a ' | trim }}|{{ [3, 1, 2] | sort | join }}|{{ (messages | last).role }}",
		want: "4|system,user,assistant,user|2|y|a|123|user"},
	{name: "dict items keep order", messages: chat,
		template: "{% for k, v in {'z': 1, 'a': 2}.items() %}{{ k }}={{ v }},{% endfor %}|{{ {'a': 1}.get('b', 9) }}",
		want:     "z=1,a=2,|9"},
	{name: "macro", messages: chat,
		template: "{% macro render(m) %}[{{ m.role }}]{% endmacro %}{% for m in messages %}{{ render(m) }}{% endfor %}",
		want:     "[system][user][assistant][user]"},
	{name: "set block", messages: chat,
		template: "{% set x %}inner {{ 1 + 1 }}{% endset %}[{{ x }}]", want: "[inner 2]"},
	{name: "bos and eos tokens", messages: chat, template: "{{ bos_token }}x{{ eos_token }}", want: "<s>x</s>"},
	{name: "kwargs", messages: chat,
		opts:     Options{Kwargs: map[string]any{"enable_thinking": false, "extra": map[string]any{"b": 1, "a": []int{2}}}},
		template: "{{ enable_thinking }}{{ enable_thinking is false }}|{{ extra | tojson }}", want: "FalseTrue|{\"a\": [2], \"b\": 1}"},
	{name: "kwargs raw JSON keeps order", messages: chat,
		opts:     Options{Kwargs: map[string]any{"extra": json.RawMessage(`{"b": 1, "a": 2}`)}},
		template: "{{ extra | tojson }}", want: "{\"b\": 1, \"a\": 2}"},
	{name: "tojson of tools", messages: chat, opts: Options{Tools: []json.RawMessage{weatherTool}},
		template: "{% for tool in tools %}{{ tool | tojson }}{% endfor %}", want: "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Météo for a city\", \"parameters\": {\"type\": \"object\", \"required\": [\"city\"], \"properties\": {\"city\": {\"type\": \"string\"}, \"days\": {\"type\": \"integer\", \"default\": 1.0, \"maximum\": 1000000.0, \"minimum\": 0.5}}}}}"},
	{name: "tojson indent keeps order", messages: chat, opts: Options{Tools: []json.RawMessage{weatherTool}},
		template: "{% for t in tools %}{{- t | tojson(indent=4) }}{{ '\\n\\n' }}{% endfor %}", want: "{\n    \"type\": \"function\",\n    \"function\": {\n        \"name\": \"get_weather\",\n        \"description\": \"Météo for a city\",\n        \"parameters\": {\n            \"type\": \"object\",\n            \"required\": [\n                \"city\"\n            ],\n            \"properties\": {\n                \"city\": {\n                    \"type\": \"string\"\n                },\n                \"days\": {\n                    \"type\": \"integer\",\n                    \"default\": 1.0,\n                    \"maximum\": 1000000.0,\n                    \"minimum\": 0.5\n                }\n            }\n        }\n    }\n}\n\n"},
	{name: "tojson options", messages: chat, opts: Options{Tools: []json.RawMessage{weatherTool}},
		template: "{{ tools[0].function.parameters | tojson(separators=(',', ':'), sort_keys=true) }}|" +
			"{{ tools[0]['function'].description | tojson(ensure_ascii=true) }}|{{ [] | tojson(indent=2) }}|" +
			"{{ {'a': [1, {}]} | tojson(indent='\\t') }}|{{ tools | tojson | length }}|{{ (tools[0] | tojson)[:8] }}",
		want: "{\"properties\":{\"city\":{\"type\":\"string\"},\"days\":{\"default\":1.0,\"maximum\":1000000.0,\"minimum\":0.5,\"type\":\"integer\"}},\"required\":[\"city\"],\"type\":\"object\"}|\"M\\u00e9t\\u00e9o for a city\"|[]|{\n\t\"a\": [\n\t\t1,\n\t\t{}\n\t]\n}|277|{\"type\":"},
	{name: "tojson of strings and numbers", messages: chat,
		opts: Options{Kwargs: map[string]any{"s": "q\"\\ \t\n\x01\x7f\u2028é😀<&>", "n": json.RawMessage(
			`[1.0, 2.5, 0.0001, 0.00001, 1e16, 1e15, 123456789.5, -0.0, 3, 1.5e-7, 12345678901234567890.0]`)}},
		template: "{{ s | tojson }}|{{ n | tojson }}", want: "\"q\\\"\\\\ \\t\\n\\u0001\x7f\u2028é😀<&>\"|[1.0, 2.5, 0.0001, 1e-05, 1e+16, 1000000000000000.0, 123456789.5, -0.0, 3, 1.5e-07, 1.2345678901234567e+19]"},
	{name: "tool calls", messages: toolChat, opts: Options{Tools: []json.RawMessage{weatherTool}},
		template: "{% for m in messages %}{% for tc in m.tool_calls or [] %}{% if tc.function is defined %}" +
			"{% set tc = tc.function %}{% endif %}{{ tc.name }}:{% if tc.arguments is string %}{{ tc.arguments }}" +
			"{% else %}{{ tc.arguments | tojson }}{% endif %};{% endfor %}{{ m.tool_call_id }}{% endfor %}",
		want: "get_weather:{\"city\": \"Paris\"};get_weather:{\"z\": 1, \"city\": \"Lyon\"};c1c2"},
	{name: "newline after an expression in a block", messages: chat,
		template: "{% for m in messages %}{{ m.role }}\n{% endfor %}|{% if true %}{{ 'x' }}\n\n{% endif %}", want: "system\nuser\nassistant\nuser\n|x\n\n"},
	{name: "indented expression before a block tag", messages: chat[:2],
		template: "{% for m in messages %}\n    {{ m.role }}{% if not loop.last %}, {% endif %}\n{% endfor %}", want: "    system,     user"},
	{name: "markers reach only adjacent text", messages: chat,
		template: "a \n{{ 'x' }}{%- if true %} y {% endif -%}{{ 'z' }}  \n b {{ 'c' -}}\n\n  {{ 'd' }}", want: "a \nx y z  \n b cd"},
	{name: "plus markers", messages: chat,
		template: "a\n  {%+ if true %}b{% endif +%}\nc\n  {% if true %}d{% endif %}\ne", want: "a\n  b\nc\nde"},
	{name: "comments", messages: chat,
		template: "a\n  {# c #}\nb {#- c -#} c\n{# c #}{{ 'd' }}\n  {#+ c #}e", want: "a\nbc\nd\n  e"},
	{name: "raw block", messages: chat,
		template: "a\n  {% raw %}{{ not a tag }}{% if %}\n  {% endraw %}\nb {%- raw -%}  x  {%- endraw %} c", want: "a\n{{ not a tag }}{% if %}\nbx c"},
	{name: "line breaks and trailing newline", messages: chat,
		template: "a\r\nb\rc\n{% if true %}\r\nd{% endif %}\n", want: "a\nb\nc\nd"},
	{name: "template starting with indentation", messages: chat,
		template: "   {% if true %}x{% endif %}\n  y", want: "x  y"},
	{name: "brace before a tag", messages: chat,
		template: "a{\n{%- if true %}b{% endif %}{ {{ '{' }}", want: "a{b{ {"},
	{name: "multi-line tags", messages: chat,
		template: "{%\n  if true\n%}x{%\n  endif\n-%}\n\n{{\n  'y'\n}}", want: "xy"},
	{name: "string escapes", messages: chat,
		template: "{{ 'a\\rb\\x41\\u00e9\\101\\q\\'\\\\' }}|{{ \"\\\"\\t\" }}|{{ 'x\\\ny' }}", want: "a\rbAéA\\q'\\|\"\t|xy"},
	{name: "closing braces inside an expression", messages: chat,
		template: "{{ {'a': {'b': 1}} | tojson }}|{{ {'a': {'b': 1}}['a']['b'] }}", want: "{\"a\": {\"b\": 1}}|1"},
	{name: "raise_exception", messages: chat[1:],
		template: "{% if messages[0].role != 'system' %}{{ raise_exception('System message required.') }}{% endif %}",
		wantErr:  "chattemplate: System message required."},
	{name: "undefined function", messages: chat, template: "{{ nope_fn('x') }}", wantErr: "chattemplate: nope_fn"},
	{name: "undefined tojson", messages: chat, template: "{{ nope | tojson }}", wantErr: "chattemplate: "},
}

func TestFeatures(t *testing.T) {
	qwen, err := os.ReadFile("testdata/qwen-style.jinja")
	if err != nil {
		t.Fatal(err)
	}
	cases := append(featureCases, qwenCases(string(qwen))...)
	if os.Getenv("TFD_CHECK_WITH_PYTHON") != "" {
		checkWithPython(t, cases)
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			tmpl, err := New(tt.template, "<s>", "</s>")
			if err != nil {
				t.Fatal(err)
			}
			got, err := tmpl.Render(tt.messages, tt.opts)
			switch {
			case tt.wantErr != "" && err == nil:
				t.Fatalf("Render = %q, want an error containing %q", got, tt.wantErr)
			case tt.wantErr != "" && !strings.Contains(err.Error(), tt.wantErr):
				t.Fatalf("Render error = %q, want one containing %q", err, tt.wantErr)
			case tt.wantErr == "" && err != nil:
				t.Fatal(err)
			case got != tt.want:
				t.Errorf("Render =\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}

// pyResult is what hf_render.py reports for one case.
type pyResult struct{ Out, Error *string }

// renderWithPython renders the cases with Jinja2 as transformers sets it up.
func renderWithPython(t *testing.T, cases []featureCase) map[string]pyResult {
	type pyCase struct {
		Name     string          `json:"name"`
		Template string          `json:"template"`
		Context  json.RawMessage `json:"context"`
	}
	var in []pyCase
	for _, tt := range cases {
		ctx, err := pythonContext(tt.template, tt.messages, tt.opts)
		if err != nil {
			t.Fatal(err)
		}
		in = append(in, pyCase{tt.name, tt.template, ctx})
	}
	data, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("python3", "testdata/hf_render.py")
	cmd.Stdin = strings.NewReader(string(data))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hf_render.py: %v", err)
	}
	var results map[string]pyResult
	if err := json.Unmarshal(out, &results); err != nil {
		t.Fatal(err)
	}
	return results
}

// checkWithPython fails where the table's expectations differ from Jinja2's, printing Jinja2's
// output to paste.
func checkWithPython(t *testing.T, cases []featureCase) {
	results := renderWithPython(t, cases)
	for _, tt := range cases {
		r := results[tt.name]
		switch {
		case r.Error != nil && tt.wantErr == "":
			t.Errorf("%s: Jinja2 failed: %s", tt.name, *r.Error)
		case r.Error == nil && tt.wantErr != "":
			t.Errorf("%s: Jinja2 rendered %q, the table wants an error", tt.name, *r.Out)
		case r.Out != nil && *r.Out != tt.want:
			t.Errorf("%s: Jinja2 renders\n%q", tt.name, *r.Out)
		}
	}
}

// pythonContext returns the template variables Render would set, as a JSON object for
// hf_render.py.
func pythonContext(template string, messages []Message, opts Options) (json.RawMessage, error) {
	tmpl := &Template{bos: "<s>", eos: "</s>", thinking: readsThinking(template)}
	vars, err := tmpl.variables(messages, opts)
	if err != nil {
		return nil, err
	}
	delete(vars, toJSONFunc)
	var b strings.Builder
	b.WriteByte('{')
	enc := pyEncoder{itemSep: ", ", keySep: ": "}
	first := true
	for k, v := range vars {
		if !first {
			b.WriteString(", ")
		}
		first = false
		enc.encodeString(&b, k)
		b.WriteString(": ")
		if err := enc.encode(&b, v, 0); err != nil {
			return nil, err
		}
	}
	b.WriteByte('}')
	return json.RawMessage(b.String()), nil
}

// qwenCases render the Qwen-style template in testdata on plain and tool conversations.
func qwenCases(template string) []featureCase {
	tools := Options{Tools: []json.RawMessage{weatherTool}, AddGenerationPrompt: true}
	return []featureCase{
		{name: "qwen plain", template: template, messages: chat, opts: Options{AddGenerationPrompt: true}, want: "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n"},
		{name: "qwen no thinking", template: template, messages: chat,
			opts: Options{AddGenerationPrompt: true, Kwargs: map[string]any{"enable_thinking": false}}, want: "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"},
		{name: "qwen tools", template: template, messages: toolChat, opts: tools, want: "<|im_start|>system\nYou help.\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Météo for a city\", \"parameters\": {\"type\": \"object\", \"required\": [\"city\"], \"properties\": {\"city\": {\"type\": \"string\"}, \"days\": {\"type\": \"integer\", \"default\": 1.0, \"maximum\": 1000000.0, \"minimum\": 0.5}}}}}\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n<|im_start|>user\nWeather in Paris?<|im_end|>\n<|im_start|>assistant\n<think>\nCall the tool.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"z\": 1, \"city\": \"Lyon\"}}\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n18°C\n</tool_response>\n<tool_response>\n20°C\n</tool_response><|im_end|>\n<|im_start|>assistant\n"},
		{name: "qwen tools first turn", template: template, messages: toolChat[:2], opts: tools, want: "<|im_start|>system\nYou help.\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Météo for a city\", \"parameters\": {\"type\": \"object\", \"required\": [\"city\"], \"properties\": {\"city\": {\"type\": \"string\"}, \"days\": {\"type\": \"integer\", \"default\": 1.0, \"maximum\": 1000000.0, \"minimum\": 0.5}}}}}\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n<|im_start|>user\nWeather in Paris?<|im_end|>\n<|im_start|>assistant\n"},
		{name: "qwen bad role", template: template, messages: []Message{{Role: "robot", Content: "x"}},
			wantErr: "chattemplate: Unexpected message role: robot"},
	}
}
