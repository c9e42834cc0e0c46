package api

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

// completionRequest is the body of POST /v1/completions.
type completionRequest struct {
	sampleParams
	Prompt json.RawMessage `json:"prompt"`
	// Logprobs null: none; N: the chosen tokens' logprobs and the N likeliest at each position.
	Logprobs *int    `json:"logprobs"`
	Echo     bool    `json:"echo"`
	Suffix   *string `json:"suffix"`
	BestOf   *int    `json:"best_of"`
	// ResponseFormat constrains the completion as in chat (vLLM takes it here too).
	ResponseFormat *responseFormat `json:"response_format"`
}

// completions answers POST /v1/completions.
func (h *Handler) completions(w http.ResponseWriter, r *http.Request) {
	var req completionRequest
	if e := h.decodeBody(w, r, &req); e != nil {
		writeError(w, e)
		return
	}
	j, e := h.completionJob(&req)
	if e != nil {
		writeError(w, e)
		return
	}
	h.serveReply(w, r, j, &completionFormat{id: newID("cmpl"), created: time.Now().Unix(), model: h.served.Name, logprobs: j.req.Logprobs})
}

// completionJob validates req and tokenizes its prompt.
func (h *Handler) completionJob(req *completionRequest) (*job, *apiError) {
	if e := h.checkModel(req.Model); e != nil {
		return nil, e
	}
	switch {
	case req.Logprobs != nil && (*req.Logprobs < 0 || *req.Logprobs > maxCompletionLogprobs):
		return nil, badRequest("logprobs", "logprobs must be from 0 to %d (the likeliest tokens reported beside each chosen one), got %d", maxCompletionLogprobs, *req.Logprobs)
	case req.Echo:
		return nil, badRequest("echo", "echo is not supported: the response holds the completion only")
	case req.Suffix != nil && *req.Suffix != "":
		return nil, badRequest("suffix", "suffix is not supported")
	case req.BestOf != nil && *req.BestOf != 1:
		return nil, badRequest("best_of", "best_of must be 1: tfd makes one reply per request")
	}
	text, e := parsePrompt(req.Prompt)
	if e != nil {
		return nil, e
	}
	constraint, e := h.constraint(req.ResponseFormat)
	if e != nil {
		return nil, e
	}
	j, e := h.newJob(&req.sampleParams, h.served.Tokenizer.Encode(text), "prompt")
	if e != nil {
		return nil, e
	}
	j.req.Constraint = constraint
	j.req.Logprobs = req.Logprobs != nil
	if j.req.Logprobs {
		j.req.TopLogprobs = *req.Logprobs
	}
	return j, nil
}

// parsePrompt reads the prompt field: a string, or an array holding one string.
func parsePrompt(raw json.RawMessage) (string, *apiError) {
	s := strings.TrimSpace(string(raw))
	if s == "" || s == "null" {
		return "", badRequest("prompt", "prompt is missing: want a string")
	}
	var text string
	if err := json.Unmarshal(raw, &text); err == nil {
		return text, nil
	}
	var texts []string
	if err := json.Unmarshal(raw, &texts); err != nil {
		return "", badRequest("prompt", "prompt must be a string or an array of one string (token-id prompts are not supported)")
	}
	if len(texts) != 1 {
		return "", badRequest("prompt", "prompt holds %d strings: tfd takes one prompt per request", len(texts))
	}
	return texts[0], nil
}

// completionFormat shapes completion responses and chunks.
type completionFormat struct {
	id       string
	created  int64
	model    string
	logprobs bool
	offset   int // text offset of the choice's next token, for logprobs.text_offset
	index, n int // the choice's index, of n
}

type completion struct {
	ID      string             `json:"id"`
	Object  string             `json:"object"`
	Created int64              `json:"created"`
	Model   string             `json:"model"`
	Choices []completionChoice `json:"choices"`
	Usage   *usage             `json:"usage,omitempty"`
	TFD     *tfdInfo           `json:"tfd,omitempty"`
}

type completionChoice struct {
	Text         string              `json:"text"`
	Index        int                 `json:"index"`
	Logprobs     *completionLogprobs `json:"logprobs"`
	FinishReason *string             `json:"finish_reason"`
	// TFD is the choice's own tfd object, set when the response has several choices.
	TFD *tfdInfo `json:"tfd,omitempty"`
}

// maxCompletionLogprobs bounds the legacy endpoint's logprobs, as OpenAI's does.
const maxCompletionLogprobs = 5

// completionLogprobs is the legacy logprobs shape; TopLogprobs maps each position's likeliest
// tokens' text to their logprobs, when the request asked for some.
type completionLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []float32            `json:"token_logprobs"`
	TopLogprobs   []map[string]float32 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
}

func (f *completionFormat) logprobsOf(lps []tokenLogprob) *completionLogprobs {
	if !f.logprobs {
		return nil
	}
	out := &completionLogprobs{Tokens: []string{}, TokenLogprobs: []float32{}, TextOffset: []int{}}
	for _, lp := range lps {
		out.Tokens = append(out.Tokens, lp.token)
		out.TokenLogprobs = append(out.TokenLogprobs, lp.logprob)
		if len(lp.top) > 0 {
			alts := make(map[string]float32, len(lp.top))
			for _, alt := range lp.top {
				if _, seen := alts[alt.token]; !seen { // two ids may share a text; keep the likelier
					alts[alt.token] = alt.logprob
				}
			}
			out.TopLogprobs = append(out.TopLogprobs, alts)
		}
		out.TextOffset = append(out.TextOffset, f.offset)
		f.offset += len(lp.token)
	}
	return out
}

func (f *completionFormat) response(object string, choices []completionChoice) *completion {
	return &completion{ID: f.id, Object: object, Created: f.created, Model: f.model, Choices: choices}
}

func (f *completionFormat) responseID() string { return f.id }

func (f *completionFormat) choice(i, n int) replyFormat {
	c := *f
	c.index, c.n, c.offset = i, n, 0
	return &c
}

func (f *completionFormat) first() any { return nil }

func (f *completionFormat) chunk(text string, lps []tokenLogprob) []any {
	return []any{f.response("text_completion", []completionChoice{{Index: f.index, Text: text, Logprobs: f.logprobsOf(lps)}})}
}

func (f *completionFormat) final(finish string, info tfdInfo) []any {
	c := f.response("text_completion", []completionChoice{{Index: f.index, FinishReason: &finish}})
	if f.n > 1 {
		c.Choices[0].TFD = &info
	} else {
		c.TFD = &info
	}
	return []any{c}
}

func (f *completionFormat) usage(u usage, info tfdInfo) any {
	c := f.response("text_completion", []completionChoice{})
	c.Usage, c.TFD = &u, &info
	return c
}

func (f *completionFormat) whole(choices []wholeChoice, u usage, info tfdInfo) any {
	out := f.response("text_completion", make([]completionChoice, len(choices)))
	for i, c := range choices {
		cf := c.f.(*completionFormat)
		out.Choices[i] = completionChoice{Index: cf.index, Text: c.text, Logprobs: cf.logprobsOf(c.logprobs), FinishReason: &c.finish}
		if cf.n > 1 {
			out.Choices[i].TFD = &c.info
		}
	}
	out.Usage, out.TFD = &u, &info
	return out
}
