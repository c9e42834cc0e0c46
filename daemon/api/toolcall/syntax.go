package toolcall

import (
	"crypto/rand"
	"encoding/json"
	"slices"
	"strings"
)

// Syntax is how one family of models writes tool calls in its reply's text.
type Syntax struct {
	// name is the family's name, as the tool parsers of vLLM call it.
	name string
	// markers are the texts a call begins with, wherever it stands in the reply. Those the
	// tokenizer holds as special tokens are kept in the reply's text while tools are on (a
	// reply's text otherwise leaves special tokens out).
	markers []string
	// leading, when set, also begins a call as the first text of a reply other than white space
	// (Llama's calls are a bare JSON object).
	leading string
	// closer, when set, ends a call: a stream can send the call once it has come.
	closer string
	// inner are other texts within a call that a tokenizer may hold as special tokens.
	inner []string
	// splitWith takes the calls out of a whole reply, naming each with newID unless the model
	// gave it an id; it returns the text around them, trimmed.
	splitWith func(text string, newID func() string) (string, []Call)
	// newID makes a call id that the family's template accepts when the client sends it back.
	newID func() string
}

// Split takes the calls out of a whole reply: it returns the text around them, trimmed, and the
// calls, in order. Text that is no well-formed call stays in the text as the model wrote it.
func (s *Syntax) Split(text string) (string, []Call) { return s.splitWith(text, s.newID) }

// Markers returns the texts of the syntax that a tokenizer may hold as special tokens: those a
// call begins with and those within one. A reply's text keeps them while tools are on.
func (s *Syntax) Markers() []string { return slices.Concat(s.markers, s.inner) }

// begins returns where a call begins in text, or -1; atStart says that nothing but white space
// came before text in the reply.
func (s *Syntax) begins(text string, atStart bool) int {
	at := -1
	for _, m := range s.markers {
		if i := strings.Index(text, m); i >= 0 && (at < 0 || i < at) {
			at = i
		}
	}
	if s.leading != "" && atStart {
		if body := strings.TrimLeft(text, " \t\r\n"); strings.HasPrefix(body, s.leading) {
			return 0 // the white space before it was held (mayBegin), and is no content either
		}
	}
	return at
}

// mayBegin returns how many bytes at the end of text might be the start of a call, to be held
// until the next piece tells; atStart as for begins.
func (s *Syntax) mayBegin(text string, atStart bool) int {
	if s.leading != "" && atStart && strings.TrimSpace(text) == "" {
		return len(text) // white space may still come before a leading call
	}
	keep := 0
	for _, m := range s.markers {
		keep = max(keep, partialSuffix(text, m))
	}
	return keep
}

var (
	// Hermes is Qwen's and Hermes': <tool_call>{"name": …, "arguments": {…}}</tool_call>.
	// It is the default, for templates of no family known here.
	Hermes = &Syntax{name: "hermes", markers: []string{HermesOpen}, closer: HermesClose, splitWith: splitHermes, newID: openAICallID}
	// llamaSyntax is Llama 3.1 to 3.3's: {"name": …, "parameters": {…}}, the whole reply, or
	// after <|python_tag|>; several calls are separated by ";".
	llamaSyntax = &Syntax{name: "llama3_json", markers: []string{"<|python_tag|>"}, leading: "{", splitWith: splitLlama, newID: openAICallID}
	// mistralSyntax is Mistral's: [TOOL_CALLS][{"name": …, "arguments": {…}}, …] in older
	// models, [TOOL_CALLS]name[ARGS]{…} (with [CALL_ID]id in some) in newer ones.
	mistralSyntax = &Syntax{name: "mistral", markers: []string{"[TOOL_CALLS]"}, inner: []string{"[ARGS]", "[CALL_ID]"}, splitWith: splitMistral, newID: mistralCallID}
)

// Detect tells a model's tool-call syntax from its chat template's text: each family's
// template writes its own call syntax back when it renders an assistant turn's tool_calls.
func Detect(template string) *Syntax {
	switch {
	case strings.Contains(template, "[TOOL_CALLS]"):
		return mistralSyntax
	case strings.Contains(template, "<|python_tag|>") || strings.Contains(template, "<|start_header_id|>") && strings.Contains(template, `"parameters": `):
		return llamaSyntax
	}
	return Hermes
}

// openAICallID is an id as OpenAI makes them: "call_" and 24 letters and digits.
func openAICallID() string { return "call_" + strings.ToLower(rand.Text()[:24]) }

// mistralCallID is 9 letters and digits: Mistral's templates refuse any other id.
func mistralCallID() string { return rand.Text()[:9] }

// splitLlama takes Llama 3's calls out of text: a reply that is, after white space, one or more
// JSON calls separated by ";", or text then <|python_tag|> then such calls. Anything else, or a
// call that does not parse, leaves the reply as text.
func splitLlama(text string, newID func() string) (string, []Call) {
	before, body, tagged := strings.Cut(text, "<|python_tag|>")
	if !tagged {
		if !strings.HasPrefix(strings.TrimSpace(text), "{") {
			return strings.TrimSpace(text), nil
		}
		before, body = "", text
	}
	var calls []Call
	dec := json.NewDecoder(strings.NewReader(body))
	for {
		var raw callJSON
		if err := dec.Decode(&raw); err != nil {
			return strings.TrimSpace(text), nil
		}
		call, ok := raw.call(newID())
		if !ok {
			return strings.TrimSpace(text), nil
		}
		calls = append(calls, call)
		rest := strings.TrimLeft(body[dec.InputOffset():], " \t\r\n;")
		if rest == "" {
			return strings.TrimSpace(before), calls
		}
		dec = json.NewDecoder(strings.NewReader(rest))
		body = rest
	}
}

// splitMistral takes Mistral's calls out of text: everything after the first [TOOL_CALLS] must
// be calls, as a JSON array of {"name", "arguments"[, "id"]} or as name[ARGS]{…} pieces (each
// after its own [TOOL_CALLS], an id after [CALL_ID]); else the reply stays text.
func splitMistral(text string, newID func() string) (string, []Call) {
	before, body, ok := strings.Cut(text, "[TOOL_CALLS]")
	if !ok {
		return strings.TrimSpace(text), nil
	}
	var calls []Call
	for _, part := range strings.Split(body, "[TOOL_CALLS]") {
		part = strings.TrimSpace(part)
		if strings.HasPrefix(part, "[") {
			var raws []callJSON
			if json.Unmarshal([]byte(part), &raws) != nil || len(raws) == 0 {
				return strings.TrimSpace(text), nil
			}
			for _, raw := range raws {
				call, ok := raw.call(idOr(raw.ID, newID))
				if !ok {
					return strings.TrimSpace(text), nil
				}
				calls = append(calls, call)
			}
			continue
		}
		head, args, ok := strings.Cut(part, "[ARGS]")
		name, id, _ := strings.Cut(head, "[CALL_ID]")
		call, valid := newCall(idOr(strings.TrimSpace(id), newID), strings.TrimSpace(name), json.RawMessage(args))
		if !ok || !valid {
			return strings.TrimSpace(text), nil
		}
		calls = append(calls, call)
	}
	return strings.TrimSpace(before), calls
}

func idOr(id string, newID func() string) string {
	if id != "" {
		return id
	}
	return newID()
}
