package api

import (
	"encoding/json"
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
			content, calls := hermesSyntax.split(tt.text)
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
		sent, calls := pushPieces(&toolStream{syntax: hermesSyntax}, reply[:cut], reply[cut:])
		if sent != "Checking <tool the weather. " || len(calls) != 1 || calls[0].Function.Name != "w" {
			t.Fatalf("cut at %d: sent %q, calls %+v", cut, sent, calls)
		}
	}
}

// TestChatToolCalls: a chat request that offers tools gets the model's call as tool_calls with
// finish_reason tool_calls, whole and streamed; without tools the same text stays content.
func TestChatToolCalls(t *testing.T) {
	const said = `Sure.<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>`
	const tools = `"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}]`
	newEnv := func() *testEnv {
		env := newTestEnv(t, func(m *ServedModel, _ *HandlerOptions) { m.Context = 512 })
		env.host.script = append(env.tok.ids(said), tokEOS)
		return env
	}
	var whole struct {
		Choices []struct {
			Message struct {
				Content   *string    `json:"content"`
				ToolCalls []toolCall `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	w := newEnv().do("POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"Weather?"}],`+tools+`}`)
	if err := json.Unmarshal(w.Body.Bytes(), &whole); err != nil {
		t.Fatal(err)
	}
	m := whole.Choices[0].Message
	if whole.Choices[0].FinishReason != "tool_calls" || m.Content == nil || *m.Content != "Sure." || len(m.ToolCalls) != 1 ||
		m.ToolCalls[0].Function.Name != "get_weather" || m.ToolCalls[0].Function.Arguments != `{"city":"Paris"}` {
		t.Errorf("whole reply: %s", w.Body)
	}

	w = newEnv().do("POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"Weather?"}],"stream":true,`+tools+`}`)
	var content strings.Builder
	var calls []toolCall
	finish := ""
	for _, line := range strings.Split(w.Body.String(), "\n\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				Delta struct {
					Content   *string    `json:"content"`
					ToolCalls []toolCall `json:"tool_calls"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatal(err)
		}
		for _, ch := range c.Choices {
			if ch.Delta.Content != nil {
				content.WriteString(*ch.Delta.Content)
			}
			calls = mergeCallDeltas(t, calls, ch.Delta.ToolCalls)
			if ch.FinishReason != nil {
				finish = *ch.FinishReason
			}
		}
	}
	if content.String() != "Sure." || len(calls) != 1 || calls[0].Function.Name != "get_weather" || calls[0].Function.Arguments != `{"city":"Paris"}` || finish != "tool_calls" {
		t.Errorf("stream: content %q, calls %+v, finish %q\n%s", content.String(), calls, finish, w.Body)
	}

	w = newEnv().do("POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"Weather?"}]}`)
	whole.Choices = nil
	if err := json.Unmarshal(w.Body.Bytes(), &whole); err != nil {
		t.Fatal(err)
	}
	if m := whole.Choices[0].Message; m.Content == nil || *m.Content != said || len(m.ToolCalls) != 0 || whole.Choices[0].FinishReason != "stop" {
		t.Errorf("without tools: %s", w.Body)
	}
}

func TestOffersTools(t *testing.T) {
	tool := []json.RawMessage{json.RawMessage(`{"type":"function","function":{"name":"f"}}`)}
	for _, tt := range []struct {
		tools  []json.RawMessage
		choice string
		want   bool
	}{
		{nil, ``, false}, {tool, ``, true}, {tool, `"auto"`, true}, {tool, `"required"`, true},
		{tool, `"none"`, false}, {tool, `{"type":"function","function":{"name":"f"}}`, true},
	} {
		req := &chatRequest{Tools: tt.tools, ToolChoice: json.RawMessage(tt.choice)}
		if got := offersTools(req); got != tt.want {
			t.Errorf("tools %d, tool_choice %s: %v, want %v", len(tt.tools), tt.choice, got, tt.want)
		}
	}
}

// mergeCallDeltas adds a chunk's tool-call deltas to calls as an OpenAI client does: a delta
// with an id opens the call at its index (with its name), later ones append to its arguments.
func mergeCallDeltas(t *testing.T, calls []toolCall, deltas []toolCall) []toolCall {
	t.Helper()
	for _, d := range deltas {
		if d.Index == nil {
			t.Fatalf("a tool-call delta without index: %+v", d)
		}
		i := *d.Index
		switch {
		case d.ID != "":
			if i != len(calls) || d.Function.Name == "" || d.Type != "function" || d.Function.Arguments != "" {
				t.Fatalf("call %d opens with %+v, after %d calls", i, d, len(calls))
			}
			calls = append(calls, toolCall{ID: d.ID, Type: d.Type})
			calls[i].Function.Name = d.Function.Name
		case i < len(calls) && d.Function.Name == "":
			calls[i].Function.Arguments += d.Function.Arguments
		default:
			t.Fatalf("delta %+v for a call not opened", d)
		}
	}
	return calls
}

// pushPieces streams pieces through ts and finishes it, returning all the content it let out and
// all the calls, in order.
func pushPieces(ts *toolStream, pieces ...string) (string, []toolCall) {
	var sent strings.Builder
	var calls []toolCall
	for _, p := range pieces {
		text, cs := ts.push(p)
		sent.WriteString(text)
		calls = append(calls, cs...)
	}
	rest, cs := ts.finish()
	sent.WriteString(rest)
	return sent.String(), append(calls, cs...)
}

// TestToolStreamSendsEachCallWhenItCloses: a Hermes call goes out as soon as its closing tag
// has come, not at the reply's end; white space between and after calls is not sent as content
// (a whole reply trims it), and a block that is no call goes out as text once it closes.
func TestToolStreamSendsEachCallWhenItCloses(t *testing.T) {
	ts := &toolStream{syntax: hermesSyntax}
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
		content, calls := ts.push(st.piece)
		var names []string
		for _, c := range calls {
			names = append(names, c.Function.Name)
		}
		if content != st.content || strings.Join(names, ",") != strings.Join(st.calls, ",") {
			t.Fatalf("piece %d %q: sent %q and calls %v; want %q and %v", i, st.piece, content, names, st.content, st.calls)
		}
	}
	if rest, calls := ts.finish(); rest != "" || len(calls) != 0 {
		t.Fatalf("finish: %q %v", rest, calls)
	}

	// Every two-piece split of a reply of two calls streams what the whole reply holds.
	reply := "Sure.\n<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>\n<tool_call>{\"name\": \"b\", \"arguments\": {\"x\": 1}}</tool_call>\n"
	wantContent, wantCalls := hermesSyntax.split(reply)
	for cut := range len(reply) + 1 {
		sent, calls := pushPieces(&toolStream{syntax: hermesSyntax}, reply[:cut], reply[cut:])
		if strings.TrimSpace(sent) != wantContent || len(calls) != len(wantCalls) || calls[0].Function.Name != "a" || calls[1].Function.Arguments != `{"x":1}` {
			t.Fatalf("cut at %d: sent %q, calls %+v", cut, sent, calls)
		}
	}
}
