package api

import (
	"bytes"
	"encoding/json"
	"strings"
)

// Tool calls in replies. Qwen-family models, and others trained on the Hermes format, answer a
// request that offers tools by writing each call as
//
//	<tool_call>
//	{"name": "get_weather", "arguments": {"city": "Paris"}}
//	</tool_call>
//
// in their text. When a chat request offers tools, tfd takes such blocks out of the reply and
// returns them as OpenAI's tool_calls (finish_reason "tool_calls"); a block that is not a
// well-formed call stays in the text as the model wrote it.

const (
	toolCallOpen  = "<tool_call>"
	toolCallClose = "</tool_call>"
)

// toolCall is one call in OpenAI's shape. Index is set in stream deltas only.
type toolCall struct {
	Index    *int   `json:"index,omitempty"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"` // a JSON object, as a string
	} `json:"function"`
}

// splitToolCalls takes the well-formed tool-call blocks out of text: it returns the text around
// them (trimmed) and the calls, in order.
func splitToolCalls(text string) (string, []toolCall) {
	var content strings.Builder
	var calls []toolCall
	for {
		start := strings.Index(text, toolCallOpen)
		if start < 0 {
			break
		}
		end := strings.Index(text[start:], toolCallClose)
		if end < 0 {
			break // an unterminated block (the reply ran out) stays text
		}
		body := text[start+len(toolCallOpen) : start+end]
		block := text[:start+end+len(toolCallClose)]
		text = text[start+end+len(toolCallClose):]
		call, ok := parseToolCall(body)
		if !ok {
			content.WriteString(block)
			continue
		}
		content.WriteString(block[:start])
		calls = append(calls, call)
	}
	content.WriteString(text)
	return strings.TrimSpace(content.String()), calls
}

// parseToolCall reads one block's JSON: a name and arguments given as an object (or as a string
// holding one).
func parseToolCall(body string) (toolCall, bool) {
	var raw struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(body)), &raw); err != nil || raw.Name == "" {
		return toolCall{}, false
	}
	args := bytes.TrimSpace(raw.Arguments)
	var s string
	if json.Unmarshal(args, &s) == nil {
		args = []byte(s) // arguments already a string
	}
	if len(args) == 0 || string(args) == "null" {
		args = []byte("{}")
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, args); err != nil {
		return toolCall{}, false
	}
	call := toolCall{ID: newID("call"), Type: "function"}
	call.Function.Name, call.Function.Arguments = raw.Name, compact.String()
	return call, true
}

// toolStream sends a streamed reply's text on until a tool call may begin, and holds the rest:
// text that could be the start of "<tool_call>" waits for the next piece, and everything from a
// "<tool_call>" on waits for the end, when finish splits it.
type toolStream struct {
	pending string // a tail that may begin "<tool_call>"
	held    strings.Builder
	inCall  bool
}

// push takes the next piece of the reply and returns what may be sent as content now.
func (t *toolStream) push(text string) string {
	if t.inCall {
		t.held.WriteString(text)
		return ""
	}
	text = t.pending + text
	t.pending = ""
	if i := strings.Index(text, toolCallOpen); i >= 0 {
		t.inCall = true
		t.held.WriteString(text[i:])
		return text[:i]
	}
	keep := partialSuffix(text, toolCallOpen)
	t.pending = text[len(text)-keep:]
	return text[:len(text)-keep]
}

// finish returns the text still held that is content after all, and the calls.
func (t *toolStream) finish() (string, []toolCall) {
	if !t.inCall {
		return t.pending, nil
	}
	content, calls := splitToolCalls(t.held.String())
	return content, calls
}

// partialSuffix returns the length of the longest suffix of text that is a proper prefix of tag.
func partialSuffix(text, tag string) int {
	for n := min(len(text), len(tag)-1); n > 0; n-- {
		if strings.HasSuffix(text, tag[:n]) {
			return n
		}
	}
	return 0
}
