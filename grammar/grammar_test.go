package grammar

import (
	"errors"
	"strings"
	"testing"
)

// accepts reports whether g accepts doc as a whole document.
func accepts(g *Grammar, doc string) bool {
	s, ok := g.Start().StepBytes([]byte(doc))
	return ok && s.Accepting()
}

func mustCompile(t *testing.T, schema string) *Grammar {
	t.Helper()
	g, err := Compile([]byte(schema))
	if err != nil {
		t.Fatalf("Compile(%s): %v", schema, err)
	}
	return g
}

func TestAccepts(t *testing.T) {
	person := `{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"},"tags":{"type":"array","items":{"type":"string"},"maxItems":2}},"required":["name"],"additionalProperties":false}`
	tests := []struct {
		name, schema string
		yes, no      []string
	}{
		{"any object", "", // AnyObject
			[]string{`{}`, `{"a":1}`, `{"a":{"b":[1,2.5e-3,"x",true,null]},"c":false}`, `{"\u00e9\n":"中"}`},
			[]string{``, `[]`, `{`, `{"a":1,}`, `{"a" :1}`, `{ }`, `{"a":01}`, `{"a":1}x`, `"s"`, `{"a":"` + "\x01" + `"}`, `{"a":"\xff"}`, `{"a":"\xed\xa0\x80"}`}},
		{"person", person,
			[]string{`{"name":"Ann"}`, `{"name":"Ann","age":-3}`, `{"name":"A","tags":[]}`, `{"name":"A","age":0,"tags":["x","y"]}`},
			[]string{`{}`, `{"age":3}`, `{"age":3,"name":"A"}`, `{"name":"A","age":1.5}`, `{"name":"A","tags":["x","y","z"]}`, `{"name":"A","extra":1}`, `{"name":1}`}},
		{"enum and const", `{"type":"object","properties":{"c":{"enum":["red","green",1,12,null]},"k":{"const":{"b":[1],"a":true}}},"required":["c","k"]}`,
			[]string{`{"c":"red","k":{"a":true,"b":[1]}}`, `{"c":12,"k":{"a":true,"b":[1]}}`, `{"c":1,"k":{"a":true,"b":[1]}}`, `{"c":null,"k":{"a":true,"b":[1]}}`},
			[]string{`{"c":"blue","k":{"a":true,"b":[1]}}`, `{"c":"red"}`, `{"c":123,"k":{"a":true,"b":[1]}}`}},
		{"bounded array", `{"type":"array","items":{"type":"boolean"},"minItems":1,"maxItems":2}`,
			[]string{`[true]`, `[false,true]`},
			[]string{`[]`, `[true,true,true]`, `[1]`}},
		{"numbers", `{"type":"array","items":{"type":"number"}}`,
			[]string{`[0,-0,1.5,1e9,2E-3,-12.25e+4]`, `[]`},
			[]string{`[01]`, `[1.]`, `[.5]`, `[1e]`, `[-]`, `[+1]`}},
		{"top-level number", `{"type":"integer"}`,
			[]string{`0`, `-17`, `42`},
			[]string{`4.2`, `1e3`, `-`, `007`}},
		{"anyOf and type list", `{"type":"object","properties":{"v":{"anyOf":[{"type":"string"},{"type":"integer"},{"type":"null"}]},"w":{"type":["boolean","null"]}},"required":["v","w"]}`,
			[]string{`{"v":"x","w":true}`, `{"v":3,"w":null}`, `{"v":null,"w":false}`},
			[]string{`{"v":[],"w":true}`, `{"v":"x","w":"x"}`}},
		{"recursion through $defs", `{"$defs":{"node":{"type":"object","properties":{"val":{"type":"integer"},"next":{"anyOf":[{"$ref":"#/$defs/node"},{"type":"null"}]}},"required":["val","next"]}},"$ref":"#/$defs/node"}`,
			[]string{`{"val":1,"next":null}`, `{"val":1,"next":{"val":2,"next":null}}`},
			[]string{`{"val":1}`, `{"val":1,"next":{"val":2}}`}},
		{"empty strict object", `{"type":"object","additionalProperties":false}`,
			[]string{`{}`}, []string{`{"a":1}`}},
		{"optional keys sharing a prefix", `{"type":"object","properties":{"ab":{"type":"null"},"a":{"type":"null"},"abc":{"type":"null"}},"required":["abc"]}`,
			[]string{`{"abc":null}`, `{"ab":null,"abc":null}`, `{"a":null,"abc":null}`, `{"ab":null,"a":null,"abc":null}`},
			[]string{`{"a":null}`, `{"abc":null,"a":null}`, `{"a":null,"ab":null,"abc":null}`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := AnyObject()
			if tt.schema != "" {
				g = mustCompile(t, tt.schema)
			}
			for _, doc := range tt.yes {
				if !accepts(g, doc) {
					t.Errorf("refused %s", doc)
				}
			}
			for _, doc := range tt.no {
				if accepts(g, doc) {
					t.Errorf("accepted %s", doc)
				}
			}
		})
	}
}

func TestCompileRefuses(t *testing.T) {
	tests := []struct{ schema, keyword string }{
		{`{"type":"string","pattern":"^a"}`, "pattern"},
		{`{"type":"object","properties":{"a":{"type":"string","minLength":3}}}`, "minLength"},
		{`{"oneOf":[{"type":"string"}]}`, "oneOf"},
		{`{"type":"object","additionalProperties":{"type":"string"}}`, "additionalProperties"},
		{`{"anyOf":[{"type":"integer"},{"type":"number"}]}`, "anyOf"},
		{`{"anyOf":[{"type":"string"},{"enum":["a"]}]}`, "anyOf"},
		{`{"$ref":"https://example.com/s.json"}`, "$ref"},
		{`{"type":"object","properties":{"a":false}}`, "false"},
	}
	for _, tt := range tests {
		_, err := Compile([]byte(tt.schema))
		var u *UnsupportedError
		if !errors.As(err, &u) || u.Keyword != tt.keyword {
			t.Errorf("Compile(%s) = %v, want an UnsupportedError naming %q", tt.schema, err, tt.keyword)
		}
	}
	for _, bad := range []string{`{"type":"strin"}`, `{"type":"object","properties":{},"required":["x"]}`, `{"type":"array","minItems":3,"maxItems":1}`, `{`} {
		if _, err := Compile([]byte(bad)); err == nil || !strings.HasPrefix(err.Error(), "grammar: ") {
			t.Errorf("Compile(%s) = %v, want a grammar error", bad, err)
		}
	}
}

// TestStateIsAValue checks that stepping never changes the state stepped from, so drafts can be
// tried from a stream's state and dropped.
func TestStateIsAValue(t *testing.T) {
	g := mustCompile(t, `{"type":"object","properties":{"a":{"type":"array","items":{"type":"object","properties":{"b":{"type":"string"}}}}}}`)
	s, ok := g.Start().StepBytes([]byte(`{"a":[{"b":"x`))
	if !ok {
		t.Fatal("prefix refused")
	}
	for _, tail := range []string{`"}]}`, `y"},{}]}`, `"},{"b":"z"}]}`} {
		end, ok := s.StepBytes([]byte(tail))
		if !ok || !end.Accepting() {
			t.Errorf("tail %s from the shared state: ok %v accepting %v", tail, ok, end.Accepting())
		}
	}
}

func TestToolCall(t *testing.T) {
	g, err := ToolCall("<tool_call>\n", "\n</tool_call>", []Tool{
		{Name: "get_weather", Parameters: []byte(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)},
		{Name: "get_time"},
		{Name: "get", Parameters: []byte(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range []string{
		"<tool_call>\n{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}\n</tool_call>",
		"<tool_call>\n{\"name\":\"get_time\",\"arguments\":{\"tz\":[1,{}]}}\n</tool_call>",
		"<tool_call>\n{\"name\":\"get\",\"arguments\":{\"n\":12}}\n</tool_call>",
	} {
		if !accepts(g, doc) {
			t.Errorf("refused %q", doc)
		}
	}
	for _, doc := range []string{
		"<tool_call>\n{\"name\":\"get_weather\",\"arguments\":{\"n\":1}}\n</tool_call>",
		"<tool_call>\n{\"name\":\"get\",\"arguments\":{\"city\":\"Paris\"}}\n</tool_call>",
		"<tool_call>\n{\"name\":\"set\",\"arguments\":{}}\n</tool_call>",
		"<tool_call>\n{\"name\":\"get\",\"arguments\":{\"n\":12}}\n</tool_call>x",
		"<tool_call>\n{\"name\":\"get\",\"arguments\":{\"n\":12}}",
		"{\"name\":\"get\",\"arguments\":{\"n\":12}}",
	} {
		if accepts(g, doc) {
			t.Errorf("accepted %q", doc)
		}
	}
	if _, err := ToolCall("", "", []Tool{{Name: "f", Parameters: []byte(`{"type":"string","format":"date"}`)}}); err == nil || !strings.Contains(err.Error(), `tool "f"`) {
		t.Errorf("a tool with an unsupported keyword: %v", err)
	}
}

// TestAcceptingLooksThroughNesting: a number that ends a sequence inside another is a whole
// document only when everything around it may end too.
func TestAcceptingLooksThroughNesting(t *testing.T) {
	g, err := ToolCall("", "", []Tool{{Name: "f"}})
	if err != nil {
		t.Fatal(err)
	}
	s, ok := g.Start().StepBytes([]byte(`{"name":"f","arguments":{"a":1`))
	if !ok || s.Accepting() {
		t.Fatalf("ok %v accepting %v inside the arguments", ok, s.Accepting())
	}
	s, ok = s.StepBytes([]byte(`}}`))
	if !ok || !s.Accepting() {
		t.Fatalf("ok %v accepting %v after the call", ok, s.Accepting())
	}
}
