package chattemplate

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// ErrNoTemplate is returned, wrapped, by FromTokenizerConfig when the config has no chat
// template; errors.Is finds it. A caller can then serve plain completions only, or take the
// template from a chat_template.jinja file beside the config (where newer transformers saves it)
// and call New.
var ErrNoTemplate = errors.New("chattemplate: tokenizer_config.json has no chat_template")

// tokenizerConfig is the part of tokenizer_config.json that a chat template needs.
type tokenizerConfig struct {
	ChatTemplate json.RawMessage `json:"chat_template"`
	BOSToken     json.RawMessage `json:"bos_token"`
	EOSToken     json.RawMessage `json:"eos_token"`
}

// FromTokenizerConfig parses the chat template in the bytes of a tokenizer_config.json, with its
// bos_token and eos_token. chat_template is either a string or a list of {"name", "template"}
// objects, of which the one named "default" is taken (transformers would take "tool_use" instead
// when tools are given; that choice is not made here). Each token is a string, null, or an object
// whose "content" is the string.
func FromTokenizerConfig(tokenizerConfigJSON []byte) (*Template, error) {
	var cfg tokenizerConfig
	if err := json.Unmarshal(tokenizerConfigJSON, &cfg); err != nil {
		return nil, fmt.Errorf("chattemplate: tokenizer_config.json is not a JSON object: %w", err)
	}
	source, err := templateSource(cfg.ChatTemplate)
	if err != nil {
		return nil, err
	}
	bos, err := tokenContent("bos_token", cfg.BOSToken)
	if err != nil {
		return nil, err
	}
	eos, err := tokenContent("eos_token", cfg.EOSToken)
	if err != nil {
		return nil, err
	}
	return New(source, bos, eos)
}

// templateSource picks the template text out of a chat_template value.
func templateSource(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", fmt.Errorf("%w: the model can serve plain completions only", ErrNoTemplate)
	}
	var source string
	if err := json.Unmarshal(raw, &source); err == nil {
		if source == "" {
			return "", fmt.Errorf("%w: it is empty", ErrNoTemplate)
		}
		return source, nil
	}
	var named []struct {
		Name     string `json:"name"`
		Template string `json:"template"`
	}
	if err := json.Unmarshal(raw, &named); err != nil {
		return "", fmt.Errorf("chattemplate: tokenizer_config.json: chat_template must be a string or "+
			"a list of {name, template} objects: %w", err)
	}
	var names []string
	for _, t := range named {
		if t.Name == "default" {
			return t.Template, nil
		}
		names = append(names, fmt.Sprintf("%q", t.Name))
	}
	return "", fmt.Errorf("%w named \"default\" (it has %s)", ErrNoTemplate, strings.Join(names, ", "))
}

// tokenContent reads a special token that is a string, null, or an AddedToken object.
func tokenContent(key string, raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var tok struct {
		Content *string `json:"content"`
	}
	if err := json.Unmarshal(raw, &tok); err != nil || tok.Content == nil {
		return "", fmt.Errorf("chattemplate: tokenizer_config.json: %s must be a string or an object "+
			"with a string content, not %s", key, raw)
	}
	return *tok.Content, nil
}
