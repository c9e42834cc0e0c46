package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"tfd/daemon/api/toolcall"
	"tfd/grammar"
	"tfd/scheduler"
)

// forcedToolCall returns the constraint that makes a chat reply one tool call when tool_choice
// asks for one: "required" (a call of any listed tool) or {"type":"function","function":
// {"name":…}} (a call of that tool). The call is written in Qwen's and the Hermes form that
// splitToolCalls reads back, its arguments following the tool's parameters schema. Other
// tool_choice values ("auto", "none", absent) constrain nothing.
func (h *Handler) forcedToolCall(req *chatRequest) (scheduler.Constraint, *apiError) {
	named, required, e := parseToolChoice(req.ToolChoice)
	if e != nil || (!required && named == "") {
		return nil, e
	}
	if len(req.Tools) == 0 {
		return nil, badRequest("tool_choice", "tool_choice asks for a tool call but the request lists no tools: add tools, or set tool_choice to \"auto\"")
	}
	if rf := req.ResponseFormat; rf != nil && rf.Type != "" && rf.Type != "text" {
		return nil, badRequest("tool_choice", "tool_choice asks for a tool call and response_format for %s: a reply cannot be both; drop one", rf.Type)
	}
	var tools []grammar.Tool
	for i, raw := range req.Tools {
		var t struct {
			Function struct {
				Name       string          `json:"name"`
				Parameters json.RawMessage `json:"parameters"`
			} `json:"function"`
		}
		if err := json.Unmarshal(raw, &t); err != nil || t.Function.Name == "" {
			return nil, badRequest(fmt.Sprintf("tools[%d]", i), "tools[%d] must be {\"type\":\"function\",\"function\":{\"name\":…,\"parameters\":{…}}}", i)
		}
		if named == "" || t.Function.Name == named {
			if p := bytes.TrimSpace(t.Function.Parameters); string(p) == "null" {
				t.Function.Parameters = nil
			}
			tools = append(tools, grammar.Tool{Name: t.Function.Name, Parameters: t.Function.Parameters})
		}
	}
	if len(tools) == 0 {
		return nil, badRequest("tool_choice", "tool_choice names the function %q, which is not among the request's tools", named)
	}
	g, err := grammar.ToolCall(toolcall.HermesOpen+"\n", "\n"+toolcall.HermesClose, tools)
	if err != nil {
		// The error names the tool, and the keyword and where it stands in its parameters.
		return nil, badRequest("tools", "tool_choice %s cannot be enforced: %s; simplify the parameters or use tool_choice \"auto\"", toolChoiceName(named), strings.Replace(err.Error(), "grammar: ", "", 1))
	}
	if h.served.Vocab == nil {
		return nil, badRequest("tool_choice", "the model %q cannot be held to a tool call (its vocabulary is not laid out for grammars): use tool_choice \"auto\"", h.served.Name)
	}
	return grammar.NewMatcher(g, h.served.Vocab()), nil
}

// parseToolChoice reads tool_choice: the function an object names, or whether it is "required".
func parseToolChoice(raw json.RawMessage) (named string, required bool, e *apiError) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return "", false, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		switch s {
		case "auto", "none":
			return "", false, nil
		case "required":
			return "", true, nil
		}
		return "", false, badRequest("tool_choice", "tool_choice %q is unknown: want \"auto\", \"none\", \"required\" or {\"type\":\"function\",\"function\":{\"name\":…}}", s)
	}
	var o struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &o); err != nil || o.Function.Name == "" {
		return "", false, badRequest("tool_choice", "tool_choice must be \"auto\", \"none\", \"required\" or {\"type\":\"function\",\"function\":{\"name\":…}}")
	}
	return o.Function.Name, false, nil
}

func toolChoiceName(named string) string {
	if named == "" {
		return `"required"`
	}
	return fmt.Sprintf("naming %q", named)
}
