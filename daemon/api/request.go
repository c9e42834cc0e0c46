package api

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"tfd/daemon/config"
	"tfd/scheduler"
)

// sampleParams are the request fields both completion endpoints share.
type sampleParams struct {
	Model         string          `json:"model"`
	MaxTokens     *int            `json:"max_tokens"`
	Temperature   *float64        `json:"temperature"`
	TopP          *float64        `json:"top_p"`
	TopK          *int            `json:"top_k"`
	MinP          *float64        `json:"min_p"`
	Seed          json.RawMessage `json:"seed"`
	Stop          json.RawMessage `json:"stop"`
	N             *int            `json:"n"`
	Stream        bool            `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	// Draft false turns speculative drafting off; the reply is the same either way.
	Draft *bool `json:"draft"`
	penaltyParams

	// maxTokensParam names the field MaxTokens came from, for errors: "max_completion_tokens"
	// when a chat request used the newer name; empty: "max_tokens".
	maxTokensParam string
}

// job is a validated request, ready for the host.
type job struct {
	req scheduler.Request
	// seeds holds each choice's seed (n of them); the choices' requests are req with these.
	seeds       []uint64
	promptParam string // the request field the prompt came from, for errors
	stops       []string
	// keepSpecial are special tokens the reply's text keeps (the markers of tool calls); it
	// leaves out the others.
	keepSpecial []int32
	// forcedCall marks a chat whose tool_choice forces a call: the grammar writes it in the
	// Hermes form, so the reply is parsed in that form.
	forcedCall   bool
	stream       bool
	includeUsage bool
	// stall is how long the client may take to take an event of the stream before the reply is
	// cancelled (server.stall_timeout); 0: no bound.
	stall time.Duration
}

// maxStops is the most stop strings a request may give, as OpenAI allows.
const maxStops = 4

// decodeBody reads r's body into dst. ServeHTTP has bounded it (the body limit, and a read
// deadline BodyTimeout from the request's start). Once the body is in, the read deadline goes,
// since net/http's watch for the client leaving reads on with it while the reply streams. A body
// that failed to arrive leaves it in place and closes the connection after the answer: whatever
// is left of it on the wire must not be read as the next request, and net/http's drain of it
// then ends at once instead of waiting on a client that sends nothing.
func (h *Handler) decodeBody(w http.ResponseWriter, r *http.Request, dst any) *apiError {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		w.Header().Set("Connection", "close")
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			return &apiError{status: http.StatusRequestEntityTooLarge, typ: errInvalidRequest, code: "request_too_large",
				message: fmt.Sprintf("the request body is over the limit of %d bytes", tooBig.Limit)}
		case errors.Is(err, os.ErrDeadlineExceeded):
			got := fmt.Sprintf("%d bytes came", len(body))
			if r.ContentLength > 0 {
				got = fmt.Sprintf("%d of its %d bytes came", len(body), r.ContentLength)
			}
			return &apiError{status: http.StatusRequestTimeout, typ: errInvalidRequest, code: "request_timeout",
				message: fmt.Sprintf("the request body did not arrive within %s of the request (%s): send the whole body at once", seconds(h.opts.BodyTimeout), got)}
		}
		return badRequest("", "could not read the request body: %v", err)
	}
	http.NewResponseController(w).SetReadDeadline(time.Time{}) // not every ResponseWriter supports it
	if e := checkUTF8(body); e != nil {
		return e
	}
	if err := json.Unmarshal(body, dst); err != nil {
		return jsonError("", err)
	}
	return nil
}

// checkUTF8 refuses a body that is not UTF-8, as JSON must be (RFC 8259): encoding/json would
// quietly turn each bad byte into U+FFFD, and the model would answer a prompt the client never
// sent.
func checkUTF8(body []byte) *apiError {
	if utf8.Valid(body) {
		return nil
	}
	at := 0
	for at < len(body) {
		r, size := utf8.DecodeRune(body[at:])
		if r == utf8.RuneError && size <= 1 {
			break
		}
		at += size
	}
	return badRequest("", "the request body is not valid UTF-8: byte %d (%#x) does not begin a UTF-8 character; send JSON encoded in UTF-8", at, body[at])
}

// jsonError turns a decoding error into a 400 naming the field at fault; prefix is the path of
// the value being decoded ("messages[2]"), empty for the whole body.
func jsonError(prefix string, err error) *apiError {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		// encoding/json names a promoted field by its embedded structs too; the client knows
		// only the JSON name.
		field := strings.TrimPrefix(typeErr.Field, "sampleParams.")
		param := joinParam(prefix, strings.TrimPrefix(field, "penaltyParams."))
		if param == "" {
			return badRequest("", "the request body must be a JSON object, not a JSON %s", typeErr.Value)
		}
		return badRequest(param, "%s must be %s, not a JSON %s", param, jsonKind(typeErr.Type), typeErr.Value)
	}
	var syntaxErr *json.SyntaxError
	if errors.As(err, &syntaxErr) {
		return badRequest("", "the request body is not valid JSON (at byte %d): %v", syntaxErr.Offset, err)
	}
	return badRequest(prefix, "the request body is not valid JSON: %v", err)
}

func joinParam(prefix, field string) string {
	switch {
	case prefix == "":
		return field
	case field == "":
		return prefix
	}
	return prefix + "." + field
}

// jsonKind names the JSON a Go type decodes from, for error messages.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int32, reflect.Int64, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice:
		return "an array"
	}
	return "an object"
}

// checkModel accepts an empty name (the served model) or the served model's name.
func (h *Handler) checkModel(name string) *apiError {
	if name == "" || name == h.served.Name {
		return nil
	}
	return &apiError{status: http.StatusNotFound, typ: errInvalidRequest, param: "model", code: "model_not_found",
		message: fmt.Sprintf("the model %q does not exist: this server serves %q", name, h.served.Name)}
}

// newJob validates p's fields and builds the job for prompt; promptParam names the prompt's
// field for errors. A max_tokens that passes the context is refused; the config's default
// max_tokens is lowered to fit, so such a reply ends with "length" where the context ends.
func (h *Handler) newJob(p *sampleParams, prompt []int32, promptParam string) (*job, *apiError) {
	n, e := choiceCount(p.N)
	if e != nil {
		return nil, e
	}
	rt := h.routing.Load() // once, so one request sees one config
	sampling, e := h.sampling(p, rt.Sampling)
	if e != nil {
		return nil, e
	}
	stops, e := parseStops(p.Stop)
	if e != nil {
		return nil, e
	}
	if len(prompt) == 0 {
		return nil, badRequest(promptParam, "the prompt is empty: %s must hold some text", promptParam)
	}
	ctxLen := h.served.Context
	if len(prompt) >= ctxLen {
		return nil, &apiError{status: http.StatusBadRequest, typ: errInvalidRequest, param: promptParam, code: "context_length_exceeded",
			message: fmt.Sprintf("the prompt is %d tokens but the model's context holds %d tokens for prompt and reply together: shorten the %s (or serve a larger model.context, if the model allows it)", len(prompt), ctxLen, promptParam)}
	}
	// A bound the client set must fit, as OpenAI and vLLM answer; the config's default is
	// lowered to what the context leaves, since the client asked for nothing too long.
	room := ctxLen - len(prompt)
	maxTokens := min(rt.Sampling.MaxTokens, room)
	if p.MaxTokens != nil {
		if *p.MaxTokens > room {
			param := cmp.Or(p.maxTokensParam, "max_tokens")
			return nil, &apiError{status: http.StatusBadRequest, typ: errInvalidRequest, param: param, code: "context_length_exceeded",
				message: fmt.Sprintf("%s is %d but the context holds %d tokens and the prompt is %d tokens: at most %d; lower %s or shorten the %s", param, *p.MaxTokens, ctxLen, len(prompt), room, param, promptParam)}
		}
		maxTokens = *p.MaxTokens
	}
	return &job{
		req: scheduler.Request{
			Prompt:     prompt,
			MaxTokens:  maxTokens,
			Sampling:   sampling,
			StopTokens: h.served.EOS,
			Drafts:     drafts(rt.Drafts, p.Draft),
		},
		seeds:        h.choiceSeeds(sampling.Seed, p.Seed, n),
		promptParam:  promptParam,
		stops:        stops,
		stream:       p.Stream,
		includeUsage: p.Stream && p.StreamOptions != nil && p.StreamOptions.IncludeUsage,
		stall:        rt.StallTimeout,
	}, nil
}

// drafts returns how a request may draft under the [drafts] settings d: not at all when drafting
// is off in the config or the request asked for none ("draft": false); else from the MTP head
// in chains up to mtp_max deep and by n-gram copies when ngram allows.
func drafts(d config.DraftsConfig, requested *bool) scheduler.Drafts {
	if !d.Enabled || (requested != nil && !*requested) {
		return scheduler.Drafts{}
	}
	mtp, ngram := d.Depths()
	return scheduler.Drafts{MTP: mtp, NGram: ngram}
}

// checkMaxTokens rejects a reply bound below 1.
func checkMaxTokens(param string, n *int) *apiError {
	if n != nil && *n < 1 {
		return badRequest(param, "%s must be at least 1, got %d", param, *n)
	}
	return nil
}

// sampling validates p's sampling fields and fills the unset ones: the config's [sampling]
// defaults first, then the model's generation_config, then OpenAI's (temperature 1, top_p 1).
func (h *Handler) sampling(p *sampleParams, cfg config.SamplingConfig) (scheduler.Sampling, *apiError) {
	if e := checkMaxTokens("max_tokens", p.MaxTokens); e != nil {
		return scheduler.Sampling{}, e
	}
	checks := []struct {
		param string
		v     *float64
		ok    func(float64) bool
		want  string
	}{
		{"temperature", p.Temperature, func(x float64) bool { return x >= 0 && x <= 2 }, "from 0 to 2 (0 is greedy)"},
		{"top_p", p.TopP, func(x float64) bool { return x > 0 && x <= 1 }, "in (0, 1]"},
		{"min_p", p.MinP, func(x float64) bool { return x >= 0 && x <= 1 }, "from 0 to 1"},
	}
	for _, c := range checks {
		if c.v != nil && !c.ok(*c.v) {
			return scheduler.Sampling{}, badRequest(c.param, "%s must be %s, got %g", c.param, c.want, *c.v)
		}
	}
	if p.TopK != nil && *p.TopK < -1 {
		return scheduler.Sampling{}, badRequest("top_k", "top_k must be -1 or 0 (off) or a positive number, got %d", *p.TopK)
	}
	seed, e := h.parseSeed(p.Seed)
	if e != nil {
		return scheduler.Sampling{}, e
	}
	penalties, e := h.penalties(&p.penaltyParams, cfg)
	if e != nil {
		return scheduler.Sampling{}, e
	}
	model := h.served.Defaults
	return scheduler.Sampling{
		Temperature: float32(pick(p.Temperature, cfg.Temperature, model.Temperature, 1)),
		TopP:        float32(pick(p.TopP, cfg.TopP, model.TopP, 1)),
		MinP:        float32(pick(p.MinP, cfg.MinP, model.MinP, 0)),
		TopK:        max(0, int(pick(intPtrToFloat(p.TopK), float64(cfg.TopK), float64(model.TopK), 0))),
		Seed:        seed,
		Penalties:   penalties,
	}, nil
}

// pick returns the request's value if set, else the first set (non-negative) default, else
// fallback.
func pick(req *float64, cfg, model, fallback float64) float64 {
	switch {
	case req != nil:
		return *req
	case cfg >= 0:
		return cfg
	case model >= 0:
		return model
	}
	return fallback
}

func intPtrToFloat(p *int) *float64 {
	if p == nil {
		return nil
	}
	f := float64(*p)
	return &f
}

// parseSeed reads the seed field: an integer from 0 to 2^64-1. Absent, null or -1 (llama.cpp's
// "random") draws a fresh seed, reported back in the response.
func (h *Handler) parseSeed(raw json.RawMessage) (uint64, *apiError) {
	s := strings.TrimSpace(string(raw))
	if s == "" || s == "null" || s == "-1" {
		return h.newSeed(), nil
	}
	seed, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		if f, ferr := strconv.ParseFloat(s, 64); ferr == nil && f >= 0 && f < math.MaxUint64 && f == math.Trunc(f) {
			return uint64(f), nil // 1e3 and 5.0 are whole numbers too
		}
		return 0, badRequest("seed", "seed must be an integer from 0 to 18446744073709551615 (or -1 for a random one), got %s", s)
	}
	return seed, nil
}

// parseStops reads the stop field: a string or an array of up to maxStops non-empty strings.
func parseStops(raw json.RawMessage) ([]string, *apiError) {
	s := strings.TrimSpace(string(raw))
	if s == "" || s == "null" {
		return nil, nil
	}
	var stops []string
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		stops = []string{one}
	} else if err := json.Unmarshal(raw, &stops); err != nil {
		return nil, badRequest("stop", "stop must be a string or an array of strings")
	}
	if len(stops) > maxStops {
		return nil, badRequest("stop", "stop holds %d strings; at most %d are allowed", len(stops), maxStops)
	}
	for i, st := range stops {
		if st == "" {
			return nil, badRequest("stop", "stop[%d] is empty; a stop string needs at least one character", i)
		}
	}
	return stops, nil
}
