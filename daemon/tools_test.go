package daemon

import (
	"strings"
	"testing"
)

// TestToolTurnsOnBundled: the bundled model's template takes a tool round trip (an assistant
// turn of tool calls with null content, then role "tool" results), renders the tools and the
// results as the template test pins, and the reply's prompt is those tokens.
func TestToolTurnsOnBundled(t *testing.T) {
	d := startDaemon(t, "[sessions]\nparallel = 2\n")
	const chat = `"messages":[{"role":"user","content":"Weather in Oslo?"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Oslo\"}"}}]},
		{"role":"tool","tool_call_id":"call_1","content":"{\"temp\": 12}"}],
		"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}]`
	var rendered struct {
		Tokens []int32
		Prompt string
	}
	if code := postJSON(t, d.url+"/tokenize", `{`+chat+`}`, &rendered); code != 200 {
		t.Fatalf("tokenize: %d", code)
	}
	for _, part := range []string{"<tools>\n{\"type\": \"function\"", "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\":\"Oslo\"}}\n</tool_call>", "<tool_response>\n{\"temp\": 12}\n</tool_response>"} {
		if !strings.Contains(rendered.Prompt, part) {
			t.Errorf("the prompt lacks %q:\n%s", part, rendered.Prompt)
		}
	}
	var reply struct {
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		}
	}
	if code := postJSON(t, d.url+"/v1/chat/completions", `{`+chat+`,"max_tokens":4}`, &reply); code != 200 || reply.Usage.PromptTokens != len(rendered.Tokens) {
		t.Fatalf("chat: %d, %d prompt tokens; tokenize gave %d", code, reply.Usage.PromptTokens, len(rendered.Tokens))
	}
}
