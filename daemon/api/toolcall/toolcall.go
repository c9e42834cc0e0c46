// Package toolcall reads the tool calls a model writes in its reply text, in the syntax its chat
// template teaches it — Qwen's and Hermes' <tool_call> blocks, Llama 3's JSON calls, Mistral's
// [TOOL_CALLS] — for whole replies and for streams, where text that may begin a call is held
// back until the call is whole; and GPT-OSS's harmony replies, whose channels it tells apart
// (reasoning, content) along with their calls (harmony.go).
package toolcall

import (
	"bytes"
	"encoding/json"
	"strings"
)

// Tool calls in replies. A chat request that offers tools (and whose tool_choice is not "none")
// gets the calls the model writes in its text back as OpenAI's tool_calls, with finish_reason
// "tool_calls". How a model writes a call depends on its family, which syntax.go tells from
// the chat template: Qwen's and Hermes' <tool_call> blocks, Llama 3's JSON objects, Mistral's
// [TOOL_CALLS]. Text that is not a well-formed call stays in the reply as the model wrote it.

// HermesOpen and HermesClose are the tags around a call in Qwen's and Hermes' syntax.
const (
	HermesOpen  = "<tool_call>"
	HermesClose = "</tool_call>"
)

// Call is one call in OpenAI's shape. Index is set in stream deltas only; a stream's first
// delta of a call carries its id, type and name, and the next its arguments, so ID, Type and
// Name are left out where empty.
type Call struct {
	Index    *int   `json:"index,omitempty"`
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"` // a JSON object, as a string
	} `json:"function"`
}

// newCall makes a call of name with arguments args: a JSON object, or a JSON string holding one,
// or nothing (no arguments: {}). It reports false when args is none of these, so a call always
// carries arguments that parse as a JSON object.
func newCall(id, name string, args json.RawMessage) (Call, bool) {
	if name == "" {
		return Call{}, false
	}
	args = bytes.TrimSpace(args)
	var s string
	if json.Unmarshal(args, &s) == nil {
		args = bytes.TrimSpace([]byte(s)) // arguments already a string
	}
	if len(args) == 0 || string(args) == "null" {
		args = []byte("{}")
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, args); err != nil || compact.Bytes()[0] != '{' {
		return Call{}, false
	}
	call := Call{ID: id, Type: "function"}
	call.Function.Name, call.Function.Arguments = name, compact.String()
	return call, true
}

// callJSON is a call written as one JSON object; Llama names the arguments "parameters".
type callJSON struct {
	Name       string          `json:"name"`
	Arguments  json.RawMessage `json:"arguments"`
	Parameters json.RawMessage `json:"parameters"`
	ID         string          `json:"id"`
}

func (c callJSON) call(id string) (Call, bool) {
	args := c.Arguments
	if len(args) == 0 {
		args = c.Parameters
	}
	return newCall(id, c.Name, args)
}

// splitHermes takes the well-formed <tool_call> blocks out of text:
//
//	<tool_call>
//	{"name": "get_weather", "arguments": {"city": "Paris"}}
//	</tool_call>
//
// It returns the text around them (trimmed) and the calls, in order.
func splitHermes(text string, newID func() string) (string, []Call) {
	const open, close = HermesOpen, HermesClose
	var content strings.Builder
	var calls []Call
	for {
		start := strings.Index(text, open)
		if start < 0 {
			break
		}
		end := strings.Index(text[start:], close)
		if end < 0 {
			break // an unterminated block (the reply ran out) stays text
		}
		body := text[start+len(open) : start+end]
		block := text[:start+end+len(close)]
		text = text[start+end+len(close):]
		var raw callJSON
		call, ok := Call{}, json.Unmarshal([]byte(strings.TrimSpace(body)), &raw) == nil
		if ok {
			call, ok = raw.call(newID())
		}
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

// Stream sends a streamed reply's text on until a tool call may begin, and holds the rest:
// text that could be the start of a call's marker waits for the next piece, and a call waits
// until it is known to be one: until its closing tag, in a syntax that has one (Hermes'), else
// until the reply ends. So a call is sent whole, its arguments valid JSON, and a block that is
// no call is sent as the text it is.
type Stream struct {
	syntax  *Syntax
	pending string // a tail that may begin a call
	held    strings.Builder
	inCall  bool
	spoke   bool   // text other than white space has been sent
	called  bool   // a call has been sent
	space   string // white space after a call, sent only if more text follows (a whole reply is trimmed)
}

// NewStream returns a Stream that takes the calls of syntax out of a reply.
func NewStream(syntax *Syntax) *Stream { return &Stream{syntax: syntax} }

// Push takes the next piece of the reply and returns what may be sent now: content, and the
// calls that closed.
func (t *Stream) Push(text string) (string, []Call) {
	var content strings.Builder
	var calls []Call
	for {
		if t.inCall {
			t.held.WriteString(text)
			block, rest, closed := t.closedCall()
			if !closed {
				return content.String(), calls
			}
			if _, cs := t.syntax.Split(block); len(cs) > 0 {
				calls, t.called = append(calls, cs...), true
			} else {
				content.WriteString(t.space + block) // not a call after all: it is text
				t.space, t.spoke = "", true
			}
			text = rest
			continue
		}
		text = t.pending + text
		t.pending = ""
		if at := t.syntax.begins(text, !t.spoke); at >= 0 {
			t.write(&content, text[:at])
			t.inCall = true
			text = text[at:]
			continue
		}
		keep := t.syntax.mayBegin(text, !t.spoke)
		t.pending = text[len(text)-keep:]
		t.write(&content, text[:len(text)-keep])
		return content.String(), calls
	}
}

// closedCall takes the first call held out of the hold once its closing tag has come, with
// the text after it; it reports false while the call is open, or when the syntax has no tag.
func (t *Stream) closedCall() (block, rest string, closed bool) {
	held := t.held.String()
	i := strings.Index(held, t.syntax.closer)
	if t.syntax.closer == "" || i < 0 {
		return "", "", false
	}
	t.held.Reset()
	t.inCall = false
	end := i + len(t.syntax.closer)
	return held[:end], held[end:], true
}

// write adds text to the content to send, holding white space that follows a call.
func (t *Stream) write(content *strings.Builder, text string) {
	if t.called && strings.TrimSpace(text) == "" {
		t.space += text
		return
	}
	content.WriteString(t.space + text)
	t.space = ""
	t.spoke = t.spoke || strings.TrimSpace(text) != ""
}

// Finish returns the text still held that is content after all, and the calls.
func (t *Stream) Finish() (string, []Call) {
	if !t.inCall {
		if t.called && strings.TrimSpace(t.pending) == "" {
			return "", nil
		}
		return t.space + t.pending, nil
	}
	content, calls := t.syntax.Split(t.held.String())
	if content != "" {
		content = t.space + content
	}
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

// Deltas returns calls as a stream sends them, as OpenAI does: for each call one delta with
// its index (from first on), id, type, name and empty arguments, then one with its index and
// its arguments.
func Deltas(calls []Call, first int) [][]Call {
	var out [][]Call
	for k, c := range calls {
		i := first + k
		head := Call{Index: &i, ID: c.ID, Type: c.Type}
		head.Function.Name = c.Function.Name
		args := Call{Index: &i}
		args.Function.Arguments = c.Function.Arguments
		out = append(out, []Call{head}, []Call{args})
	}
	return out
}
