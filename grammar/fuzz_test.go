package grammar

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// testVocab is a small vocabulary in the shape of a byte-level BPE one: every single byte, pieces
// that cross JSON's structure, multi-byte and partial UTF-8, and id 0 as a special token without
// bytes (the EOS).
func testVocab(extra ...string) *Vocab {
	pieces := []string{"", `{"`, `"}`, `":`, `",`, `":"`, `"]`, `["`, `],`, `}]`, `},{`, `[{`, `{}`, `[]`,
		"true", "false", "null", "nul", "12", "0.", ".5", "e+", "-1", "00", `\n`, `\u00e9`, `\"`, `\\`,
		"é", "中文", "\xe4\xb8", "\xad", "ab", "hello", " world", `"a`, `a"`, `"name"`, "name", "1,", "3]"}
	pieces = append(pieces, extra...)
	for b := 0; b < 256; b++ {
		pieces = append(pieces, string([]byte{byte(b)}))
	}
	tokens := make([][]byte, len(pieces))
	for i, p := range pieces {
		tokens[i] = []byte(p)
	}
	return NewVocab(tokens)
}

// randomSchema writes a random schema of the supported subset, depth-bounded, whose anyOf
// branches start differently.
func randomSchema(r *rand.Rand, depth int) string {
	leaves := []string{`{"type":"string"}`, `{"type":"number"}`, `{"type":"integer"}`, `{"type":"boolean"}`,
		`{"type":"null"}`, `{"enum":["a","ab",1,12,null,{"k":[1]}]}`, `{"const":"x\"y"}`, `{}`, `{"type":"object"}`}
	if depth == 0 || r.IntN(3) == 0 {
		return leaves[r.IntN(len(leaves))]
	}
	switch r.IntN(4) {
	case 0:
		var props, req []string
		for i := range r.IntN(4) {
			name := []string{"a", "ab", "b", "name", "é"}[r.IntN(5)] + fmt.Sprint(i)
			props = append(props, fmt.Sprintf("%q:%s", name, randomSchema(r, depth-1)))
			if r.IntN(2) == 0 {
				req = append(req, fmt.Sprintf("%q", name))
			}
		}
		return fmt.Sprintf(`{"type":"object","properties":{%s},"required":[%s],"additionalProperties":false}`, strings.Join(props, ","), strings.Join(req, ","))
	case 1:
		lo := r.IntN(3)
		return fmt.Sprintf(`{"type":"array","items":%s,"minItems":%d,"maxItems":%d}`, randomSchema(r, depth-1), lo, lo+r.IntN(3))
	case 2:
		return fmt.Sprintf(`{"anyOf":[{"type":"string"},%s,{"type":"null"}]}`, []string{`{"type":"integer"}`, `{"type":"array"}`, randomSchema(r, 0)}[r.IntN(2)])
	}
	return `{"type":"array","items":{"$ref":"#/$defs/d"},"maxItems":2}`
}

// rootSchema is a random schema with the $defs its references name, which may refer to itself.
func rootSchema(r *rand.Rand, depth int) string {
	inner := randomSchema(r, depth)
	defs := fmt.Sprintf(`"$defs":{"d":%s}`, randomSchema(r, depth-1))
	if inner == "{}" {
		return "{" + defs + "}"
	}
	return "{" + defs + "," + inner[1:]
}

// walk picks allowed tokens at random until the document is whole; after budget steps it prefers
// bytes that close what is open, so every walk ends. It checks each mask against Advance, token
// by token.
func walk(t *testing.T, g *Grammar, v *Vocab, r *rand.Rand, budget int) []byte {
	s, doc := g.Start(), []byte{}
	mask := make([]uint64, (v.Size()+63)/64)
	for step := 0; ; step++ {
		if step > budget+400 {
			t.Fatalf("no end after %d steps: %s", step, doc)
		}
		v.Allowed(s, mask)
		var allowed []int32
		for id := range int32(v.Size()) {
			_, ok := v.Advance(s, id)
			if in := mask[id>>6]>>(id&63)&1 == 1; in != ok {
				t.Fatalf("after %q: token %q in mask %v, Advance %v", doc, v.Bytes(id), in, ok)
			}
			if ok {
				allowed = append(allowed, id)
			}
		}
		if s.Accepting() && (len(allowed) == 0 || step > budget || r.IntN(4) == 0) {
			return doc
		}
		if len(allowed) == 0 {
			t.Fatalf("dead end, not accepting, after %q", doc)
		}
		id := allowed[r.IntN(len(allowed))]
		if step > budget {
			id = closer(v, allowed)
		}
		s, _ = v.Advance(s, id)
		doc = append(doc, v.Bytes(id)...)
	}
}

// closer picks, among allowed tokens, a single byte that brings the document nearer its end.
func closer(v *Vocab, allowed []int32) int32 {
	for _, want := range []byte("\"}],0nt:f") {
		for _, id := range allowed {
			if b := v.Bytes(id); len(b) == 1 && b[0] == want {
				return id
			}
		}
	}
	for _, id := range allowed {
		if len(v.Bytes(id)) == 1 {
			return id
		}
	}
	return allowed[0]
}

func TestRandomWalksValidate(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 300 {
		schema := rootSchema(r, 3)
		g, err := Compile([]byte(schema))
		if err != nil {
			t.Fatalf("Compile(%s): %v", schema, err)
		}
		v := testVocab("\"a0\"", "\"ab1\"", "\"name2\"")
		doc := walk(t, g, v, r, r.IntN(40))
		checkDoc(t, schema, doc)
		if i%50 == 0 {
			checkDoc(t, `{"type":"object"}`, walk(t, AnyObject(), v, r, 30))
		}
		if i%10 == 0 {
			checkToolCall(t, schema, v, r)
		}
	}
}

func FuzzRandomWalks(f *testing.F) {
	f.Add(uint64(1), uint64(7))
	f.Fuzz(func(t *testing.T, a, b uint64) {
		r := rand.New(rand.NewPCG(a, b))
		schema := rootSchema(r, 4)
		g, err := Compile([]byte(schema))
		if err != nil {
			t.Fatalf("Compile(%s): %v", schema, err)
		}
		checkDoc(t, schema, walk(t, g, testVocab(), r, r.IntN(60)))
	})
}

// checkToolCall walks the grammar of a call of one of two tools, one with schema as its
// parameters, and checks the call is whole and its arguments valid.
func checkToolCall(t *testing.T, schema string, v *Vocab, r *rand.Rand) {
	t.Helper()
	g, err := ToolCall("<tool_call>\n", "\n</tool_call>", []Tool{{Name: "f", Parameters: []byte(schema)}, {Name: "fg"}})
	if err != nil {
		t.Fatal(err)
	}
	doc := string(walk(t, g, v, r, r.IntN(40)))
	body, opened := strings.CutPrefix(doc, "<tool_call>\n")
	body, closed := strings.CutSuffix(body, "\n</tool_call>")
	if !opened || !closed {
		t.Fatalf("call %q is not in its tags", doc)
	}
	var call struct {
		Name      string
		Arguments json.RawMessage
	}
	if err := json.Unmarshal([]byte(body), &call); err != nil {
		t.Fatalf("call %q: %v", doc, err)
	}
	switch call.Name {
	case "f":
		checkDoc(t, schema, call.Arguments)
	case "fg":
		checkDoc(t, `{"type":"object"}`, call.Arguments)
	default:
		t.Fatalf("call %q names no tool", doc)
	}
}

func checkDoc(t *testing.T, schema string, doc []byte) {
	t.Helper()
	var v, s any
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil || dec.More() {
		t.Fatalf("schema %s: %q does not parse: %v", schema, doc, err)
	}
	if err := json.Unmarshal([]byte(schema), &s); err != nil {
		t.Fatal(err)
	}
	if err := validate(v, s, s); err != nil {
		t.Fatalf("schema %s: %s: %v", schema, doc, err)
	}
}

// validate checks v against schema s (root for $ref) in the supported subset, as JSON Schema
// defines it, independently of the compiler.
func validate(v, s, root any) error {
	m, _ := s.(map[string]any)
	if ref, ok := m["$ref"].(string); ok {
		target := root
		if ref != "#" {
			target = root.(map[string]any)["$defs"].(map[string]any)[strings.TrimPrefix(ref, "#/$defs/")]
		}
		return validate(v, target, root)
	}
	if c, ok := m["const"]; ok {
		m = map[string]any{"enum": []any{c}}
	}
	if e, ok := m["enum"].([]any); ok {
		got, _ := json.Marshal(normal(v))
		for _, want := range e {
			if w, _ := json.Marshal(normal(want)); bytes.Equal(got, w) {
				return nil
			}
		}
		return fmt.Errorf("%s not in enum", got)
	}
	if alts, ok := m["anyOf"].([]any); ok {
		for _, a := range alts {
			if validate(v, a, root) == nil {
				return nil
			}
		}
		return fmt.Errorf("%v matches no anyOf branch", v)
	}
	if t, ok := m["type"]; ok {
		types, _ := t.([]any)
		if name, ok := t.(string); ok {
			types = []any{name}
		}
		var errs []string
		for _, name := range types {
			err := validateType(v, name.(string), m, root)
			if err == nil {
				return nil
			}
			errs = append(errs, err.Error())
		}
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

func validateType(v any, name string, m map[string]any, root any) error {
	switch name {
	case "object":
		o, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("%v is not an object", v)
		}
		props, _ := m["properties"].(map[string]any)
		for _, r := range asSlice(m["required"]) {
			if _, ok := o[r.(string)]; !ok {
				return fmt.Errorf("required %q missing", r)
			}
		}
		for k, e := range o {
			ps, declared := props[k]
			if !declared && m["additionalProperties"] == false {
				return fmt.Errorf("undeclared %q", k)
			}
			if declared {
				if err := validate(e, ps, root); err != nil {
					return fmt.Errorf("%s: %w", k, err)
				}
			}
		}
	case "array":
		a, ok := v.([]any)
		if !ok {
			return fmt.Errorf("%v is not an array", v)
		}
		if lo, ok := m["minItems"].(float64); ok && float64(len(a)) < lo {
			return fmt.Errorf("%d items, under minItems", len(a))
		}
		if hi, ok := m["maxItems"].(float64); ok && float64(len(a)) > hi {
			return fmt.Errorf("%d items, over maxItems", len(a))
		}
		if it, ok := m["items"]; ok {
			for _, e := range a {
				if err := validate(e, it, root); err != nil {
					return err
				}
			}
		}
	case "string":
		if _, ok := v.(string); !ok {
			return fmt.Errorf("%v is not a string", v)
		}
	case "number", "integer":
		n, ok := v.(json.Number)
		if !ok {
			return fmt.Errorf("%v is not a number", v)
		}
		f, err := n.Float64()
		if name == "integer" && (err != nil || f != math.Trunc(f)) {
			return fmt.Errorf("%v is not an integer", v)
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			return fmt.Errorf("%v is not a boolean", v)
		}
	case "null":
		if v != nil {
			return fmt.Errorf("%v is not null", v)
		}
	}
	return nil
}

// normal turns json.Numbers into float64 so equal numbers marshal equally.
func normal(v any) any {
	switch v := v.(type) {
	case json.Number:
		f, _ := v.Float64()
		return f
	case map[string]any:
		out := map[string]any{}
		for k, e := range v {
			out[k] = normal(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = normal(e)
		}
		return out
	}
	return v
}

func asSlice(v any) []any { s, _ := v.([]any); return s }
