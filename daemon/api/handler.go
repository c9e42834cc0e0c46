package api

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"log/slog"
	mrand "math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"tfd/daemon/api/toolcall"
	"tfd/daemon/config"
	"tfd/daemon/metrics"
)

// defaultMaxBodyBytes bounds a request body when HandlerOptions.MaxBodyBytes is 0.
const defaultMaxBodyBytes = 8 << 20

// DefaultBodyTimeout bounds the arrival of a request body when HandlerOptions.BodyTimeout is 0:
// 8 MiB take well under a second on any link a local server sees.
const DefaultBodyTimeout = 30 * time.Second

// HandlerOptions configure a [Handler].
type HandlerOptions struct {
	// Routing holds the settings a config reload changes while the Handler serves.
	Routing
	// Logger receives one line per request; nil: slog.Default().
	Logger *slog.Logger
	// MaxBodyBytes bounds a request body; 0: defaultMaxBodyBytes.
	MaxBodyBytes int64
	// BodyTimeout bounds the time from a request's start to the end of its body; a body late
	// past it is answered 408 and its connection closed. 0: DefaultBodyTimeout.
	BodyTimeout time.Duration
	// Seed returns a fresh seed for a request without one; nil: a random 53-bit number (exact
	// in every JSON client). A test hook.
	Seed func() uint64
	// Metrics, if set, counts every request.
	Metrics *metrics.Metrics
}

// Routing is the part of a Handler's settings that a config reload changes while it serves.
type Routing struct {
	// Sampling holds the [sampling] defaults for requests that set none.
	Sampling config.SamplingConfig
	// Drafts holds the [drafts] settings; the zero value drafts nothing.
	Drafts config.DraftsConfig
	// APIKeys are the bearer keys accepted; empty: no authentication.
	APIKeys []string
	// StallTimeout cancels a streamed reply whose client has not taken an event for this long
	// (server.stall_timeout); 0: never.
	StallTimeout time.Duration
}

// Handler serves tfd's OpenAI-compatible HTTP API for one model. It is safe for concurrent use.
type Handler struct {
	served  ServedModel
	opts    HandlerOptions
	mux     *http.ServeMux
	routing atomic.Pointer[Routing] // replaced whole by SetRouting; each request reads it once

	tools       *toolcall.Syntax // how the model writes tool calls, told from its chat template
	toolMarkers []int32          // the special tokens that begin its calls, kept in replies that may call
	// harmonyMarkers, for a model whose template writes GPT-OSS's harmony format, are the ids of
	// its markers, which every chat reply's text keeps so that its channels and calls can be read
	// (toolcall.Harmony); nil for any other model.
	harmonyMarkers []int32
}

// NewHandler returns the API handler for m. m.Tokenizer and m.Host must be set, and m.Context
// must be positive.
func NewHandler(m ServedModel, opts HandlerOptions) *Handler {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.MaxBodyBytes == 0 {
		opts.MaxBodyBytes = defaultMaxBodyBytes
	}
	if opts.BodyTimeout == 0 {
		opts.BodyTimeout = DefaultBodyTimeout
	}
	h := &Handler{served: m, opts: opts, mux: http.NewServeMux()}
	h.tools, h.toolMarkers = toolsOf(m)
	h.harmonyMarkers = harmonyOf(m)
	h.SetRouting(opts.Routing)
	h.route("GET /health", h.health)
	h.route("GET /v1/models", h.listModels)
	h.route("GET /v1/models/{id...}", h.getModel) // ids may hold slashes: "Qwen/Qwen3-8B"
	h.route("POST /v1/chat/completions", h.chatCompletions)
	h.route("POST /v1/completions", h.completions)
	h.route("POST /tokenize", h.tokenize)
	h.route("POST /detokenize", h.detokenize)
	h.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &apiError{status: http.StatusNotFound, typ: errInvalidRequest, code: "unknown_url",
			message: "unknown path " + r.URL.Path + ": tfd serves /v1/models, /v1/chat/completions, /v1/completions, /tokenize, /detokenize, /v1/tfd/status, /metrics and /health"})
	})
	return h
}

// SetRouting replaces the sampling defaults, drafts, API keys and stall timeout; requests that
// started before keep the ones they began with. A zero Sampling.MaxTokens becomes the default.
func (h *Handler) SetRouting(r Routing) {
	if r.Sampling.MaxTokens <= 0 {
		r.Sampling.MaxTokens = config.Default().Sampling.MaxTokens
	}
	h.routing.Store(&r)
}

// route registers handler for "METHOD /path" and answers other methods on the path with 405.
func (h *Handler) route(pattern string, handler http.HandlerFunc) {
	method, path, _ := strings.Cut(pattern, " ")
	h.mux.HandleFunc(pattern, handler)
	h.mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) { WriteMethodNotAllowed(w, r, method) })
}

// ServeHTTP logs the request, checks its key and bounds its body and answer, then routes it.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	stats := &requestStats{}
	rec := &statusRecorder{ResponseWriter: w, writeBound: cmp.Or(h.routing.Load().StallTimeout, config.DefaultStallTimeout)}
	if r.ContentLength != 0 {
		// A deadline for the whole body, whoever reads it: decodeBody, or net/http draining an
		// unread body (after a 401, 404 or 405) before it answers. Without it a client that sends
		// part of its body and then nothing would hold the connection for ever.
		http.NewResponseController(w).SetReadDeadline(start.Add(h.opts.BodyTimeout)) // not every ResponseWriter supports it
	}
	r = r.WithContext(context.WithValue(r.Context(), statsKey{}, stats))
	defer func() {
		elapsed := time.Since(start)
		h.logRequest(r, rec.status(), stats, elapsed)
		if r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/v1/") { // the completion endpoints; /health, /v1/models and /tokenize are not counted
			h.opts.Metrics.ObserveRequest(stats.observed(rec.status(), start))
		}
	}()
	if r.URL.Path != "/health" && !Authorize(rec, r, h.routing.Load().APIKeys) { // monitors poll /health without credentials
		return
	}
	r.Body = http.MaxBytesReader(rec, r.Body, h.opts.MaxBodyBytes)
	h.mux.ServeHTTP(rec, r)
}

// Authorize reports whether r may use the API under keys: always when there are none, else when
// its Authorization header is "Bearer <one of keys>". The scheme is case-insensitive (RFC 7235),
// so "bearer" is as good as "Bearer". A request that may not is answered 401 here.
func Authorize(w http.ResponseWriter, r *http.Request, keys []string) bool {
	if hasKey(r, keys) {
		return true
	}
	w.Header().Set("WWW-Authenticate", "Bearer")
	writeError(w, &apiError{status: http.StatusUnauthorized, typ: errInvalidRequest, code: "invalid_api_key",
		message: "missing or wrong API key: send the header Authorization: Bearer <key>, with a key from the server's api_keys_file"})
	return false
}

// hasKey reports whether r may use the API under keys (see Authorize).
func hasKey(r *http.Request, keys []string) bool {
	if len(keys) == 0 {
		return true
	}
	scheme, key, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	key = strings.TrimSpace(key)
	var match int
	for _, k := range keys {
		match |= subtle.ConstantTimeCompare([]byte(k), []byte(key))
	}
	return match == 1
}

func (h *Handler) logRequest(r *http.Request, status int, stats *requestStats, elapsed time.Duration) {
	attrs := []slog.Attr{
		slog.String("method", r.Method),
		slog.String("path", r.URL.Path),
		slog.Int("status", status),
		slog.Duration("duration", elapsed),
	}
	if prompt, completion := stats.prompt.Load(), stats.completion.Load(); prompt > 0 {
		attrs = append(attrs, slog.Int64("prompt_tokens", prompt), slog.Int64("completion_tokens", completion))
	}
	if stats.clientGone.Load() {
		attrs = append(attrs, slog.Bool("client_gone", true))
	}
	h.opts.Logger.LogAttrs(r.Context(), slog.LevelInfo, "request", attrs...)
}

// newSeed returns a seed for a request that gave none.
func (h *Handler) newSeed() uint64 {
	if h.opts.Seed != nil {
		return h.opts.Seed()
	}
	return mrand.Uint64() >> 11
}

// newID returns a response id such as "chatcmpl-…".
func newID(prefix string) string { return prefix + "-" + strings.ToLower(rand.Text()) }

// requestStats carries a request's token counts from its handler to the request log and the
// metrics.
type requestStats struct {
	prompt, completion atomic.Int64
	clientGone         atomic.Bool  // the client left before the reply ended
	lateStatus         atomic.Int32 // the status of an error sent inside a stream that began with 200

	// firstToken and lastToken time the reply's first and last generated tokens; zero when
	// none came. Written by the goroutines of the request's choices, read once they are done.
	mu                    sync.Mutex // guards firstToken, lastToken and tokens
	firstToken, lastToken time.Time
	tokens                int
}

func statsOf(ctx context.Context) *requestStats {
	if s, ok := ctx.Value(statsKey{}).(*requestStats); ok {
		return s
	}
	return &requestStats{} // a handler used without ServeHTTP, in tests
}

type statsKey struct{}

// noteTokens records a request's token counts for its log line and the metrics.
func noteTokens(ctx context.Context, prompt int, res result) {
	s := statsOf(ctx)
	s.prompt.Store(int64(prompt))
	s.completion.Store(int64(len(res.tokens)))
}

// statusRecorder remembers the status a handler wrote, for the request log, and bounds the
// writing of the answer: as the header goes out it sets a write deadline writeBound away. A
// whole answer (JSON) follows its header at once, so its client must take all of it within the
// bound, or the connection is dropped; a stream moves the deadline before each event (see sse).
type statusRecorder struct {
	http.ResponseWriter
	code       int
	writeBound time.Duration
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.code == 0 {
		s.code = code
		s.bound()
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.code == 0 {
		s.code = http.StatusOK
		s.bound()
	}
	return s.ResponseWriter.Write(b)
}

// bound sets the answer's write deadline.
func (s *statusRecorder) bound() {
	http.NewResponseController(s.ResponseWriter).SetWriteDeadline(time.Now().Add(s.writeBound)) // not every ResponseWriter supports it
}

// Unwrap lets http.ResponseController reach the connection (Flush, read deadlines).
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func (s *statusRecorder) status() int {
	if s.code == 0 {
		return http.StatusOK
	}
	return s.code
}

// observed is the request as the metrics count it, answered with status: an error sent inside a
// stream that began with 200 counts with its own status.
func (s *requestStats) observed(status int, start time.Time) metrics.Request {
	if late := int(s.lateStatus.Load()); late != 0 {
		status = late
	}
	return metrics.Request{Status: status, ClientGone: s.clientGone.Load(), Start: start,
		PromptTokens: s.prompt.Load(), CompletionTokens: s.completion.Load(),
		Tokens: s.tokens, FirstToken: s.firstToken, LastToken: s.lastToken}
}

// noteToken records the arrival of a generated token.
func (s *requestStats) noteToken(at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tokens == 0 {
		s.firstToken = at
	}
	s.lastToken = at
	s.tokens++
}

// templateSource is the optional ability of a Template to give its text; *chattemplate.Template
// has it. A template without it is taken to write Hermes calls.
type templateSource interface{ Source() string }

// toolsOf returns m's tool-call syntax and the ids of the special tokens among its markers.
func toolsOf(m ServedModel) (*toolcall.Syntax, []int32) {
	syntax := toolcall.Hermes
	if src, ok := m.Template.(templateSource); ok {
		syntax = toolcall.Detect(src.Source())
	}
	return syntax, specialIDs(m, syntax.Markers())
}

// harmonyOf returns the ids of the harmony format's markers when m's template writes it
// (GPT-OSS), else nil.
func harmonyOf(m ServedModel) []int32 {
	src, ok := m.Template.(templateSource)
	if !ok || !toolcall.IsHarmony(src.Source()) {
		return nil
	}
	return specialIDs(m, toolcall.HarmonyMarkers)
}

// specialIDs returns the ids of those of markers that m's tokenizer holds as one special token.
func specialIDs(m ServedModel, markers []string) []int32 {
	var keep []int32
	if m.Tokenizer == nil {
		return nil
	}
	for _, marker := range markers {
		if ids := m.Tokenizer.Encode(marker); len(ids) == 1 && m.Tokenizer.IsSpecial(ids[0]) {
			keep = append(keep, ids[0])
		}
	}
	return keep
}
