package chattemplate

import (
	"encoding/json"
	"os"
	"regexp"
	"testing"
)

// GPT-OSS's template (testdata/gpt-oss.jinja) is openai/gpt-oss-20b's, as the GGUF files of
// that model carry it (taken from github.com/ardanlabs/jinja's testdata, gpt-oss-20b-Q8_0.jinja):
// the harmony format, a system turn of its own (model identity, date, reasoning effort,
// channels), the client's system message as a developer turn with the tools as a TypeScript
// namespace, tool calls as commentary to=functions.NAME, and tool results as messages from
// functions.NAME. These cases are checked against Jinja2 with TFD_CHECK_WITH_PYTHON=1.

// gptOssSystem is the system turn the template opens with, at reasoning effort effort, with the
// date as datePlaceholder.
func gptOssSystem(effort string, tools bool) string {
	channels := "# Valid channels: analysis, commentary, final. Channel must be included for every message."
	if tools {
		channels += "\nCalls to these tools must go to the commentary channel: 'functions'."
	}
	return "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n" +
		"Knowledge cutoff: 2024-06\n" + datePlaceholder + "\n\nReasoning: " + effort + "\n\n" + channels + "<|end|>"
}

// datePlaceholder stands for the date line, which strftime_now fills with today's date.
const datePlaceholder = "Current date: <today>"

var dateLine = regexp.MustCompile(`Current date: \d{4}-\d{2}-\d{2}`)

func gptOssCases(template string) []featureCase {
	oneCall := []Message{
		{Role: "system", Content: "You help."},
		{Role: "user", Content: "Weather in Paris?"},
		{Role: "assistant", ReasoningContent: "Call the tool.", ToolCalls: json.RawMessage(
			`[{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]`)},
		{Role: "tool", Content: "18°C", ToolCallID: "c1"},
	}
	tools := []json.RawMessage{weatherTool}
	return []featureCase{
		{name: "gpt-oss: a chat at reasoning effort high", template: template, messages: chat[:2],
			opts: Options{AddGenerationPrompt: true, Kwargs: map[string]any{"reasoning_effort": "high"}},
			want: gptOssSystem("high", false) + "<|start|>developer<|message|># Instructions\n\nBe brief.\n\n<|end|>" +
				"<|start|>user<|message|>Hi<|end|><|start|>assistant"},
		// The call's reasoning is replayed (as thinking: no final answer follows it).
		{name: "gpt-oss: a tool called and answered", template: template, messages: oneCall,
			opts: Options{AddGenerationPrompt: true, Tools: tools},
			want: gptOssSystem("medium", true) + "<|start|>developer<|message|># Instructions\n\nYou help.\n\n# Tools\n\n## functions\n\nnamespace functions {\n\n" +
				"// Météo for a city\ntype get_weather = (_: {\ncity: string,\ndays?: number, // default: 1.0,\n}) => any;\n\n} // namespace functions<|end|>" +
				"<|start|>user<|message|>Weather in Paris?<|end|>" +
				"<|start|>assistant<|channel|>analysis<|message|>Call the tool.<|end|>" +
				"<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{\"city\": \"Paris\"}<|call|>" +
				"<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>\"18°C\"<|end|><|start|>assistant"},
	}
}

// TestGptOssTemplate renders GPT-OSS's own template, its date line set aside.
func TestGptOssTemplate(t *testing.T) {
	src, err := os.ReadFile("testdata/gpt-oss.jinja")
	if err != nil {
		t.Fatal(err)
	}
	cases := gptOssCases(string(src))
	if os.Getenv("TFD_CHECK_WITH_PYTHON") != "" {
		results := renderWithPython(t, cases)
		for _, tt := range cases {
			switch r := results[tt.name]; {
			case r.Error != nil:
				t.Errorf("%s: Jinja2 failed: %s", tt.name, *r.Error)
			case dateLine.ReplaceAllString(*r.Out, datePlaceholder) != tt.want:
				t.Errorf("%s: Jinja2 renders\n%q", tt.name, *r.Out)
			}
		}
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			tmpl, err := New(tt.template, "<|startoftext|>", "<|return|>")
			if err != nil {
				t.Fatal(err)
			}
			got, err := tmpl.Render(tt.messages, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if got = dateLine.ReplaceAllString(got, datePlaceholder); got != tt.want {
				t.Errorf("Render =\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}
