package api

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// FuzzRequests sends arbitrary bodies to the completion endpoints: whatever arrives, the answer is
// a reply (200) or a client error in OpenAI's shape, never a server error or a panic. `go test`
// runs the seeds; `go test -fuzz FuzzRequests ./daemon` explores further.
func FuzzRequests(f *testing.F) {
	for _, seed := range []string{
		`{"messages":[{"role":"user","content":"hi"}],"max_tokens":3}`,
		`{"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"stream":true}`,
		`{"prompt":"hello","max_tokens":2,"stop":["x","y"],"seed":7,"temperature":0.5}`,
		`{"prompt":["a"],"logprobs":0,"top_p":1,"min_p":0.1,"top_k":3,"draft":false}`,
		`{"messages":[],"n":2}`, `{"prompt":123}`, `{`, `null`, `[]`, `{"max_tokens":-1}`,
		`{"messages":[{"role":"wizard","content":"x"}]}`, `{"prompt":"` + strings.Repeat("a", 300) + `"}`,
		`{"model":"nope","prompt":"x"}`, `{"seed":-1,"prompt":"x"}`, `{"seed":1e40,"prompt":"x"}`,
	} {
		f.Add(seed, true)
		f.Add(seed, false)
	}
	f.Fuzz(func(t *testing.T, body string, chat bool) {
		path := "/v1/completions"
		if chat {
			path = "/v1/chat/completions"
		}
		env := newTestEnv(t, nil)
		w := env.do(http.MethodPost, path, body)
		switch {
		case w.Code == http.StatusOK:
			return
		case w.Code >= 500 || w.Code < 400:
			t.Fatalf("POST %s %q: status %d\n%s", path, body, w.Code, w.Body)
		}
		var e struct {
			Error *struct {
				Message string `json:"message"`
				Type    string `json:"type"`
			} `json:"error"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Error == nil || e.Error.Message == "" || e.Error.Type == "" {
			t.Fatalf("POST %s %q: status %d with a body not in OpenAI's error shape: %s", path, body, w.Code, w.Body)
		}
	})
}
