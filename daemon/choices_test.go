package daemon

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// choiceOut is what a test reads of one choice: its text, finish reason and tfd object.
type choiceOut struct {
	Index        int    `json:"index"`
	Text         string `json:"text"`
	FinishReason string `json:"finish_reason"`
	TFD          struct {
		Seed       uint64 `json:"seed"`
		TokensHash string `json:"tokens_hash"`
	} `json:"tfd"`
}

type completionOut struct {
	Choices []choiceOut `json:"choices"`
	Usage   struct {
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
	TFD struct {
		Seed       uint64 `json:"seed"`
		TokensHash string `json:"tokens_hash"`
	} `json:"tfd"`
}

func postCompletion(t *testing.T, url, body string) completionOut {
	t.Helper()
	resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out completionOut
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 {
		t.Fatalf("status %d: %v", resp.StatusCode, err)
	}
	return out
}

// TestChoicesEqualSingleRequests: n = 3 on the bundled model gives three choices, whole and
// streamed, each the reply of a single-choice request with the seed its tfd object reports
// (the request's seed plus its index), and usage sums their tokens.
func TestChoicesEqualSingleRequests(t *testing.T) {
	d := startDaemon(t, "[sessions]\nparallel = 4\n")
	const fields = `"prompt":"func main() {\n","max_tokens":24,"temperature":0.9,"presence_penalty":0.5`
	got := postCompletion(t, d.url, `{`+fields+`,"n":3,"seed":77}`)
	if len(got.Choices) != 3 {
		t.Fatalf("%d choices, want 3", len(got.Choices))
	}
	texts := map[string]bool{}
	tokens := 0
	for i, c := range got.Choices {
		if c.Index != i || c.TFD.Seed != 77+uint64(i) {
			t.Fatalf("choice %d: index %d seed %d, want seed %d", i, c.Index, c.TFD.Seed, 77+i)
		}
		alone := postCompletion(t, d.url, fmt.Sprintf(`{%s,"seed":%d}`, fields, c.TFD.Seed))
		if a := alone.Choices[0]; a.Text != c.Text || a.FinishReason != c.FinishReason || alone.TFD.TokensHash != c.TFD.TokensHash {
			t.Errorf("choice %d: %q (%s, %s); alone with its seed: %q (%s, %s)", i, c.Text, c.FinishReason, c.TFD.TokensHash, a.Text, a.FinishReason, alone.TFD.TokensHash)
		}
		texts[c.Text] = true
		tokens += alone.Usage.CompletionTokens
	}
	if len(texts) < 2 {
		t.Errorf("the choices are all %q: their seeds should differ", got.Choices[0].Text)
	}
	if got.Usage.CompletionTokens != tokens || got.TFD.Seed != 77 {
		t.Errorf("usage %d completion tokens, want %d; tfd.seed %d, want 77", got.Usage.CompletionTokens, tokens, got.TFD.Seed)
	}

	// Streamed: the chunks name their choice; put together, each is its whole self.
	resp, err := http.Post(d.url+"/v1/completions", "application/json", strings.NewReader(`{`+fields+`,"n":3,"seed":77,"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	streamed := make([]choiceOut, 3)
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var chunk completionOut
		if err := json.Unmarshal([]byte(data), &chunk); err != nil {
			t.Fatalf("chunk %s: %v", data, err)
		}
		for _, c := range chunk.Choices {
			s := &streamed[c.Index]
			s.Text += c.Text
			if c.FinishReason != "" {
				s.FinishReason, s.TFD = c.FinishReason, c.TFD
			}
		}
	}
	for i, s := range streamed {
		w := got.Choices[i]
		if s.Text != w.Text || s.FinishReason != w.FinishReason || s.TFD != w.TFD {
			t.Errorf("streamed choice %d: %q (%s, %+v); whole: %q (%s, %+v)", i, s.Text, s.FinishReason, s.TFD, w.Text, w.FinishReason, w.TFD)
		}
	}
}
