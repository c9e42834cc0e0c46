package api

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"tfd/scheduler"
)

func TestErrors(t *testing.T) {
	long := `{"messages":[{"role":"user","content":"` + strings.Repeat("a", 100) + `"}]}`
	chat := func(fields string) string {
		return `{"messages":[{"role":"user","content":"Hi"}]` + fields + `}`
	}
	tests := []struct {
		name       string
		method     string // default POST
		path       string // default /v1/chat/completions
		body       string
		edit       func(*ServedModel, *HandlerOptions)
		status     int
		typ, param string
		code       string
		msg        string // a substring of the message
	}{
		{name: "malformed JSON", body: `{"messages":`, status: 400, msg: "not valid JSON"},
		{name: "body not an object", body: `[1]`, status: 400, msg: "must be a JSON object"},
		{name: "temperature a string", body: chat(`,"temperature":"hot"`), status: 400, param: "temperature", msg: "temperature must be a number, not a JSON string"},
		{name: "stream a string", body: chat(`,"stream":"yes"`), status: 400, param: "stream", msg: "true or false"},
		{name: "role a number", body: `{"messages":[{"role":1,"content":"x"}]}`, status: 400, param: "messages[0].role", msg: "must be a string"},
		{name: "message not an object", body: `{"messages":["hi"]}`, status: 400, param: "messages[0]", msg: "messages[0]"},
		{name: "max_tokens zero", body: chat(`,"max_tokens":0`), status: 400, param: "max_tokens", msg: "at least 1"},
		{name: "max_completion_tokens negative", body: chat(`,"max_completion_tokens":-3`), status: 400, param: "max_completion_tokens", msg: "at least 1, got -3"},
		{name: "max_tokens fractional", body: chat(`,"max_tokens":1.5`), status: 400, param: "max_tokens", msg: "an integer"},
		{name: "temperature negative", body: chat(`,"temperature":-0.5`), status: 400, param: "temperature", msg: "from 0 to 2"},
		{name: "temperature over 2", body: chat(`,"temperature":2.5`), status: 400, param: "temperature", msg: "got 2.5"},
		{name: "top_p zero", body: chat(`,"top_p":0`), status: 400, param: "top_p", msg: "(0, 1]"},
		{name: "top_p over 1", body: chat(`,"top_p":1.5`), status: 400, param: "top_p", msg: "(0, 1]"},
		{name: "min_p over 1", body: chat(`,"min_p":2`), status: 400, param: "min_p", msg: "from 0 to 1"},
		{name: "top_k below -1", body: chat(`,"top_k":-2`), status: 400, param: "top_k", msg: "got -2"},
		{name: "n nine", body: chat(`,"n":9`), status: 400, param: "n", msg: "n must be from 1 to 8"},
		{name: "seed a string", body: chat(`,"seed":"abc"`), status: 400, param: "seed", msg: "integer"},
		{name: "seed negative", body: chat(`,"seed":-5`), status: 400, param: "seed", msg: "got -5"},
		{name: "too many stops", body: chat(`,"stop":["a","b","c","d","e"]`), status: 400, param: "stop", msg: "at most 4"},
		{name: "stop a number", body: chat(`,"stop":5`), status: 400, param: "stop", msg: "string or an array"},
		{name: "stop empty", body: chat(`,"stop":["a",""]`), status: 400, param: "stop", msg: "stop[1] is empty"},
		{name: "messages missing", body: `{}`, status: 400, param: "messages", msg: "at least one message"},
		{name: "messages empty", body: `{"messages":[]}`, status: 400, param: "messages", msg: "at least one message"},
		{name: "role unknown", body: `{"messages":[{"role":"robot","content":"x"}]}`, status: 400, param: "messages[0].role", msg: `"robot" is unknown`},
		{name: "role missing", body: `{"messages":[{"content":"x"}]}`, status: 400, param: "messages[0].role", msg: "missing"},
		{name: "image part", body: `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`, status: 400, param: "messages[0].content[0].type", msg: "only text parts"},
		{name: "user content null", body: `{"messages":[{"role":"user","content":null}]}`, status: 400, param: "messages[0].content", msg: "only an assistant message with tool_calls"},
		{name: "system content missing", body: `{"messages":[{"role":"system"},{"role":"user","content":"x"}]}`, status: 400, param: "messages[0].content", msg: "messages[0].content is missing"},
		{name: "assistant content null without calls", body: `{"messages":[{"role":"user","content":"x"},{"role":"assistant","content":null,"tool_calls":[]},{"role":"user","content":"y"}]}`,
			status: 400, param: "messages[1].content", msg: "is null"},
		{name: "body not UTF-8", body: "{\"messages\":[{\"role\":\"user\",\"content\":\"caf\xe9\"}]}", status: 400, msg: "not valid UTF-8: byte 42 (0xe9) does not begin a UTF-8 character"},
		{name: "max_tokens over the context", body: chat(`,"max_tokens":100000`), status: 400, param: "max_tokens", code: "context_length_exceeded",
			msg: "max_tokens is 100000 but the context holds 64 tokens and the prompt is 20 tokens: at most 44"},
		{name: "max_completion_tokens over the context", body: chat(`,"max_completion_tokens":45`), status: 400, param: "max_completion_tokens", code: "context_length_exceeded",
			msg: "max_completion_tokens is 45 but the context holds 64 tokens and the prompt is 20 tokens: at most 44"},
		{name: "completion max_tokens over the context", path: "/v1/completions", body: `{"prompt":"Hello","max_tokens":64}`, status: 400, param: "max_tokens", code: "context_length_exceeded", msg: "at most 63"},
		{name: "content a number", body: `{"messages":[{"role":"user","content":5}]}`, status: 400, param: "messages[0].content", msg: "string or an array of text parts"},
		{name: "top_logprobs over 20", body: chat(`,"logprobs":true,"top_logprobs":21`), status: 400, param: "top_logprobs", msg: "from 0 to 20"},
		{name: "top_logprobs without logprobs", body: chat(`,"top_logprobs":2`), status: 400, param: "top_logprobs", msg: "needs logprobs"},
		{name: "response_format without a vocabulary", body: chat(`,"response_format":{"type":"json_object"}`), status: 400, param: "response_format", msg: "cannot be constrained"},
		{name: "response_format unknown", body: chat(`,"response_format":{"type":"xml"}`), status: 400, param: "response_format", msg: `"xml" is unknown`},
		{name: "json_schema keyword unsupported", body: chat(`,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"string","pattern":"a+"}}}`), status: 400, param: "response_format", msg: `the keyword "pattern" at # is not supported`},
		{name: "json_schema without schema", body: chat(`,"response_format":{"type":"json_schema","json_schema":{"name":"x"}}`), status: 400, param: "response_format", msg: "needs json_schema.schema"},
		{name: "template raises", body: chat(`,"chat_template_kwargs":{"fail":true}`), status: 400, param: "messages", msg: "roles must alternate"},
		{name: "no template", body: chat(``), edit: func(m *ServedModel, _ *HandlerOptions) { m.Template = nil }, status: 400, param: "messages", msg: "/v1/completions"},
		{name: "prompt over the context", body: long, status: 400, param: "messages", code: "context_length_exceeded", msg: "the prompt is 118 tokens but the model's context holds 64"},
		{name: "prompt over a session", body: chat(``), edit: func(m *ServedModel, _ *HandlerOptions) {
			m.Host.(*fakeHost).submitErr = &scheduler.PromptTooLongError{Prompt: 9, Context: 8}
		}, status: 400, param: "messages", code: "context_length_exceeded", msg: "largest session holds 8"},
		{name: "unknown model", body: `{"model":"gpt-4o","messages":[{"role":"user","content":"x"}]}`, status: 404, param: "model", code: "model_not_found", msg: `serves "gopher"`},
		{name: "unknown model by id", method: "GET", path: "/v1/models/gpt-4o", status: 404, param: "model", code: "model_not_found"},
		{name: "GET on chat", method: "GET", status: 405, code: "method_not_allowed", msg: "use POST"},
		{name: "POST on models", method: "POST", path: "/v1/models", status: 405, code: "method_not_allowed", msg: "use GET"},
		{name: "unknown path", method: "GET", path: "/v2/things", status: 404, code: "unknown_url", msg: "/v1/chat/completions"},
		{name: "body too large", body: chat(`,"pad":"` + strings.Repeat("x", 2000) + `"`), edit: func(_ *ServedModel, o *HandlerOptions) { o.MaxBodyBytes = 1000 },
			status: 413, code: "request_too_large", msg: "limit of 1000 bytes"},
		{name: "queue full", body: chat(``), edit: func(m *ServedModel, _ *HandlerOptions) { m.Host.(*fakeHost).submitErr = scheduler.ErrQueueFull },
			status: 503, typ: errServer, code: "queue_full", msg: "retry"},
		{name: "host closed", body: chat(``), edit: func(m *ServedModel, _ *HandlerOptions) { m.Host.(*fakeHost).submitErr = scheduler.ErrClosed },
			status: 503, typ: errServer, code: "shutting_down"},
		{name: "host fails", body: chat(``), edit: func(m *ServedModel, _ *HandlerOptions) { m.Host.(*fakeHost).submitErr = errors.New("boom") },
			status: 500, typ: errServer, code: "internal_error", msg: "boom"},
		{name: "no API key", method: "GET", path: "/v1/models", edit: withKeys, status: 401, code: "invalid_api_key", msg: "Authorization: Bearer"},
		{name: "completion prompt missing", path: "/v1/completions", body: `{}`, status: 400, param: "prompt", msg: "missing"},
		{name: "completion prompt empty", path: "/v1/completions", body: `{"prompt":""}`, status: 400, param: "prompt", msg: "empty"},
		{name: "completion two prompts", path: "/v1/completions", body: `{"prompt":["a","b"]}`, status: 400, param: "prompt", msg: "one prompt per request"},
		{name: "completion token prompt", path: "/v1/completions", body: `{"prompt":[1,2,3]}`, status: 400, param: "prompt", msg: "token-id prompts are not supported"},
		{name: "completion echo", path: "/v1/completions", body: `{"prompt":"a","echo":true}`, status: 400, param: "echo"},
		{name: "completion logprobs 6", path: "/v1/completions", body: `{"prompt":"a","logprobs":6}`, status: 400, param: "logprobs", msg: "from 0 to 5"},
		{name: "completion best_of", path: "/v1/completions", body: `{"prompt":"a","best_of":3}`, status: 400, param: "best_of"},
		{name: "completion over the context", path: "/v1/completions", body: `{"prompt":"` + strings.Repeat("b", 64) + `"}`, status: 400, param: "prompt", code: "context_length_exceeded", msg: "shorten the prompt"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t, tc.edit)
			method, path := cmp.Or(tc.method, "POST"), cmp.Or(tc.path, "/v1/chat/completions")
			w := env.do(method, path, tc.body)
			if w.Code != tc.status {
				t.Fatalf("status %d, want %d; body %s", w.Code, tc.status, w.Body)
			}
			var got errorBody
			if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
				t.Fatalf("body is not an OpenAI error: %v: %s", err, w.Body)
			}
			e := got.Error
			if want := cmp.Or(tc.typ, errInvalidRequest); e.Type != want {
				t.Errorf("type %q, want %q", e.Type, want)
			}
			if deref(e.Param) != tc.param {
				t.Errorf("param %q, want %q", deref(e.Param), tc.param)
			}
			if deref(e.Code) != tc.code {
				t.Errorf("code %q, want %q", deref(e.Code), tc.code)
			}
			if !strings.Contains(e.Message, tc.msg) {
				t.Errorf("message %q does not say %q", e.Message, tc.msg)
			}
			if tc.status == 503 && w.Header().Get("Retry-After") == "" {
				t.Error("503 without Retry-After")
			}
			if tc.status == 405 && w.Header().Get("Allow") == "" {
				t.Error("405 without Allow")
			}
		})
	}
}

// TestRequestsAccepted are near misses of the errors above that must be answered 200.
func TestRequestsAccepted(t *testing.T) {
	for _, tc := range []struct{ name, path, body string }{
		{"assistant content null beside tool calls", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"},
			{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},
			{"role":"tool","tool_call_id":"c1","content":"42"}]}`},
		{"user content empty", "/v1/chat/completions", `{"messages":[{"role":"user","content":""}]}`},
		{"UTF-8 beyond ASCII", "/v1/chat/completions", `{"messages":[{"role":"user","content":"café ☕ 𝄞"}]}`},
		{"max_tokens that just fits", "/v1/chat/completions", `{"messages":[{"role":"user","content":"Hi"}],"max_tokens":44}`},
		{"completion max_tokens that just fits", "/v1/completions", `{"prompt":"Hello","max_tokens":63}`},
	} {
		env := newTestEnv(t, nil)
		if w := env.do("POST", tc.path, tc.body); w.Code != http.StatusOK {
			t.Errorf("%s: status %d %s", tc.name, w.Code, w.Body)
		}
	}
}

// TestDefaultMaxTokensClamped: a request that sets no max_tokens gets the config's default,
// lowered to what the context leaves, never a 400 (the client asked for nothing too long).
func TestDefaultMaxTokensClamped(t *testing.T) {
	env := newTestEnv(t, nil) // sampling.max_tokens 4096, a 64-token context
	for _, path := range []string{"/v1/chat/completions", "/v1/completions"} {
		body := `{"messages":[{"role":"user","content":"Hi"}]}`
		if path == "/v1/completions" {
			body = `{"prompt":"Hello"}`
		}
		if w := env.do("POST", path, body); w.Code != http.StatusOK {
			t.Fatalf("%s: status %d %s", path, w.Code, w.Body)
		}
		req := env.host.lastRequest(t)
		if want := 64 - len(req.Prompt); req.MaxTokens != want {
			t.Errorf("%s: max tokens %d, want the %d the context leaves", path, req.MaxTokens, want)
		}
	}
}

func withKeys(_ *ServedModel, o *HandlerOptions) { o.APIKeys = []string{"sk-one", "sk-two"} }

func TestAPIKeys(t *testing.T) {
	env := newTestEnv(t, withKeys)
	for _, tc := range []struct {
		path, auth string
		status     int
	}{
		{"/v1/models", "", http.StatusUnauthorized},
		{"/v1/models", "Bearer sk-wrong", http.StatusUnauthorized},
		{"/v1/models", "sk-one", http.StatusUnauthorized},
		{"/v1/models", "Bearer sk-two", http.StatusOK},
		{"/v1/models", "bearer sk-two", http.StatusOK}, // the scheme is case-insensitive (RFC 7235)
		{"/v1/models", "BEARER  sk-one", http.StatusOK},
		{"/v1/models", "Basic sk-one", http.StatusUnauthorized},
		{"/v1/models", "Bearer", http.StatusUnauthorized},
		{"/v1/models", "Bearersk-one", http.StatusUnauthorized},
		{"/health", "", http.StatusOK},
	} {
		w := env.do("GET", tc.path, "", "Authorization", tc.auth)
		if w.Code != tc.status {
			t.Errorf("GET %s with %q: status %d, want %d", tc.path, tc.auth, w.Code, tc.status)
		}
	}
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// TestQueueFullRetryAfter: a full queue's Retry-After is the host's estimate of when a place
// frees, rounded up to whole seconds, from 1 to maxRetryAfter.
func TestQueueFullRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&scheduler.QueueFullError{RetryAfter: 40*time.Second + 300*time.Millisecond}, "41"},
		{&scheduler.QueueFullError{RetryAfter: 3 * time.Second}, "3"},
		{&scheduler.QueueFullError{RetryAfter: 0}, "1"},
		{&scheduler.QueueFullError{RetryAfter: 2 * time.Hour}, "600"},
		{fmt.Errorf("wrapped: %w", &scheduler.QueueFullError{RetryAfter: 7 * time.Second}), "7"},
		{scheduler.ErrQueueFull, "1"}, // a host that gives no estimate
	} {
		env := newTestEnv(t, func(m *ServedModel, _ *HandlerOptions) { m.Host.(*fakeHost).submitErr = tc.err })
		w := env.do("POST", "/v1/completions", `{"prompt":"Hi"}`)
		if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), `"queue_full"`) {
			t.Fatalf("%v: status %d %s", tc.err, w.Code, w.Body)
		}
		if got := w.Header().Get("Retry-After"); got != tc.want {
			t.Errorf("%#v: Retry-After %q, want %q", tc.err, got, tc.want)
		}
		if !strings.Contains(w.Body.String(), "retry in about "+tc.want+" s") {
			t.Errorf("%v: the message does not say when to retry: %s", tc.err, w.Body)
		}
	}
}
