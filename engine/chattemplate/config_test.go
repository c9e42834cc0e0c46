package chattemplate

import (
	"errors"
	"strings"
	"testing"
)

func TestFromTokenizerConfig(t *testing.T) {
	const tmpl = `{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}{{ eos_token }}`
	tests := []struct {
		name   string
		config string
		want   string // the render of one message "hi"
	}{
		{"string template and tokens", `{"chat_template": "` + tmpl + `", "bos_token": "<s>", "eos_token": "</s>"}`,
			"<s>hi</s>"},
		{"AddedToken objects", `{"chat_template": "` + tmpl + `",
			"bos_token": {"__type": "AddedToken", "content": "<|begin|>", "lstrip": false},
			"eos_token": {"content": "<|end|>"}}`, "<|begin|>hi<|end|>"},
		{"null and absent tokens", `{"chat_template": "` + tmpl + `", "bos_token": null}`, "hi"},
		{"named templates", `{"chat_template": [{"name": "tool_use", "template": "T"},
			{"name": "default", "template": "` + tmpl + `"}], "eos_token": "E"}`, "hiE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tm, err := FromTokenizerConfig([]byte(tt.config))
			if err != nil {
				t.Fatal(err)
			}
			got, err := tm.Render([]Message{{Role: "user", Content: "hi"}}, Options{})
			if err != nil || got != tt.want {
				t.Errorf("Render = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestFromTokenizerConfigErrors(t *testing.T) {
	tests := []struct {
		name       string
		config     string
		want       string
		noTemplate bool // errors.Is(err, ErrNoTemplate)
	}{
		{"no template", `{"bos_token": "<s>"}`, "has no chat_template: the model can serve plain completions only", true},
		{"null template", `{"chat_template": null}`, "has no chat_template", true},
		{"empty template", `{"chat_template": ""}`, "it is empty", true},
		{"no default among named", `{"chat_template": [{"name": "rag", "template": "x"}]}`,
			`no chat_template named "default" (it has "rag")`, true},
		{"template of the wrong type", `{"chat_template": 5}`, "must be a string or a list", false},
		{"token of the wrong type", `{"chat_template": "x", "eos_token": 5}`, "eos_token must be a string", false},
		{"not JSON", `{`, "not a JSON object", false},
		{"syntax error", `{"chat_template": "{% for m in messages %}x"}`, "parsing the chat template", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := FromTokenizerConfig([]byte(tt.config))
			if err == nil || !strings.HasPrefix(err.Error(), "chattemplate: ") || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want one containing %q", err, tt.want)
			}
			if errors.Is(err, ErrNoTemplate) != tt.noTemplate {
				t.Errorf("errors.Is(err, ErrNoTemplate) = %v, want %v", !tt.noTemplate, tt.noTemplate)
			}
		})
	}
}
