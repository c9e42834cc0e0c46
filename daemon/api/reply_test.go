package api

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"tfd/daemon/config"
	"tfd/scheduler"
)

// chatResponse decodes both whole chat responses and stream chunks.
type chatResponse struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Index   int `json:"index"`
		Message *struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"message"`
		Delta *struct {
			Role    string  `json:"role"`
			Content *string `json:"content"`
		} `json:"delta"`
		Text     string `json:"text"`
		Logprobs *struct {
			Content []struct {
				Token   string  `json:"token"`
				Logprob float32 `json:"logprob"`
				Bytes   []int   `json:"bytes"`
			} `json:"content"`
			Tokens        []string  `json:"tokens"`
			TokenLogprobs []float32 `json:"token_logprobs"`
		} `json:"logprobs"`
		FinishReason *string  `json:"finish_reason"`
		TFD          *tfdInfo `json:"tfd"`
	} `json:"choices"`
	Usage *usage   `json:"usage"`
	TFD   *tfdInfo `json:"tfd"`
}

func decodeResponse(t *testing.T, w *httptest.ResponseRecorder) chatResponse {
	t.Helper()
	if w.Code != http.StatusOK {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	var r chatResponse
	if err := json.Unmarshal(w.Body.Bytes(), &r); err != nil {
		t.Fatalf("decode %s: %v", w.Body, err)
	}
	return r
}

// readStream splits an SSE body into its data payloads, checking the framing; the last payload
// must be [DONE], which is dropped.
func readStream(t *testing.T, body string) []chatResponse {
	t.Helper()
	if !strings.HasSuffix(body, "data: [DONE]\n\n") {
		t.Fatalf("stream does not end with data: [DONE]: %q", body)
	}
	var out []chatResponse
	for _, event := range strings.Split(strings.TrimSuffix(body, "data: [DONE]\n\n"), "\n\n") {
		if event == "" {
			continue
		}
		payload, ok := strings.CutPrefix(event, "data: ")
		if !ok || strings.Contains(payload, "\n") {
			t.Fatalf("malformed event %q", event)
		}
		var c chatResponse
		if err := json.Unmarshal([]byte(payload), &c); err != nil {
			t.Fatalf("decode chunk %s: %v", payload, err)
		}
		out = append(out, c)
	}
	return out
}

func TestChat(t *testing.T) {
	env := newTestEnv(t, nil)
	w := env.do("POST", "/v1/chat/completions", `{"model":"gopher","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":[{"type":"text","text":"Hi"},{"type":"text","text":"there"}]}]}`)
	r := decodeResponse(t, w)
	if r.Object != "chat.completion" || r.Model != "gopher" || !strings.HasPrefix(r.ID, "chatcmpl-") {
		t.Errorf("object %q model %q id %q", r.Object, r.Model, r.ID)
	}
	c := r.Choices[0]
	if c.Message.Role != "assistant" || c.Message.Content != "Hello, world!" || *c.FinishReason != "stop" {
		t.Errorf("message %+v finish %q", c.Message, *c.FinishReason)
	}
	prompt := env.tok.Encode("<|im_start|>system\nBe brief.\n<|im_start|>user\nHi\nthere\n<|im_start|>assistant\n")
	if got := env.host.lastRequest(t).Prompt; !reflect.DeepEqual(got, prompt) {
		t.Errorf("prompt %v, want %v", got, prompt)
	}
	want := usage{PromptTokens: len(prompt), CompletionTokens: 4, TotalTokens: len(prompt) + 4}
	if *r.Usage != want {
		t.Errorf("usage %+v, want %+v", *r.Usage, want)
	}
	wantTFD := tfdInfo{Seed: 42, TokensHash: tokensHash(env.tok.ids("Hello", ",", " world", "!"))}
	if *r.TFD != wantTFD {
		t.Errorf("tfd %+v, want %+v", *r.TFD, wantTFD)
	}
}

func TestChatStream(t *testing.T) {
	for _, includeUsage := range []bool{false, true} {
		env := newTestEnv(t, nil)
		body := `{"messages":[{"role":"user","content":"Hi"}],"stream":true,"max_tokens":3,"seed":7`
		if includeUsage {
			body += `,"stream_options":{"include_usage":true}`
		}
		w := env.do("POST", "/v1/chat/completions", body+"}")
		if ct := w.Header().Get("Content-Type"); ct != "text/event-stream" {
			t.Fatalf("Content-Type %q", ct)
		}
		chunks := readStream(t, w.Body.String())
		if d := chunks[0].Choices[0].Delta; d.Role != "assistant" || d.Content == nil || *d.Content != "" {
			t.Errorf("first chunk %+v, want the assistant role and empty content", d)
		}
		var text strings.Builder
		var final *chatResponse
		for i, c := range chunks {
			if c.Object != "chat.completion.chunk" {
				t.Errorf("chunk %d object %q", i, c.Object)
			}
			if len(c.Choices) == 1 && c.Choices[0].Delta.Content != nil {
				text.WriteString(*c.Choices[0].Delta.Content)
			}
			if len(c.Choices) == 1 && c.Choices[0].FinishReason != nil {
				final = &chunks[i]
			}
		}
		if text.String() != "Hello, world" {
			t.Errorf("text %q, want %q", text.String(), "Hello, world")
		}
		if final == nil || *final.Choices[0].FinishReason != "length" || final.TFD == nil || final.TFD.Seed != 7 {
			t.Fatalf("no final chunk with finish_reason length and tfd.seed 7: %+v", final)
		}
		last := chunks[len(chunks)-1]
		if includeUsage {
			if len(last.Choices) != 0 || last.Usage == nil || last.Usage.CompletionTokens != 3 || last.TFD == nil {
				t.Errorf("last chunk %+v: want usage with 3 completion tokens, tfd and no choices", last)
			}
		} else if last.Usage != nil {
			t.Errorf("usage sent without include_usage")
		}
	}
}

func TestReplyFails(t *testing.T) {
	env := newTestEnv(t, nil)
	env.host.fail = errors.New("session outgrown")
	w := env.do("POST", "/v1/completions", `{"prompt":"Hi"}`)
	if w.Code != 500 || !strings.Contains(w.Body.String(), "session outgrown") {
		t.Errorf("whole reply: %d %s", w.Code, w.Body)
	}
	w = env.do("POST", "/v1/completions", `{"prompt":"Hi","stream":true}`)
	body := w.Body.String()
	if !strings.Contains(body, `data: {"error":{"message":"daemon: the reply failed: session outgrown"`) || !strings.HasSuffix(body, "data: [DONE]\n\n") {
		t.Errorf("stream: %s", body)
	}
}

func TestCompletion(t *testing.T) {
	env := newTestEnv(t, nil)
	r := decodeResponse(t, env.do("POST", "/v1/completions", `{"prompt":["Hello"],"max_tokens":2,"logprobs":0}`))
	c := r.Choices[0]
	if r.Object != "text_completion" || c.Text != "Hello," || *c.FinishReason != "length" {
		t.Errorf("object %q text %q finish %q", r.Object, c.Text, *c.FinishReason)
	}
	if !reflect.DeepEqual(c.Logprobs.Tokens, []string{"Hello", ","}) || !reflect.DeepEqual(c.Logprobs.TokenLogprobs, []float32{-0.25, -0.25}) {
		t.Errorf("logprobs %+v", c.Logprobs)
	}
	if got := env.host.lastRequest(t); !reflect.DeepEqual(got.Prompt, env.tok.ids("Hello")) || !got.Logprobs {
		t.Errorf("request %+v", got)
	}

	w := env.do("POST", "/v1/completions", `{"prompt":"Hello","stream":true,"stream_options":{"include_usage":true}}`)
	var text strings.Builder
	chunks := readStream(t, w.Body.String())
	for _, ch := range chunks {
		if len(ch.Choices) > 0 {
			text.WriteString(ch.Choices[0].Text)
		}
	}
	if text.String() != "Hello, world!" || chunks[len(chunks)-1].Usage.CompletionTokens != 4 {
		t.Errorf("streamed %q, usage %+v", text.String(), chunks[len(chunks)-1].Usage)
	}
}

func TestChatLogprobs(t *testing.T) {
	env := newTestEnv(t, nil)
	r := decodeResponse(t, env.do("POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"Hi"}],"logprobs":true,"top_logprobs":0}`))
	lp := r.Choices[0].Logprobs
	if lp == nil || len(lp.Content) != 4 || lp.Content[1].Token != "," || lp.Content[1].Logprob != -0.25 || !reflect.DeepEqual(lp.Content[1].Bytes, []int{','}) {
		t.Errorf("logprobs %+v", lp)
	}
}

// TestChatTopLogprobsShape: an entry of top_logprobs is {token, logprob, bytes}, as OpenAI sends
// it, with no top_logprobs of its own; whole and streamed.
func TestChatTopLogprobsShape(t *testing.T) {
	for _, stream := range []bool{false, true} {
		env := newTestEnv(t, nil)
		env.host.top = []scheduler.TokenLogprob{{Token: 2, Logprob: -0.25}, {Token: 3, Logprob: -1.5}}
		body := `{"messages":[{"role":"user","content":"Hi"}],"logprobs":true,"top_logprobs":2,"stream":` + strconv.FormatBool(stream) + `}`
		w := env.do("POST", "/v1/chat/completions", body)
		if w.Code != http.StatusOK {
			t.Fatalf("status %d: %s", w.Code, w.Body)
		}
		payloads := []string{w.Body.String()}
		if stream {
			payloads = nil
			for _, ev := range strings.Split(strings.TrimSuffix(w.Body.String(), "data: [DONE]\n\n"), "\n\n") {
				if p, ok := strings.CutPrefix(ev, "data: "); ok {
					payloads = append(payloads, p)
				}
			}
		}
		var entries int
		for _, p := range payloads {
			var c struct {
				Choices []struct {
					Logprobs *struct {
						Content []struct {
							Token       string                       `json:"token"`
							TopLogprobs []map[string]json.RawMessage `json:"top_logprobs"`
						} `json:"content"`
					} `json:"logprobs"`
				} `json:"choices"`
			}
			if err := json.Unmarshal([]byte(p), &c); err != nil {
				t.Fatalf("decode %s: %v", p, err)
			}
			for _, ch := range c.Choices {
				if ch.Logprobs == nil {
					continue
				}
				for _, e := range ch.Logprobs.Content {
					if len(e.TopLogprobs) != 2 {
						t.Errorf("stream %v: %q has %d top_logprobs, want 2", stream, e.Token, len(e.TopLogprobs))
					}
					for _, alt := range e.TopLogprobs {
						entries++
						keys := slices.Sorted(maps.Keys(alt))
						if !slices.Equal(keys, []string{"bytes", "logprob", "token"}) {
							t.Errorf("stream %v: a top_logprobs entry has the fields %q, want bytes, logprob, token: %s", stream, keys, p)
						}
					}
				}
			}
		}
		if entries != 8 {
			t.Errorf("stream %v: %d top_logprobs entries over the reply, want 8 (2 for each of 4 tokens)", stream, entries)
		}
	}
}

func TestStopStrings(t *testing.T) {
	tests := []struct {
		name   string
		script []string
		stop   string // JSON
		want   string
		finish string
	}{
		{"across tokens", []string{"Hel", "lo", " wo", "rld", "!"}, `"lo w"`, "Hel", "stop"},
		{"inside a token", []string{"Hello", ",", " world"}, `"ll"`, "He", "stop"},
		{"earliest of several", []string{"Hel", "lo", " wo", "rld"}, `["rld","o w"]`, "Hell", "stop"},
		{"prefix never completed", []string{"Hel", "lo", "!"}, `"lo w"`, "Hello!", "stop"},
		{"prefix at the end", []string{"Hel", "lo"}, `"lo w"`, "Hello", "stop"},
		{"at the very start", []string{"END", "Hello"}, `"END"`, "", "stop"},
		{"special tokens skipped", []string{"Hel", "<|im_start|>", "lo"}, `"xyz"`, "Hello", "stop"},
	}
	for _, tc := range tests {
		for _, stream := range []bool{false, true} {
			env := newTestEnv(t, nil)
			env.host.script = env.tok.ids(tc.script...)
			body := `{"messages":[{"role":"user","content":"Hi"}],"stop":` + tc.stop + `,"stream":` + map[bool]string{false: "false", true: "true"}[stream] + `}`
			w := env.do("POST", "/v1/chat/completions", body)
			var text, finish string
			if stream {
				for _, c := range readStream(t, w.Body.String()) {
					if d := c.Choices[0].Delta; d.Content != nil {
						text += *d.Content
					}
					if f := c.Choices[0].FinishReason; f != nil {
						finish = *f
					}
				}
			} else {
				r := decodeResponse(t, w)
				text, finish = r.Choices[0].Message.Content, *r.Choices[0].FinishReason
			}
			if text != tc.want || finish != tc.finish {
				t.Errorf("%s (stream %v): text %q finish %q, want %q %q", tc.name, stream, text, finish, tc.want, tc.finish)
			}
		}
	}
}

func TestSampling(t *testing.T) {
	unset := config.SamplingConfig{Temperature: -1, TopP: -1, TopK: -1, MinP: -1, MaxTokens: 4096}
	// The context left after the prompt of {"role":"user","content":"Hi"}.
	room := 64 - len(newFakeTokenizer().Encode("<|im_start|>user\nHi\n<|im_start|>assistant\n"))
	tests := []struct {
		name          string
		fields        string
		config, model config.SamplingConfig
		want          scheduler.Sampling
		maxTokens     int
	}{
		{"OpenAI defaults", ``, unset, unset, scheduler.Sampling{Temperature: 1, TopP: 1, Seed: 42}, room},
		{"model defaults", ``, unset, config.SamplingConfig{Temperature: 0.6, TopP: 0.95, TopK: 20, MinP: 0},
			scheduler.Sampling{Temperature: 0.6, TopP: 0.95, TopK: 20, Seed: 42}, room},
		{"config over model", ``, config.SamplingConfig{Temperature: 0.2, TopP: -1, TopK: 5, MinP: 0.1, MaxTokens: 10}, config.SamplingConfig{Temperature: 0.6, TopP: 0.9, TopK: 20, MinP: 0},
			scheduler.Sampling{Temperature: 0.2, TopP: 0.9, TopK: 5, MinP: 0.1, Seed: 42}, 10},
		{"request over all", `,"temperature":0,"top_p":0.5,"top_k":-1,"min_p":0.05,"seed":18446744073709551615,"max_completion_tokens":3`,
			config.SamplingConfig{Temperature: 0.2, TopP: 0.8, TopK: 5, MinP: 0.1, MaxTokens: 10}, unset,
			scheduler.Sampling{Temperature: 0, TopP: 0.5, TopK: 0, MinP: 0.05, Seed: 1<<64 - 1}, 3},
		{"seed -1 is random", `,"seed":-1`, unset, unset, scheduler.Sampling{Temperature: 1, TopP: 1, Seed: 42}, room},
		{"max_tokens that fills the context", fmt.Sprintf(`,"max_tokens":%d`, room), unset, unset, scheduler.Sampling{Temperature: 1, TopP: 1, Seed: 42}, room},
		{"the default clamped to the context", ``, config.SamplingConfig{Temperature: -1, TopP: -1, TopK: -1, MinP: -1, MaxTokens: 1000}, unset,
			scheduler.Sampling{Temperature: 1, TopP: 1, Seed: 42}, room},
	}
	for _, tc := range tests {
		env := newTestEnv(t, func(m *ServedModel, o *HandlerOptions) { o.Sampling, m.Defaults = tc.config, tc.model })
		w := env.do("POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"Hi"}]`+tc.fields+`}`)
		r := decodeResponse(t, w)
		req := env.host.lastRequest(t)
		if !reflect.DeepEqual(req.Sampling, tc.want) || req.MaxTokens != tc.maxTokens {
			t.Errorf("%s: sampling %+v max %d, want %+v max %d", tc.name, req.Sampling, req.MaxTokens, tc.want, tc.maxTokens)
		}
		if r.TFD.Seed != tc.want.Seed {
			t.Errorf("%s: tfd.seed %d, want %d", tc.name, r.TFD.Seed, tc.want.Seed)
		}
		if !reflect.DeepEqual(req.StopTokens, []int32{tokEOS}) {
			t.Errorf("%s: stop tokens %v", tc.name, req.StopTokens)
		}
	}
}

func TestFreshSeeds(t *testing.T) {
	env := newTestEnv(t, func(_ *ServedModel, o *HandlerOptions) { o.Seed = nil })
	seen := map[uint64]bool{}
	for range 4 {
		r := decodeResponse(t, env.do("POST", "/v1/completions", `{"prompt":"Hi"}`))
		if r.TFD.Seed >= 1<<53 {
			t.Errorf("seed %d does not fit a JSON number exactly", r.TFD.Seed)
		}
		seen[r.TFD.Seed] = true
	}
	if len(seen) < 2 {
		t.Errorf("requests without a seed got the same one: %v", seen)
	}
}

func TestTemplateInputs(t *testing.T) {
	env := newTestEnv(t, nil)
	decodeResponse(t, env.do("POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"Hi"}],"draft":false,
		"tools":[{"type":"function","function":{"name":"f"}}],"chat_template_kwargs":{"enable_thinking":false}}`))
	opts := env.tmpl.last
	if !opts.AddGenerationPrompt || len(opts.Tools) != 1 || opts.Kwargs["enable_thinking"] != false {
		t.Errorf("template options %+v", opts)
	}
}

func TestModelsAndHealth(t *testing.T) {
	env := newTestEnv(t, nil)
	var list struct {
		Object string        `json:"object"`
		Data   []modelObject `json:"data"`
	}
	w := env.do("GET", "/v1/models", "")
	if err := json.Unmarshal(w.Body.Bytes(), &list); err != nil || list.Object != "list" || len(list.Data) != 1 || list.Data[0].ID != "gopher" {
		t.Errorf("models %s (%v)", w.Body, err)
	}
	if w := env.do("GET", "/v1/models/gopher", ""); w.Code != 200 {
		t.Errorf("GET /v1/models/gopher: %d", w.Code)
	}
	if w := env.do("GET", "/health", ""); w.Code != 200 || !strings.Contains(w.Body.String(), `"ok"`) {
		t.Errorf("health %d %s", w.Code, w.Body)
	}
}

func TestTokensHash(t *testing.T) {
	// Expected values from an independent FNV-1a 64 over struct.pack("<i...") in Python.
	for _, tc := range []struct {
		ids  []int32
		want string
	}{
		{nil, "cbf29ce484222325"},
		{[]int32{1, 2, -1}, "511984b0dc92e782"},
		{[]int32{7, 300}, "d396af85dd70c2f9"},
	} {
		if got := tokensHash(tc.ids); got != tc.want {
			t.Errorf("tokensHash(%v) = %s, want %s", tc.ids, got, tc.want)
		}
	}
}

// TestClientDisconnect checks that a client leaving mid-stream cancels the host's stream and
// that nothing is left running.
func TestClientDisconnect(t *testing.T) {
	defer goleak.VerifyNone(t)
	env := newTestEnv(t, nil)
	env.host.block = true
	env.host.cancelled = make(chan struct{})
	srv := httptest.NewServer(env.h)
	defer srv.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/v1/chat/completions",
		strings.NewReader(`{"messages":[{"role":"user","content":"Hi"}],"stream":true}`))
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	for got := ""; !strings.Contains(got, "!"); { // read until the whole script arrived
		if !lines.Scan() {
			t.Fatalf("stream ended early: %v", lines.Err())
		}
		got += lines.Text()
	}
	cancel()
	select {
	case <-env.host.cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the host's stream was not cancelled after the client left")
	}
	resp.Body.Close()
	srv.Close()
}
