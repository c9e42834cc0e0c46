// Package chattemplate renders a model's Hugging Face chat template: the Jinja program in its
// tokenizer_config.json that turns a conversation into the prompt text the model was trained on.
//
// The aim is byte-for-byte agreement with transformers' apply_chat_template, which renders with
// Jinja2 in a sandbox with trim_blocks and lstrip_blocks, a tojson filter that is Python's
// json.dumps (", " and ": " separators, keys in insertion order, non-ASCII kept), and the globals
// raise_exception and strftime_now. Templates run on github.com/ardanlabs/jinja, a Go engine
// written for chat templates. Its gaps are closed here rather than in the engine:
//
//   - values are built from the client's JSON so that dicts keep their key order;
//   - New rewrites the template first (see normalize): Jinja2's whitespace rules are applied
//     exactly (the engine trims past expressions, {%+ and +%} are unknown to it), each tojson
//     filter becomes a Python-exact json.dumps (the engine's sorts keys when indenting and
//     prints 1.0 as 1), and string literals are re-escaped (the engine lacks \r, \x and \u).
//
// Differences that remain: printing a float with {{ }} gives Go's shortest form (1.0 prints as
// 1), printing none prints nothing rather than "None", float literals with exponents (1e6) do not
// parse, and the engine is more lenient than Jinja2 where Jinja2 raises (an attribute of an
// undefined value, a filter such as from_json that transformers lacks). Templates that work
// under transformers are rendered the same; the tests check this against Jinja2.
package chattemplate

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/ardanlabs/jinja"
)

// Message is one turn of a conversation as the template sees it: a dict with the keys role and
// content, plus reasoning_content, tool_calls, tool_call_id and name when they are set (and
// thinking beside reasoning_content, for a template that reads thinking: GPT-OSS's).
type Message struct {
	Role string
	// Content is the text content. The daemon joins OpenAI content parts into it; a message
	// without content (an assistant turn that only calls tools) has "".
	Content string
	// ReasoningContent is an assistant turn's earlier thinking, for templates that replay it
	// (Qwen3's reads reasoning_content). Empty means absent.
	ReasoningContent string
	// ToolCalls is an assistant turn's tool_calls array as the client sent it, passed to the
	// template with its key order; each function's arguments stay as sent (usually a JSON string,
	// which templates such as Qwen3's print verbatim). Empty or null means absent.
	ToolCalls json.RawMessage
	// ToolCallID is a tool turn's tool_call_id. Empty means absent.
	ToolCallID string
	// Name is the optional participant or tool name. Empty means absent.
	Name string
}

// Options are the per-request inputs to a render besides the messages.
type Options struct {
	// AddGenerationPrompt asks the template to end with the opening of an assistant turn.
	AddGenerationPrompt bool
	// Tools are the tool schemas as the client sent them; tojson prints them with their key
	// order. Nil gives the template tools = none, as transformers does.
	Tools []json.RawMessage
	// Kwargs are chat_template_kwargs, passed through as template variables (enable_thinking,
	// for example). Each value is converted through encoding/json, so Go maps arrive with sorted
	// keys while a json.RawMessage keeps its own order. They may override bos_token and eos_token
	// but not messages, tools, documents or add_generation_prompt.
	Kwargs map[string]any
}

// Template is a parsed chat template. It is safe for concurrent use.
type Template struct {
	tmpl     *jinja.Template
	texts    []jinja.Value // the text pieces the normalized source prints through textVar
	bos, eos string
	source   string
	// thinking: the template reads an assistant turn's reasoning as message.thinking (GPT-OSS's,
	// as transformers' docs for it say), so a message's ReasoningContent is given as that too.
	thinking bool
}

// Source returns the template's text as given to New: what a caller reads to tell the model's
// family (the syntax of its tool calls, say).
func (t *Template) Source() string { return t.source }

// reserved are the variables Render sets that kwargs may not replace: transformers passes them
// as named arguments, so a duplicate there is an error too.
var reserved = []string{"messages", "tools", "documents", "add_generation_prompt", toJSONFunc, textVar}

// New parses a chat template. bos and eos are the tokenizer's bos_token and eos_token strings
// (either may be empty); the template sees them as bos_token and eos_token, as in transformers.
// A syntax error is returned with the engine's description and position.
func New(source, bos, eos string) (*Template, error) {
	normalized, texts, err := normalize(source)
	var tmpl *jinja.Template
	if err == nil {
		tmpl, err = jinja.Compile(normalized)
	}
	if err != nil {
		// Compile what the author wrote, so that a syntax error names their line and column.
		// Should it compile after all, normalize has a bug; the engine alone is closer to
		// right than no template.
		tmpl, err = jinja.Compile(source)
		if err != nil {
			return nil, fmt.Errorf("chattemplate: parsing the chat template: %w", err)
		}
		texts = nil
	}
	items := make([]jinja.Value, len(texts))
	for i, text := range texts {
		items[i] = jinja.NewString(text)
	}
	return &Template{tmpl: tmpl, texts: items, bos: bos, eos: eos, source: source, thinking: readsThinking(source)}, nil
}

// readsThinking reports whether a template reads message.thinking.
func readsThinking(source string) bool {
	return strings.Contains(source, "message.thinking") || strings.Contains(source, `"thinking" in message`)
}

// Render renders the conversation. Errors come from the template (raise_exception's message,
// an undefined function) or from the inputs (malformed tool JSON, a reserved kwarg); each starts
// with "chattemplate:" and says what is wrong in terms an API user can act on, so the caller can
// return it as a 400.
func (t *Template) Render(messages []Message, opts Options) (out string, err error) {
	vars, err := t.variables(messages, opts)
	if err != nil {
		return "", err
	}
	defer func() {
		// The engine's value accessors panic on a kind mismatch (AsString on an int, say);
		// should an odd template reach one, a request must not take the daemon down with it.
		if r := recover(); r != nil {
			out, err = "", fmt.Errorf("chattemplate: the chat template failed: %v", r)
		}
	}()
	out, err = t.tmpl.RenderValues(vars)
	if err != nil {
		return "", fmt.Errorf("chattemplate: %w", err)
	}
	return out, nil
}

// variables builds the template's variables the way transformers' render call does.
func (t *Template) variables(messages []Message, opts Options) (map[string]jinja.Value, error) {
	vars := map[string]jinja.Value{
		"bos_token": jinja.NewString(t.bos),
		"eos_token": jinja.NewString(t.eos),
	}
	for _, k := range slices.Sorted(maps.Keys(opts.Kwargs)) {
		if slices.Contains(reserved, k) {
			return nil, fmt.Errorf("chattemplate: chat_template_kwargs may not set %q", k)
		}
		data, err := json.Marshal(opts.Kwargs[k])
		if err != nil {
			return nil, fmt.Errorf("chattemplate: chat_template_kwargs %q: %w", k, err)
		}
		v, err := decodeValue(data)
		if err != nil {
			return nil, fmt.Errorf("chattemplate: chat_template_kwargs %q: %w", k, err)
		}
		vars[k] = v
	}

	msgs := make([]jinja.Value, len(messages))
	for i, m := range messages {
		v, err := messageValue(m, t.thinking)
		if err != nil {
			return nil, fmt.Errorf("chattemplate: messages[%d]: %w", i, err)
		}
		msgs[i] = v
	}
	vars["messages"] = jinja.NewList(msgs)

	vars["tools"] = jinja.None()
	if opts.Tools != nil {
		tools := make([]jinja.Value, len(opts.Tools))
		for i, raw := range opts.Tools {
			v, err := decodeValue(raw)
			if err != nil {
				return nil, fmt.Errorf("chattemplate: tools[%d] is not valid JSON: %w", i, err)
			}
			tools[i] = v
		}
		vars["tools"] = jinja.NewList(tools)
	}
	vars["documents"] = jinja.None()
	vars["add_generation_prompt"] = jinja.NewBool(opts.AddGenerationPrompt)
	vars[toJSONFunc] = jinja.NewCallable("tojson", toJSON)
	vars[textVar] = jinja.NewList(t.texts)
	return vars, nil
}

// messageValue returns a message as the dict a template sees, keys in a fixed order; thinking
// adds the reasoning as thinking too.
func messageValue(m Message, thinking bool) (jinja.Value, error) {
	v := jinja.NewDict()
	d := v.AsDict()
	d.Set("role", jinja.NewString(m.Role))
	d.Set("content", jinja.NewString(m.Content))
	if m.ReasoningContent != "" {
		d.Set("reasoning_content", jinja.NewString(m.ReasoningContent))
		if thinking {
			d.Set("thinking", jinja.NewString(m.ReasoningContent))
		}
	}
	if len(m.ToolCalls) > 0 && string(m.ToolCalls) != "null" {
		calls, err := decodeValue(m.ToolCalls)
		if err != nil {
			return jinja.Value{}, fmt.Errorf("tool_calls is not valid JSON: %w", err)
		}
		d.Set("tool_calls", calls)
	}
	if m.ToolCallID != "" {
		d.Set("tool_call_id", jinja.NewString(m.ToolCallID))
	}
	if m.Name != "" {
		d.Set("name", jinja.NewString(m.Name))
	}
	return v, nil
}
