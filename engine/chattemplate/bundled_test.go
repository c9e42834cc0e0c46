package chattemplate

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// The bundled model's template is tfd's own (tools/train), so no transformers fixture covers
// it. These are its renders, checked against Jinja2 as transformers sets it up with
// TFD_CHECK_WITH_PYTHON=1: chats without tools render as the model was trained (ChatML), and
// tools add Qwen's and Hermes' system block, <tool_call> turns and <tool_response> results, the
// syntax the HTTP layer parses for a template of no other family.

const bundledConfig = "../../models/gopher/tokenizer_config.json"

// bundledToolsBlock is the system block that lists tools; tools is one JSON line per tool.
func bundledToolsBlock(system, tools string) string {
	if system != "" {
		system += "\n\n"
	}
	return "<|im_start|>system\n" + system + "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n" +
		"You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n" + tools + "\n</tools>\n\n" +
		"For each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n" +
		"<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n"
}

func bundledCases(source string) []featureCase {
	getWeather := json.RawMessage(`{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}`)
	getTime := json.RawMessage(`{"type": "function", "function": {"name": "get_time"}}`)
	gen := Options{AddGenerationPrompt: true}
	withTools := func(tools ...json.RawMessage) Options { return Options{AddGenerationPrompt: true, Tools: tools} }
	return []featureCase{
		{name: "bundled: a chat as trained", template: source, messages: chat, opts: gen,
			want: "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\nhmm\n</think>\n\nHello!<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n"},
		{name: "bundled: tools offered", template: source, messages: []Message{{Role: "user", Content: "Weather in Zürich?"}}, opts: withTools(getWeather),
			want: bundledToolsBlock("", string(getWeather)) + "<|im_start|>user\nWeather in Zürich?<|im_end|>\n<|im_start|>assistant\n"},
		{name: "bundled: system beside tools", template: source, messages: chat[:2], opts: withTools(getWeather, getTime),
			want: bundledToolsBlock("Be brief.", string(getWeather)+"\n"+string(getTime)) + "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"},
		{name: "bundled: round trip", template: source, opts: withTools(getWeather), messages: []Message{
			{Role: "user", Content: "Weather in Zürich and Oslo?"},
			{Role: "assistant", ToolCalls: json.RawMessage(`[{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Zürich\"}"}},
				{"id": "call_2", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]`)},
			{Role: "tool", Content: `{"temp": 21}`, ToolCallID: "call_1"},
			{Role: "tool", Content: `{"temp": 12}`, ToolCallID: "call_2"}},
			want: bundledToolsBlock("", string(getWeather)) + "<|im_start|>user\nWeather in Zürich and Oslo?<|im_end|>\n" +
				"<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Zürich\"}}\n</tool_call>\n" +
				"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call><|im_end|>\n" +
				"<|im_start|>user\n<tool_response>\n{\"temp\": 21}\n</tool_response>\n<tool_response>\n{\"temp\": 12}\n</tool_response><|im_end|>\n" +
				"<|im_start|>assistant\n"},
		{name: "bundled: content beside a call, arguments an object", template: source, opts: gen, messages: []Message{
			{Role: "user", Content: "Time?"},
			{Role: "assistant", Content: "Let me look.", ToolCalls: json.RawMessage(`[{"type": "function", "function": {"name": "get_time", "arguments": {"zone": "UTC"}}}]`)},
			{Role: "tool", Content: "12:00"},
			{Role: "assistant", Content: "It is noon."}},
			want: "<|im_start|>user\nTime?<|im_end|>\n<|im_start|>assistant\nLet me look.\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\": \"UTC\"}}\n</tool_call><|im_end|>\n" +
				"<|im_start|>user\n<tool_response>\n12:00\n</tool_response><|im_end|>\n<|im_start|>assistant\nIt is noon.<|im_end|>\n<|im_start|>assistant\n"},
		{name: "bundled: unknown role", template: source, opts: gen, messages: []Message{{Role: "ipython", Content: "x"}}, wantErr: "Unsupported role: ipython"},
	}
}

func TestBundledTemplate(t *testing.T) {
	data, err := os.ReadFile(bundledConfig)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		ChatTemplate string `json:"chat_template"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	cases := bundledCases(cfg.ChatTemplate)
	if os.Getenv("TFD_CHECK_WITH_PYTHON") != "" {
		checkWithPython(t, cases)
	}
	tmpl, err := FromTokenizerConfig(data)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tmpl.Render(tt.messages, tt.opts)
			switch {
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("Render = %q, %v; want an error containing %q", got, err, tt.wantErr)
			case tt.wantErr == "" && err != nil:
				t.Fatal(err)
			case got != tt.want:
				t.Errorf("Render =\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}
