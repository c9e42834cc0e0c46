package chattemplate

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestRealTemplatesWithPython renders the real model templates and captured OpenAI requests that
// ship in the engine module's testdata, here and with Jinja2, and demands the same bytes (or an
// error from both). It needs python3 with jinja2, so it runs only with TFD_CHECK_WITH_PYTHON=1.
func TestRealTemplatesWithPython(t *testing.T) {
	if os.Getenv("TFD_CHECK_WITH_PYTHON") == "" {
		t.Skip("set TFD_CHECK_WITH_PYTHON=1 to compare real templates with Jinja2")
	}
	dir, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/ardanlabs/jinja").Output()
	if err != nil {
		t.Fatalf("locating the engine module: %v", err)
	}
	root := filepath.Join(strings.TrimSpace(string(dir)), "testdata")
	templates, _ := filepath.Glob(filepath.Join(root, "templates", "*.jinja"))
	requests, _ := filepath.Glob(filepath.Join(root, "requests", "*.json"))
	if len(templates) == 0 || len(requests) == 0 {
		t.Skipf("no templates or requests under %s", root)
	}

	var cases []featureCase
	for _, tp := range templates {
		src, err := os.ReadFile(tp)
		if err != nil {
			t.Fatal(err)
		}
		for _, rp := range requests {
			messages, opts := readRequest(t, rp)
			cases = append(cases, featureCase{
				name:     filepath.Base(tp) + "/" + filepath.Base(rp),
				template: string(src), messages: messages, opts: opts,
			})
		}
	}
	results := renderWithPython(t, cases)
	for _, tt := range cases {
		tmpl, err := New(tt.template, "<s>", "</s>")
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		got, err := tmpl.Render(tt.messages, tt.opts)
		switch r := results[tt.name]; {
		case r.Error != nil && err != nil:
		case r.Error != nil:
			// Jinja2 fails where the engine is lenient (for example, a from_json filter that
			// transformers lacks); the engine's output is not wrong for a template that works.
			t.Logf("%s: Jinja2 fails (%s), tfd renders", tt.name, *r.Error)
		case err != nil:
			t.Errorf("%s: %v; Jinja2 renders", tt.name, err)
		case got != *r.Out:
			t.Errorf("%s:\n got %q\nwant %q", tt.name, got, *r.Out)
		}
	}
}

// readRequest reads a captured OpenAI chat request.
func readRequest(t *testing.T, path string) ([]Message, Options) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var req struct {
		Messages []struct {
			Role             string          `json:"role"`
			Content          string          `json:"content"`
			ReasoningContent string          `json:"reasoning_content"`
			ToolCalls        json.RawMessage `json:"tool_calls"`
			ToolCallID       string          `json:"tool_call_id"`
			Name             string          `json:"name"`
		} `json:"messages"`
		Tools          []json.RawMessage `json:"tools"`
		EnableThinking *bool             `json:"enable_thinking"`
	}
	if err := json.Unmarshal(data, &req); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var messages []Message
	for _, m := range req.Messages {
		messages = append(messages, Message{Role: m.Role, Content: m.Content, ReasoningContent: m.ReasoningContent,
			ToolCalls: m.ToolCalls, ToolCallID: m.ToolCallID, Name: m.Name})
	}
	opts := Options{AddGenerationPrompt: true, Tools: req.Tools}
	if req.EnableThinking != nil {
		opts.Kwargs = map[string]any{"enable_thinking": *req.EnableThinking}
	}
	return messages, opts
}
