package api

import (
	"testing"
)

// TestChatChoicesStream: a streamed chat of n = 2 opens each choice with its role chunk, names
// each chunk's choice, gives each choice its finish reason and its own tfd object, seeded with
// the request's seed plus its index, and sums the usage.
func TestChatChoicesStream(t *testing.T) {
	env := newTestEnv(t, nil)
	w := env.do("POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"Hi"}],"n":2,"seed":5,"stream":true,"stream_options":{"include_usage":true}}`)
	type seen struct {
		role, text string
		finish     string
		seed       uint64
	}
	got := make([]seen, 2)
	var u *usage
	for _, c := range readStream(t, w.Body.String()) {
		if c.Usage != nil {
			u = c.Usage
		}
		for _, ch := range c.Choices {
			s := &got[ch.Index]
			if ch.Delta.Role != "" {
				s.role = ch.Delta.Role
			}
			if ch.Delta.Content != nil {
				s.text += *ch.Delta.Content
			}
			if ch.FinishReason != nil {
				s.finish = *ch.FinishReason
				if ch.TFD == nil {
					t.Fatalf("choice %d's finish chunk has no tfd", ch.Index)
				}
				s.seed = ch.TFD.Seed
			}
		}
	}
	for i, s := range got {
		if s != (seen{"assistant", "Hello, world!", "stop", 5 + uint64(i)}) {
			t.Errorf("choice %d: %+v", i, s)
		}
	}
	if u == nil || u.CompletionTokens != 8 {
		t.Errorf("usage %+v, want 8 completion tokens", u)
	}
}
