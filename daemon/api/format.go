package api

import (
	"encoding/json"
	"errors"
	"strings"

	"tfd/grammar"
	"tfd/scheduler"
)

// responseFormat is the response_format field: "text" (the default), "json_object" (any JSON
// object) or "json_schema" (a JSON Schema of the subset grammar.Compile takes). strict is
// accepted either way: tfd always holds the reply to the schema.
type responseFormat struct {
	Type       string `json:"type"`
	JSONSchema *struct {
		Name   string          `json:"name"`
		Schema json.RawMessage `json:"schema"`
		Strict *bool           `json:"strict"`
	} `json:"json_schema"`
}

// constraint returns the grammar rf asks for over the served model's vocabulary, nil for plain
// text. The reply is constrained from its first token: a model that would think first (Qwen3)
// should be asked not to, through chat_template_kwargs.
func (h *Handler) constraint(rf *responseFormat) (scheduler.Constraint, *apiError) {
	if rf == nil || rf.Type == "" || rf.Type == "text" {
		return nil, nil
	}
	var g *grammar.Grammar
	switch rf.Type {
	case "json_object":
		g = grammar.AnyObject()
	case "json_schema":
		if rf.JSONSchema == nil || len(rf.JSONSchema.Schema) == 0 || string(rf.JSONSchema.Schema) == "null" {
			return nil, badRequest("response_format", "response_format json_schema needs json_schema.schema, a JSON Schema object: {\"type\":\"json_schema\",\"json_schema\":{\"name\":\"…\",\"schema\":{…}}}")
		}
		var err error
		if g, err = grammar.Compile(rf.JSONSchema.Schema); err != nil {
			var u *grammar.UnsupportedError
			if errors.As(err, &u) {
				return nil, badRequest("response_format", "response_format.json_schema.schema: the keyword %q at %s %s", u.Keyword, u.Path, u.Reason)
			}
			return nil, badRequest("response_format", "response_format.json_schema.schema: %s", strings.TrimPrefix(err.Error(), "grammar: "))
		}
	default:
		return nil, badRequest("response_format", "response_format type %q is unknown: want \"text\", \"json_object\" or \"json_schema\"", rf.Type)
	}
	if h.served.Vocab == nil {
		return nil, badRequest("response_format", "the model %q cannot be constrained to JSON (its vocabulary is not laid out for grammars): leave response_format out", h.served.Name)
	}
	return grammar.NewMatcher(g, h.served.Vocab()), nil
}
