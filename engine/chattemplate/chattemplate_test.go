package chattemplate

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
)

func TestNewSyntaxError(t *testing.T) {
	for _, src := range []string{"{% for m in messages %}x", "{{ x ", "{% endfor %}"} {
		_, err := New(src, "", "")
		if err == nil || !strings.HasPrefix(err.Error(), "chattemplate: parsing the chat template: ") {
			t.Errorf("New(%q) error = %v, want a parse error", src, err)
		}
	}
}

func TestRenderInputErrors(t *testing.T) {
	tmpl, err := New(chatML, "", "")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		messages []Message
		opts     Options
		want     string
	}{
		{"reserved kwarg", chat, Options{Kwargs: map[string]any{"messages": 1}},
			`chattemplate: chat_template_kwargs may not set "messages"`},
		{"unencodable kwarg", chat, Options{Kwargs: map[string]any{"f": func() {}}},
			`chattemplate: chat_template_kwargs "f"`},
		{"tool not JSON", chat, Options{Tools: []json.RawMessage{json.RawMessage(`{"a": 1`)}},
			"chattemplate: tools[0] is not valid JSON"},
		{"tool_calls not JSON", []Message{{Role: "assistant", ToolCalls: json.RawMessage(`[1, 2] x`)}}, Options{},
			"chattemplate: messages[0]: tool_calls is not valid JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tmpl.Render(tt.messages, tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Render error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestMessageKeys(t *testing.T) {
	tmpl, err := New("{% for m in messages %}{{ m | tojson }}\n{% endfor %}", "", "")
	if err != nil {
		t.Fatal(err)
	}
	got, err := tmpl.Render([]Message{
		{Role: "user", Content: "a"},
		{Role: "assistant", ReasoningContent: "r", ToolCalls: json.RawMessage(`[{"id": "1"}]`)},
		{Role: "tool", Content: "c", ToolCallID: "1", Name: "f"},
		{Role: "assistant", Content: "d", ToolCalls: json.RawMessage("null")},
	}, Options{})
	want := `{"role": "user", "content": "a"}
{"role": "assistant", "content": "", "reasoning_content": "r", "tool_calls": [{"id": "1"}]}
{"role": "tool", "content": "c", "tool_call_id": "1", "name": "f"}
{"role": "assistant", "content": "d"}
`
	if err != nil || got != want {
		t.Errorf("Render = %q, %v; want %q", got, err, want)
	}
}

func TestStrftimeNow(t *testing.T) {
	tmpl, err := New("{{ strftime_now('%Y-%m-%d') }}", "", "")
	if err != nil {
		t.Fatal(err)
	}
	got, err := tmpl.Render(nil, Options{})
	if err != nil || len(got) != len("2006-01-02") || got[4] != '-' || got[7] != '-' {
		t.Errorf("Render = %q, %v; want a date", got, err)
	}
}

// TestConcurrentRender checks that one Template serves concurrent requests (run with -race).
func TestConcurrentRender(t *testing.T) {
	tmpl, err := New(chatML, "", "")
	if err != nil {
		t.Fatal(err)
	}
	want, err := tmpl.Render(chat, Options{AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				if got, err := tmpl.Render(chat, Options{AddGenerationPrompt: true}); err != nil || got != want {
					t.Errorf("concurrent Render = %q, %v", got, err)
					return
				}
			}
		})
	}
	wg.Wait()
}
