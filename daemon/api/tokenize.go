package api

import (
	"encoding/json"
	"net/http"
	"unicode/utf8"

	"tfd/engine/chattemplate"
)

// tokenizeRequest is the body of POST /tokenize, in llama-server's shape, with one addition:
// messages in place of content tokenizes a chat as /v1/chat/completions renders it.
type tokenizeRequest struct {
	Content    *string `json:"content"`
	AddSpecial bool    `json:"add_special"`
	WithPieces bool    `json:"with_pieces"`
	// Messages, Tools, AddGenerationPrompt (default true, as a chat request renders it) and
	// ChatTemplateKwargs render a chat with the model's template first.
	Messages            []json.RawMessage `json:"messages"`
	Tools               []json.RawMessage `json:"tools"`
	AddGenerationPrompt *bool             `json:"add_generation_prompt"`
	ChatTemplateKwargs  map[string]any    `json:"chat_template_kwargs"`
}

// tokenPiece is a token with its text, as llama-server's with_pieces gives it: a string when the
// token's bytes are whole UTF-8 characters, else the bytes.
type tokenPiece struct {
	ID    int32 `json:"id"`
	Piece any   `json:"piece"`
}

// tokenize answers POST /tokenize: the ids the model would be fed for content (or for a chat),
// as /v1/completions and /v1/chat/completions feed them.
func (h *Handler) tokenize(w http.ResponseWriter, r *http.Request) {
	var req tokenizeRequest
	if e := h.decodeBody(w, r, &req); e != nil {
		writeError(w, e)
		return
	}
	text, e := h.tokenizeText(&req)
	if e != nil {
		writeError(w, e)
		return
	}
	ids := h.served.Tokenizer.Encode(text)
	out := map[string]any{"tokens": ids}
	if req.WithPieces {
		pieces := make([]tokenPiece, len(ids))
		for i, id := range ids {
			pieces[i] = tokenPiece{ID: id, Piece: h.piece(id)}
		}
		out["tokens"] = pieces
	}
	if req.Messages != nil {
		out["prompt"] = text
	}
	WriteJSON(w, http.StatusOK, out)
}

// tokenizeText returns the text req asks to tokenize: its content, or its chat rendered.
func (h *Handler) tokenizeText(req *tokenizeRequest) (string, *apiError) {
	if req.AddSpecial {
		// tfd's prompts get no special tokens added (the chat template writes them), so ids with
		// them added would not be what the model is fed.
		return "", badRequest("add_special", "add_special is not supported: tfd feeds a prompt's text as it is, adding no special tokens (a chat's come from its template); leave it false, or tokenize messages to see a chat's tokens")
	}
	switch {
	case req.Content != nil && req.Messages != nil:
		return "", badRequest("messages", "give content or messages, not both")
	case req.Content != nil:
		return *req.Content, nil
	case req.Messages == nil:
		return "", badRequest("content", "content is missing: want the text to tokenize (or messages, a chat to render with the model's template and tokenize)")
	}
	msgs, e := parseMessages(req.Messages)
	if e != nil {
		return "", e
	}
	if h.served.Template == nil {
		return "", badRequest("messages", "the model %q has no chat template: tokenize content instead", h.served.Name)
	}
	genPrompt := req.AddGenerationPrompt == nil || *req.AddGenerationPrompt
	text, err := h.served.Template.Render(msgs, chattemplate.Options{AddGenerationPrompt: genPrompt, Tools: req.Tools, Kwargs: req.ChatTemplateKwargs})
	if err != nil {
		return "", badRequest("messages", "the model's chat template rejected the messages: %v", err)
	}
	return text, nil
}

// tokenBytes is the optional ability of a Tokenizer to give a token's own bytes, which may be
// part of a UTF-8 character; the engine's tokenizer has it.
type tokenBytes interface {
	TokenBytes(id int32) []byte
}

// piece is id's text for with_pieces: a string when its bytes are whole UTF-8 characters, else
// the bytes, as llama-server gives them. A tokenizer without TokenBytes gives its decoded text.
func (h *Handler) piece(id int32) any {
	tb, ok := h.served.Tokenizer.(tokenBytes)
	if !ok {
		return h.served.Tokenizer.Decode([]int32{id})
	}
	raw := tb.TokenBytes(id)
	if utf8.Valid(raw) {
		return string(raw)
	}
	b := make([]int, len(raw))
	for i, c := range raw {
		b[i] = int(c)
	}
	return b
}

// detokenizeRequest is the body of POST /detokenize, in llama-server's shape.
type detokenizeRequest struct {
	Tokens []int32 `json:"tokens"`
}

// detokenize answers POST /detokenize: the text of the ids, special tokens included (as
// llama-server gives it).
func (h *Handler) detokenize(w http.ResponseWriter, r *http.Request) {
	var req detokenizeRequest
	if e := h.decodeBody(w, r, &req); e != nil {
		writeError(w, e)
		return
	}
	for i, id := range req.Tokens {
		if id < 0 || (h.served.VocabSize > 0 && int(id) >= h.served.VocabSize) {
			writeError(w, badRequest("tokens", "tokens[%d] is %d: token ids are from 0 to %d", i, id, h.served.VocabSize-1))
			return
		}
	}
	WriteJSON(w, http.StatusOK, map[string]string{"content": h.served.Tokenizer.Decode(req.Tokens)})
}
