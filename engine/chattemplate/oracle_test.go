package chattemplate

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"testing"
)

// oraclePath holds renders made by transformers' apply_chat_template on the GPU machine
// (tools/fixtures/make_fixtures.py) for the bundled template and a richer Qwen-style one.
var oraclePath = "../testdata/oracle/chat/renders.json"

// oracleDoc is the layout of renders.json.
type oracleDoc struct {
	Templates map[string]string `json:"templates"` // name -> source
	BOSToken  *string           `json:"bos_token"` // optional; the templates under test use neither
	EOSToken  *string           `json:"eos_token"`
	Cases     []struct {
		Template            string                       `json:"template"`
		Messages            []map[string]json.RawMessage `json:"messages"`
		Tools               []json.RawMessage            `json:"tools"`
		Kwargs              map[string]json.RawMessage   `json:"kwargs"`
		AddGenerationPrompt bool                         `json:"add_generation_prompt"`
		Rendered            *string                      `json:"rendered"`
		Error               *string                      `json:"error"`
	} `json:"cases"`
}

// TestOracle demands byte-for-byte the prompts transformers renders, and an error wherever the
// template raised one there.
func TestOracle(t *testing.T) {
	data, err := os.ReadFile(oraclePath)
	if errors.Is(err, fs.ErrNotExist) {
		t.Skipf("%s is not generated yet (tools/fixtures/make_fixtures.py writes it on the GPU machine)", oraclePath)
	}
	if err != nil {
		t.Fatal(err)
	}
	var doc oracleDoc
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("%s: %v", oraclePath, err)
	}
	if len(doc.Cases) == 0 {
		t.Fatalf("%s holds no cases", oraclePath)
	}
	bos, eos := deref(doc.BOSToken), deref(doc.EOSToken)
	templates := map[string]*Template{}
	for name, source := range doc.Templates {
		tmpl, err := New(source, bos, eos)
		if err != nil {
			t.Fatalf("template %q: %v", name, err)
		}
		templates[name] = tmpl
	}
	for i, c := range doc.Cases {
		t.Run(fmt.Sprintf("%s/%d", c.Template, i), func(t *testing.T) {
			tmpl := templates[c.Template]
			if tmpl == nil {
				t.Fatalf("case names template %q, which the file lacks", c.Template)
			}
			messages, err := oracleMessages(c.Messages)
			if err != nil {
				t.Fatal(err)
			}
			opts := Options{AddGenerationPrompt: c.AddGenerationPrompt, Tools: c.Tools, Kwargs: map[string]any{}}
			for k, v := range c.Kwargs {
				opts.Kwargs[k] = v
			}
			got, err := tmpl.Render(messages, opts)
			switch {
			case c.Error != nil && err == nil:
				t.Fatalf("Render = %q; transformers failed: %s", got, *c.Error)
			case c.Error != nil:
				// The template's own message must reach the user.
				want := (*c.Error)[strings.Index(*c.Error, ": ")+2:]
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Render error %q does not carry transformers' message %q", err, want)
				}
			case err != nil:
				t.Fatalf("Render: %v; transformers rendered %q", err, deref(c.Rendered))
			case c.Rendered == nil:
				t.Fatal("case has neither rendered nor error")
			case got != *c.Rendered:
				t.Errorf("Render =\n%q\ntransformers renders\n%q", got, *c.Rendered)
			}
		})
	}
}

// oracleMessages converts transformers-style message dicts into Messages, refusing keys that
// Message cannot carry so that the test cannot pass by dropping them.
func oracleMessages(dicts []map[string]json.RawMessage) ([]Message, error) {
	var messages []Message
	for i, d := range dicts {
		var m Message
		for k, raw := range d {
			var err error
			switch k {
			case "role":
				err = json.Unmarshal(raw, &m.Role)
			case "content":
				err = json.Unmarshal(raw, &m.Content)
			case "reasoning_content":
				err = json.Unmarshal(raw, &m.ReasoningContent)
			case "tool_calls":
				m.ToolCalls = raw
			case "tool_call_id":
				err = json.Unmarshal(raw, &m.ToolCallID)
			case "name":
				err = json.Unmarshal(raw, &m.Name)
			default:
				err = errors.New("Message has no field for this key")
			}
			if err != nil {
				return nil, fmt.Errorf("messages[%d].%s: %w", i, k, err)
			}
		}
		messages = append(messages, m)
	}
	return messages, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
