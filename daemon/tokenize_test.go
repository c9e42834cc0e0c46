package daemon

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func postJSON(t *testing.T, url, body string, out any) int {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == 200 {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
	}
	return resp.StatusCode
}

// TestTokenizeDetokenize: /tokenize and /detokenize in llama-server's shapes on the bundled model:
// the ids /v1/completions feeds (usage counts them), pieces whose bytes make the text (an emoji
// split across byte tokens shows as bytes), a chat rendered by the template, and the way back.
func TestTokenizeDetokenize(t *testing.T) {
	d := startDaemon(t, "[sessions]\nparallel = 2\n")
	const text = "func main() { fmt.Println(\"🦫 héllo\") }"
	var ids struct{ Tokens []int32 }
	if code := postJSON(t, d.url+"/tokenize", `{"content":`+quote(text)+`}`, &ids); code != 200 || len(ids.Tokens) == 0 {
		t.Fatalf("tokenize: %d %v", code, ids.Tokens)
	}
	var usage struct {
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		}
	}
	postJSON(t, d.url+"/v1/completions", `{"prompt":`+quote(text)+`,"max_tokens":1}`, &usage)
	if usage.Usage.PromptTokens != len(ids.Tokens) {
		t.Errorf("tokenize gave %d ids, the completion's prompt was %d tokens", len(ids.Tokens), usage.Usage.PromptTokens)
	}

	var pieces struct {
		Tokens []struct {
			ID    int32           `json:"id"`
			Piece json.RawMessage `json:"piece"`
		}
	}
	postJSON(t, d.url+"/tokenize", `{"content":`+quote(text)+`,"with_pieces":true}`, &pieces)
	var joined []byte
	sawBytes := false
	for i, p := range pieces.Tokens {
		if p.ID != ids.Tokens[i] {
			t.Fatalf("piece %d has id %d, tokenize gave %d", i, p.ID, ids.Tokens[i])
		}
		var s string
		var b []byte
		var nums []int
		switch {
		case json.Unmarshal(p.Piece, &s) == nil:
			b = []byte(s)
		case json.Unmarshal(p.Piece, &nums) == nil:
			sawBytes = true
			for _, n := range nums {
				b = append(b, byte(n))
			}
			if utf8.Valid(b) {
				t.Errorf("piece %d is bytes %v, but they are UTF-8", i, nums)
			}
		default:
			t.Fatalf("piece %d is %s", i, p.Piece)
		}
		joined = append(joined, b...)
	}
	if string(joined) != text || !sawBytes {
		t.Errorf("pieces join to %q (some as bytes: %v), want %q with the emoji split", joined, sawBytes, text)
	}

	var back struct{ Content string }
	if code := postJSON(t, d.url+"/detokenize", `{"tokens":`+mustJSON(ids.Tokens)+`}`, &back); code != 200 || back.Content != text {
		t.Errorf("detokenize: %d %q, want %q", code, back.Content, text)
	}

	var chat struct {
		Tokens []int32
		Prompt string
	}
	postJSON(t, d.url+"/tokenize", `{"messages":[{"role":"user","content":"Hi"}]}`, &chat)
	var direct struct{ Tokens []int32 }
	postJSON(t, d.url+"/tokenize", `{"content":"<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"}`, &direct)
	if chat.Prompt != "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n" || !slices.Equal(chat.Tokens, direct.Tokens) || len(direct.Tokens) != 9 {
		t.Errorf("chat: %q %v; its text tokenized: %v", chat.Prompt, chat.Tokens, direct.Tokens)
	}

	for _, tc := range []struct{ path, body string }{
		{"/tokenize", `{"content":"x","add_special":true}`},
		{"/tokenize", `{}`},
		{"/detokenize", `{"tokens":[1,-1]}`},
		{"/detokenize", `{"tokens":[100000000]}`},
	} {
		if code := postJSON(t, d.url+tc.path, tc.body, nil); code != 400 {
			t.Errorf("%s %s: %d, want 400", tc.path, tc.body, code)
		}
	}
}

func quote(s string) string { return mustJSON(s) }

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
