package toolcall

import (
	"strings"
	"testing"
)

func TestSplitToolCalls(t *testing.T) {
	tests := []struct {
		name, text, content string
		calls               []string // name(arguments)
	}{
		{"no call", "just text", "just text", nil},
		{"one call", "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
			"Let me look.", []string{`get_weather({"city":"Paris"})`}},
		{"two calls, string arguments", `<tool_call>{"name":"a","arguments":"{\"x\": 1}"}</tool_call><tool_call>{"name":"b"}</tool_call>`,
			"", []string{`a({"x":1})`, `b({})`}},
		{"malformed stays text", `<tool_call>{"name": </tool_call> after`, `<tool_call>{"name": </tool_call> after`, nil},
		{"unterminated stays text", `<tool_call>{"name":"a","arguments":{}}`, `<tool_call>{"name":"a","arguments":{}}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			content, calls := Hermes.Split(tt.text)
			var got []string
			for _, c := range calls {
				if c.Type != "function" || !strings.HasPrefix(c.ID, "call") {
					t.Errorf("call %+v", c)
				}
				got = append(got, c.Function.Name+"("+c.Function.Arguments+")")
			}
			if content != tt.content || strings.Join(got, " ") != strings.Join(tt.calls, " ") {
				t.Errorf("content %q, calls %v; want %q, %v", content, got, tt.content, tt.calls)
			}
		})
	}
}

// TestToolStreamHoldsOnlyWhatMayBeACall feeds a reply in every split into two pieces: the text
// before a call is sent as it comes, nothing of the call is, and finish finds the call.
func TestToolStreamHoldsOnlyWhatMayBeACall(t *testing.T) {
	reply := "Checking <tool the weather. <tool_call>{\"name\":\"w\",\"arguments\":{}}</tool_call>"
	for cut := range len(reply) + 1 {
		sent, calls := pushPieces(&Stream{syntax: Hermes}, reply[:cut], reply[cut:])
		if sent != "Checking <tool the weather. " || len(calls) != 1 || calls[0].Function.Name != "w" {
			t.Fatalf("cut at %d: sent %q, calls %+v", cut, sent, calls)
		}
	}
}

// pushPieces streams pieces through ts and finishes it, returning all the content it let out and
// all the calls, in order.
func pushPieces(ts *Stream, pieces ...string) (string, []Call) {
	var sent strings.Builder
	var calls []Call
	for _, p := range pieces {
		text, cs := ts.Push(p)
		sent.WriteString(text)
		calls = append(calls, cs...)
	}
	rest, cs := ts.Finish()
	sent.WriteString(rest)
	return sent.String(), append(calls, cs...)
}

// TestToolStreamSendsEachCallWhenItCloses: a Hermes call goes out as soon as its closing tag
// has come, not at the reply's end; white space between and after calls is not sent as content
// (a whole reply trims it), and a block that is no call goes out as text once it closes.
func TestToolStreamSendsEachCallWhenItCloses(t *testing.T) {
	ts := &Stream{syntax: Hermes}
	steps := []struct {
		piece, content string
		calls          []string
	}{
		{"Let me check.\n", "Let me check.\n", nil},
		{`<tool_call>{"name": "a", "arguments": {}}`, "", nil},
		{"</tool_call>\n", "", []string{"a"}},
		{`<tool_call>{"name": "b", "arguments": {"x": 1}}</tool_call>`, "", []string{"b"}},
		{"\n<tool_call>oops</tool_call> ok", "\n\n<tool_call>oops</tool_call> ok", nil}, // the white space between the calls too
	}
	for i, st := range steps {
		content, calls := ts.Push(st.piece)
		var names []string
		for _, c := range calls {
			names = append(names, c.Function.Name)
		}
		if content != st.content || strings.Join(names, ",") != strings.Join(st.calls, ",") {
			t.Fatalf("piece %d %q: sent %q and calls %v; want %q and %v", i, st.piece, content, names, st.content, st.calls)
		}
	}
	if rest, calls := ts.Finish(); rest != "" || len(calls) != 0 {
		t.Fatalf("finish: %q %v", rest, calls)
	}

	// Every two-piece split of a reply of two calls streams what the whole reply holds.
	reply := "Sure.\n<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>\n<tool_call>{\"name\": \"b\", \"arguments\": {\"x\": 1}}</tool_call>\n"
	wantContent, wantCalls := Hermes.Split(reply)
	for cut := range len(reply) + 1 {
		sent, calls := pushPieces(&Stream{syntax: Hermes}, reply[:cut], reply[cut:])
		if strings.TrimSpace(sent) != wantContent || len(calls) != len(wantCalls) || calls[0].Function.Name != "a" || calls[1].Function.Arguments != `{"x":1}` {
			t.Fatalf("cut at %d: sent %q, calls %+v", cut, sent, calls)
		}
	}
}
