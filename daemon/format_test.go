package daemon

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestJSONSchemaOnTheBundledModel: over HTTP, the bundled model's replies under a json_schema
// of bounded values (booleans, enums, a bounded array of them) always finish, and each one
// unmarshals into the Go struct the schema describes, greedy and sampled, drafted and not.
func TestJSONSchemaOnTheBundledModel(t *testing.T) {
	d := startDaemon(t, "[sessions]\nparallel = 2\n")
	schema := `{"type":"object","properties":{"ok":{"type":"boolean"},"color":{"enum":["red","green","blue"]},"sizes":{"type":"array","items":{"enum":["S","M","L"]},"minItems":1,"maxItems":3},"note":{"type":"null"}},"required":["ok","color","sizes"],"additionalProperties":false}`
	for _, extra := range []string{`"temperature":0`, `"temperature":0.8,"seed":7`, `"temperature":1,"seed":9,"draft":false`} {
		body := `{"messages":[{"role":"user","content":"Describe a shirt as JSON."}],"max_tokens":200,` + extra +
			`,"response_format":{"type":"json_schema","json_schema":{"name":"shirt","strict":true,"schema":` + schema + `}}}`
		resp, err := http.Post(d.url+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var out struct {
			Choices []struct {
				Message      struct{ Content string }
				FinishReason string `json:"finish_reason"`
			}
		}
		err = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || len(out.Choices) != 1 {
			t.Fatalf("%s: status %d: %v", extra, resp.StatusCode, err)
		}
		var shirt struct {
			OK    *bool    `json:"ok"`
			Color string   `json:"color"`
			Sizes []string `json:"sizes"`
			Note  any      `json:"note"`
		}
		content := out.Choices[0].Message.Content
		dec := json.NewDecoder(strings.NewReader(content))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&shirt); err != nil || out.Choices[0].FinishReason != "stop" || shirt.OK == nil || shirt.Color == "" || len(shirt.Sizes) == 0 {
			t.Fatalf("%s: reply %q (finish %q) does not make a shirt: %v", extra, content, out.Choices[0].FinishReason, err)
		}
		t.Logf("%s: %s", extra, content)
	}
}

// TestToolChoiceOnTheBundledModel: over HTTP, tool_choice "required" makes the bundled model
// (which never learnt tools) answer with one call whose arguments follow the tool's parameters.
func TestToolChoiceOnTheBundledModel(t *testing.T) {
	d := startDaemon(t, "[sessions]\nparallel = 2\n")
	body := `{"messages":[{"role":"user","content":"Paint it."}],"max_tokens":100,"temperature":0,` +
		`"tools":[{"type":"function","function":{"name":"paint","parameters":{"type":"object","properties":{"color":{"enum":["red","blue"]},"coats":{"enum":[1,2]}},"required":["color","coats"]}}}],"tool_choice":"required"}`
	resp, err := http.Post(d.url+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Choices []struct {
			Message struct {
				ToolCalls []struct {
					Function struct{ Name, Arguments string }
				} `json:"tool_calls"`
			}
			FinishReason string `json:"finish_reason"`
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || len(out.Choices) != 1 {
		t.Fatalf("status %d: %v", resp.StatusCode, err)
	}
	c := out.Choices[0]
	if c.FinishReason != "tool_calls" || len(c.Message.ToolCalls) != 1 || c.Message.ToolCalls[0].Function.Name != "paint" {
		t.Fatalf("reply %+v: want one call of paint", c)
	}
	var args struct {
		Color string `json:"color"`
		Coats int    `json:"coats"`
	}
	if err := json.Unmarshal([]byte(c.Message.ToolCalls[0].Function.Arguments), &args); err != nil || args.Color == "" || args.Coats == 0 {
		t.Fatalf("arguments %s: %v", c.Message.ToolCalls[0].Function.Arguments, err)
	}
	t.Logf("paint(%s)", c.Message.ToolCalls[0].Function.Arguments)
}
