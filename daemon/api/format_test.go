package api

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"tfd/daemon/api/toolcall"
	"tfd/grammar"
	"tfd/scheduler"
)

// wilfulHost stands in for a model that wants to write prose: at each position it takes the next
// token of its script when the request's constraint allows it, else the EOS where allowed, else
// the allowed single byte that best closes what is open. Without a constraint it writes the
// script, so a test that expects JSON fails when the constraint does not reach the host.
type wilfulHost struct {
	script []int32
	vocab  int
}

func (w *wilfulHost) Submit(ctx context.Context, req scheduler.Request) (<-chan scheduler.Event, error) {
	ch := make(chan scheduler.Event, req.MaxTokens+1)
	defer close(ch)
	c := req.Constraint
	if c == nil {
		for _, tok := range w.script[:min(len(w.script), req.MaxTokens)] {
			ch <- scheduler.Event{Token: tok}
		}
		ch <- scheduler.Event{Done: true, Reason: scheduler.FinishStop, StopToken: tokEOS}
		return ch, nil
	}
	s := c.Start()
	mask := make([]uint64, (w.vocab+63)/64)
	allowed := func(id int32) bool { return mask[id>>6]>>(id&63)&1 == 1 }
	for i := range req.MaxTokens {
		clear(mask)
		c.Allowed(s, mask)
		if c.Accepting(s) {
			ch <- scheduler.Event{Done: true, Reason: scheduler.FinishStop, StopToken: tokEOS}
			return ch, nil
		}
		tok := int32(-1)
		if i < len(w.script) && allowed(w.script[i]) {
			tok = w.script[i]
		}
		for _, b := range []byte(`"}],0tn:`) {
			if tok < 0 && allowed(1000+int32(b)) {
				tok = 1000 + int32(b)
			}
		}
		for id := int32(0); tok < 0 && id < int32(w.vocab); id++ {
			if allowed(id) {
				tok = id
			}
		}
		s, _ = c.Advance(s, tok)
		ch <- scheduler.Event{Token: tok}
	}
	ch <- scheduler.Event{Done: true, Reason: scheduler.FinishLength}
	return ch, nil
}

func (w *wilfulHost) Close(context.Context) error { return nil }

// fakeVocab lays out the fake tokenizer's ids for grammars: its pieces, then the single bytes.
func fakeVocab(tok *fakeTokenizer) *grammar.Vocab {
	tokens := make([][]byte, 1256)
	for id := range tokens {
		if (id < len(tok.pieces) || id >= 1000) && !tok.IsSpecial(int32(id)) {
			tokens[id] = []byte(tok.piece(int32(id)))
		}
	}
	return grammar.NewVocab(tokens)
}

// TestJSONSchemaReplyUnmarshals: a chat reply under response_format json_schema, from a host
// that would rather write prose, unmarshals into the Go struct the schema describes, with
// finish_reason "stop"; json_object gives an object; a reply cut by max_tokens says "length".
func TestJSONSchemaReplyUnmarshals(t *testing.T) {
	env := newTestEnv(t, func(m *ServedModel, _ *HandlerOptions) {
		tok := m.Tokenizer.(*fakeTokenizer)
		m.Host = &wilfulHost{script: tok.Encode(`Hello, world! {"city": "Paris", "temperature": 21.5}`), vocab: 1256}
		m.Vocab = func() *grammar.Vocab { return fakeVocab(tok) }
		m.Context = 512
	})
	schema := `{"type":"object","properties":{"city":{"type":"string"},"temperature":{"type":"number"},"unit":{"enum":["C","F"]},"days":{"type":"array","items":{"type":"integer"},"minItems":1}},"required":["city","unit","days"],"additionalProperties":false}`
	body := `{"messages":[{"role":"user","content":"weather?"}],"response_format":{"type":"json_schema","json_schema":{"name":"weather","strict":true,"schema":` + schema + `}}}`
	var weather struct {
		City        string   `json:"city"`
		Temperature *float64 `json:"temperature"`
		Unit        string   `json:"unit"`
		Days        []int    `json:"days"`
	}
	content, finish := chatContent(t, env, body)
	dec := json.NewDecoder(strings.NewReader(content))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&weather); err != nil || finish != "stop" {
		t.Fatalf("reply %q (finish %q) does not unmarshal: %v", content, finish, err)
	}
	if weather.Unit != "C" && weather.Unit != "F" || len(weather.Days) == 0 {
		t.Fatalf("reply %q breaks the schema: %+v", content, weather)
	}
	content, finish = chatContent(t, env, `{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_object"}}`)
	var obj map[string]any
	if err := json.Unmarshal([]byte(content), &obj); err != nil || finish != "stop" {
		t.Fatalf("json_object reply %q (finish %q): %v", content, finish, err)
	}
	content, finish = chatContent(t, env, strings.Replace(body, `"messages"`, `"max_tokens":3,"messages"`, 1))
	if finish != "length" || json.Valid([]byte(content)) {
		t.Fatalf("a reply cut at 3 tokens: %q (finish %q), want incomplete JSON with finish length", content, finish)
	}
	content, _ = chatContent(t, env, `{"messages":[{"role":"user","content":"x"}]}`)
	if !strings.HasPrefix(content, "Hello") {
		t.Fatalf("an unconstrained reply %q: the host should write its prose", content)
	}
}

func chatContent(t *testing.T, env *testEnv, body string) (content, finish string) {
	t.Helper()
	w := env.do("POST", "/v1/chat/completions", body)
	if w.Code != 200 {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	var resp struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &resp); err != nil || len(resp.Choices) != 1 {
		t.Fatalf("response %s: %v", w.Body, err)
	}
	return resp.Choices[0].Message.Content, resp.Choices[0].FinishReason
}

// TestToolChoiceForcesACall: with tool_choice "required" or naming a function, a host that would
// rather write prose still answers with one well-formed call, whose arguments follow the tool's
// parameters; the reply's finish is "tool_calls".
func TestToolChoiceForcesACall(t *testing.T) {
	env := newTestEnv(t, func(m *ServedModel, _ *HandlerOptions) {
		tok := m.Tokenizer.(*fakeTokenizer)
		m.Host = &wilfulHost{script: tok.Encode(`Hello, world!`), vocab: 1256}
		m.Vocab = func() *grammar.Vocab { return fakeVocab(tok) }
		m.Context = 512
	})
	tools := `"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city","days"]}}},` +
		`{"type":"function","function":{"name":"get_time","parameters":{"type":"object","properties":{"zone":{"enum":["UTC","CET"]}},"required":["zone"]}}}]`
	for _, tt := range []struct{ choice, name string }{
		{`"required"`, ""},
		{`{"type":"function","function":{"name":"get_time"}}`, "get_time"},
		{`{"type":"function","function":{"name":"get_weather"}}`, "get_weather"},
	} {
		w := env.do("POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],`+tools+`,"tool_choice":`+tt.choice+`}`)
		var resp struct {
			Choices []struct {
				Message struct {
					ToolCalls []toolcall.Call `json:"tool_calls"`
				} `json:"message"`
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &resp); err != nil || w.Code != 200 || len(resp.Choices) != 1 {
			t.Fatalf("tool_choice %s: status %d %s", tt.choice, w.Code, w.Body)
		}
		c := resp.Choices[0]
		if len(c.Message.ToolCalls) != 1 || c.FinishReason != "tool_calls" {
			t.Fatalf("tool_choice %s: %s", tt.choice, w.Body)
		}
		call := c.Message.ToolCalls[0].Function
		var args struct {
			City string `json:"city"`
			Days *int   `json:"days"`
			Zone string `json:"zone"`
		}
		dec := json.NewDecoder(strings.NewReader(call.Arguments))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&args); err != nil || (tt.name != "" && call.Name != tt.name) ||
			(call.Name == "get_weather" && args.Days == nil) || (call.Name == "get_time" && args.Zone == "") {
			t.Fatalf("tool_choice %s: call %s(%s): %v", tt.choice, call.Name, call.Arguments, err)
		}
	}
	for _, tt := range []struct{ body, msg string }{
		{`"tool_choice":"required"`, "lists no tools"},
		{tools + `,"tool_choice":{"type":"function","function":{"name":"nope"}}`, `"nope", which is not among`},
		{tools + `,"tool_choice":"sometimes"`, `"sometimes" is unknown`},
		{tools + `,"tool_choice":"required","response_format":{"type":"json_object"}`, "cannot be both"},
		{`"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"string","format":"date"}}}],"tool_choice":"required"`, `tool "f": "format" at # is not supported`},
	} {
		w := env.do("POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],`+tt.body+`}`)
		var e struct{ Error struct{ Message string } }
		_ = json.Unmarshal(w.Body.Bytes(), &e)
		if w.Code != 400 || !strings.Contains(e.Error.Message, tt.msg) {
			t.Errorf("%s: status %d %q, want 400 saying %s", tt.body, w.Code, e.Error.Message, tt.msg)
		}
	}
}

// TestForcedCallOnAMistralModel: a forced call is written in the Hermes form whatever the
// model's own syntax, and read back in that form, so a Mistral model's forced call still comes
// back as tool_calls.
func TestForcedCallOnAMistralModel(t *testing.T) {
	env := newTestEnv(t, func(m *ServedModel, _ *HandlerOptions) {
		tok := m.Tokenizer.(*fakeTokenizer)
		m.Host = &wilfulHost{script: tok.Encode(`Hello, world!`), vocab: 1256}
		m.Vocab = func() *grammar.Vocab { return fakeVocab(tok) }
		m.Context = 512
		m.Template = sourcedTemplate{m.Template.(*fakeTemplate), "{{ '[TOOL_CALLS]' }}"}
	})
	w := env.do("POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],`+
		`"tools":[{"type":"function","function":{"name":"get_time","parameters":{"type":"object","properties":{"zone":{"enum":["UTC","CET"]}},"required":["zone"]}}}],`+
		`"tool_choice":"required"}`)
	var resp struct {
		Choices []struct {
			Message struct {
				ToolCalls []toolcall.Call `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &resp); err != nil || w.Code != 200 || len(resp.Choices) != 1 {
		t.Fatalf("status %d %s", w.Code, w.Body)
	}
	if c := resp.Choices[0]; len(c.Message.ToolCalls) != 1 || c.FinishReason != "tool_calls" || c.Message.ToolCalls[0].Function.Name != "get_time" {
		t.Fatalf("a forced call on a Mistral model: %s", w.Body)
	}
}
