// Package api owns tfd's OpenAI-compatible HTTP API for one served model: the [Handler] and its
// routes (/v1/models, /v1/chat/completions, /v1/completions, /health), validating requests and
// rendering chats with the model's template, replies whole or streamed as server-sent events,
// OpenAI's error shape, tool calls, stop strings, API keys, and the deadlines on a request's body
// and on each write of its answer. It sees the model only through [ServedModel], so that it can
// be tested with a fake tokenizer, template and host. API.md lists what is supported.
package api

import (
	"tfd/daemon/config"
	"tfd/engine/chattemplate"
	"tfd/grammar"
	"tfd/scheduler"
)

// ServedModel is everything the HTTP API needs of the model it serves: its name, tokenizer, chat
// template, stop tokens and context, and the scheduler host that runs its requests. It is
// neither the engine's loaded model (engine.Model) nor the scheduler's view of one
// (scheduler.Model): the daemon builds it from the first and the host that drives it; tests
// build it from fakes.
type ServedModel struct {
	// Name is the model's id in /v1/models and in responses.
	Name string
	// Tokenizer turns prompts into token ids and generated ids back into text.
	Tokenizer Tokenizer
	// Template renders chat messages into a prompt; nil when the model has none, and then
	// /v1/chat/completions answers 400.
	Template Template
	// EOS lists the token ids that end a reply (the model's generation_config eos_token_id).
	EOS []int32
	// VocabSize is the model's vocabulary size: logit_bias keys and detokenized ids must be
	// below it (0: unchecked).
	VocabSize int
	// Context is the most tokens (prompt plus reply) one request may use.
	Context int
	// Defaults are the model's own sampling defaults (generation_config.json); negative fields
	// and a zero MaxTokens are unset.
	Defaults config.SamplingConfig
	// Host runs requests.
	Host scheduler.Host
	// Created is the model's creation time reported by /v1/models, in Unix seconds.
	Created int64
	// Vocab returns the model's vocabulary laid out for grammar masks (response_format), made
	// on first use and kept; nil refuses response_format json_object and json_schema.
	Vocab func() *grammar.Vocab
}

// Tokenizer is the part of the engine's tokenizer the HTTP layer uses. Its methods must be safe
// for concurrent use.
type Tokenizer interface {
	// Encode returns the ids of text, parsing special tokens written in it (as a rendered chat
	// template contains them).
	Encode(text string) []int32
	// Decode returns the text of ids.
	Decode(ids []int32) string
	// NewDecoder returns an incremental decoder for one reply.
	NewDecoder() Decoder
	// IsSpecial reports whether id is a special (control) token, whose text a reply leaves out.
	IsSpecial(id int32) bool
}

// Decoder turns a reply's ids into text as they arrive, never splitting a UTF-8 character.
type Decoder interface {
	// Add takes the next id and returns the text that is complete so far (maybe empty).
	Add(id int32) string
	// Flush returns whatever text is held back at the end of the reply.
	Flush() string
}

// Template renders a chat into a prompt; *chattemplate.Template is one. Render must be safe for
// concurrent use; its errors (a template's raise_exception, say) are the request's fault and are
// answered with 400.
type Template interface {
	Render(msgs []chattemplate.Message, opts chattemplate.Options) (string, error)
}
