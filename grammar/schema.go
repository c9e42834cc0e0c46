package grammar

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Grammar is a compiled grammar: the language of one JSON Schema, or of any JSON object. It is
// immutable and safe for concurrent use.
type Grammar struct {
	root *node
}

// Start returns the state before the document's first byte.
func (g *Grammar) Start() State { return State{top: frame{n: g.root, ph: phStart}} }

// AnyObject returns the grammar of any JSON object (OpenAI's response_format json_object).
func AnyObject() *Grammar { return &Grammar{root: anyObject} }

// UnsupportedError is what Compile returns for a schema it cannot constrain to: the keyword (or
// construct) and where it stands, as a JSON pointer into the schema.
type UnsupportedError struct {
	Keyword string
	Path    string
	Reason  string
}

func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("grammar: %q at %s %s", e.Keyword, e.Path, e.Reason)
}

// supported lists the keywords Compile understands; annotations are accepted and change nothing.
var supported = map[string]bool{
	"type": true, "properties": true, "required": true, "additionalProperties": true,
	"enum": true, "const": true, "items": true, "minItems": true, "maxItems": true,
	"anyOf": true, "$ref": true, "$defs": true,
	"title": true, "description": true, "$comment": true, "$schema": true, "$id": true,
	"examples": true, "default": true,
}

const supportedList = "type, properties, required, additionalProperties (true or false), enum, const, items, minItems, maxItems, anyOf, $ref and $defs"

// Compile compiles a JSON Schema to a grammar. A keyword outside the subset is refused with an
// *UnsupportedError naming it, never ignored: a reply would otherwise not honour the schema.
func Compile(schema []byte) (*Grammar, error) {
	dec := json.NewDecoder(bytes.NewReader(schema))
	dec.UseNumber()
	root, err := decodeOrdered(dec)
	if err != nil {
		return nil, fmt.Errorf("grammar: the schema is not valid JSON: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("grammar: the schema has data after its end")
	}
	c := &compiler{root: root, refs: map[string]*node{}}
	n, err := c.node(root, "#")
	if err != nil {
		return nil, err
	}
	for _, a := range c.anyOfs {
		if err := c.dispatch(a.n, a.path); err != nil {
			return nil, err
		}
	}
	return &Grammar{root: n}, nil
}

type compiler struct {
	root   any
	refs   map[string]*node
	anyOfs []struct {
		n    *node
		path string
	}
}

// node compiles the schema s found at path.
func (c *compiler) node(s any, path string) (*node, error) {
	switch s := s.(type) {
	case bool:
		if s {
			return anyValue, nil
		}
		return nil, &UnsupportedError{Keyword: "false", Path: path, Reason: "matches nothing: no reply could satisfy it"}
	case *object:
		return c.object(s, path)
	}
	return nil, fmt.Errorf("grammar: the schema at %s is not an object: write a JSON Schema object there", path)
}

func (c *compiler) object(s *object, path string) (*node, error) {
	for _, k := range s.keys {
		if !supported[k] {
			return nil, &UnsupportedError{Keyword: k, Path: path, Reason: "is not supported: use only " + supportedList}
		}
	}
	if _, ok := s.vals["$defs"]; ok && path != "#" {
		return nil, &UnsupportedError{Keyword: "$defs", Path: path, Reason: "is supported only at the schema's root: move the definitions there"}
	}
	if ref, ok := s.vals["$ref"]; ok {
		return c.ref(ref, path)
	}
	if v, ok := s.vals["const"]; ok {
		return literalOf([]any{v}, path+"/const")
	}
	if v, ok := s.vals["enum"]; ok {
		vs, ok := v.([]any)
		if !ok || len(vs) == 0 {
			return nil, fmt.Errorf("grammar: enum at %s must be a non-empty array", path)
		}
		return literalOf(vs, path+"/enum")
	}
	if v, ok := s.vals["anyOf"]; ok {
		return c.anyOf(v, path+"/anyOf")
	}
	switch t := s.vals["type"].(type) {
	case string:
		return c.typed(s, t, path)
	case []any:
		// A list of types is an anyOf of the same schema under each.
		n := &node{kind: kAnyOf}
		for _, e := range t {
			name, _ := e.(string)
			alt, err := c.typed(s, name, path)
			if err != nil {
				return nil, err
			}
			n.alts = append(n.alts, alt)
		}
		c.anyOfs = append(c.anyOfs, struct {
			n    *node
			path string
		}{n, path + "/type"})
		return n, nil
	case nil:
		switch {
		case s.vals["properties"] != nil:
			return c.typed(s, "object", path)
		case s.vals["items"] != nil:
			return c.typed(s, "array", path)
		}
		return anyValue, nil
	}
	return nil, fmt.Errorf("grammar: type at %s must be a string or an array of strings", path)
}

// typed compiles s as a schema of one type.
func (c *compiler) typed(s *object, t, path string) (*node, error) {
	switch t {
	case "object":
		return c.objectType(s, path)
	case "array":
		return c.arrayType(s, path)
	case "string":
		return anyString, nil
	case "number":
		return anyNumber, nil
	case "integer":
		return &node{kind: kInteger}, nil
	case "boolean":
		return literal([]string{"true", "false"}), nil
	case "null":
		return literal([]string{"null"}), nil
	}
	return nil, fmt.Errorf("grammar: type %q at %s is not a JSON Schema type: use object, array, string, number, integer, boolean or null", t, path)
}

func (c *compiler) objectType(s *object, path string) (*node, error) {
	switch ap := s.vals["additionalProperties"].(type) {
	case nil, bool:
	default:
		_ = ap
		return nil, &UnsupportedError{Keyword: "additionalProperties", Path: path, Reason: "is supported only as true or false: tfd never writes undeclared properties"}
	}
	props, _ := s.vals["properties"].(*object)
	if props == nil {
		if s.vals["additionalProperties"] == false {
			return &node{kind: kObject, reqAfter: []int32{0}}, nil // only {}
		}
		return anyObject, nil
	}
	required := map[string]bool{}
	if r, ok := s.vals["required"].([]any); ok {
		for _, e := range r {
			name, _ := e.(string)
			if _, ok := props.vals[name]; !ok {
				return nil, fmt.Errorf("grammar: required names %q at %s, which is not among its properties: declare it or drop it from required", name, path)
			}
			required[name] = true
		}
	}
	n := &node{kind: kObject}
	for _, k := range props.keys {
		v, err := c.node(props.vals[k], path+"/properties/"+k)
		if err != nil {
			return nil, err
		}
		n.keys = append(n.keys, jsonText(k))
		n.values = append(n.values, v)
	}
	n.reqAfter = make([]int32, len(n.keys)+1)
	n.reqAfter[len(n.keys)] = int32(len(n.keys))
	for i := len(n.keys) - 1; i >= 0; i-- {
		n.reqAfter[i] = n.reqAfter[i+1]
		if required[props.keys[i]] {
			n.reqAfter[i] = int32(i)
		}
	}
	return n, nil
}

func (c *compiler) arrayType(s *object, path string) (*node, error) {
	n := &node{kind: kArray, items: anyValue, maxItems: -1}
	if it, ok := s.vals["items"]; ok {
		items, err := c.node(it, path+"/items")
		if err != nil {
			return nil, err
		}
		n.items = items
	}
	var err error
	if n.minItems, err = count(s.vals["minItems"], 0, path+"/minItems"); err != nil {
		return nil, err
	}
	if n.maxItems, err = count(s.vals["maxItems"], -1, path+"/maxItems"); err != nil {
		return nil, err
	}
	if n.maxItems >= 0 && n.maxItems < n.minItems {
		return nil, fmt.Errorf("grammar: maxItems is below minItems at %s: no array satisfies both", path)
	}
	return n, nil
}

// count reads a non-negative integer keyword, or returns def when it is absent.
func count(v any, def int, path string) (int, error) {
	if v == nil {
		return def, nil
	}
	num, _ := v.(json.Number)
	n, err := strconv.Atoi(string(num))
	if err != nil || n < 0 {
		return 0, fmt.Errorf("grammar: %s must be a non-negative integer, got %v", path, v)
	}
	return n, nil
}

func (c *compiler) anyOf(v any, path string) (*node, error) {
	vs, ok := v.([]any)
	if !ok || len(vs) == 0 {
		return nil, fmt.Errorf("grammar: anyOf at %s must be a non-empty array of schemas", path)
	}
	n := &node{kind: kAnyOf}
	for i, e := range vs {
		alt, err := c.node(e, path+"/"+strconv.Itoa(i))
		if err != nil {
			return nil, err
		}
		n.alts = append(n.alts, alt)
	}
	c.anyOfs = append(c.anyOfs, struct {
		n    *node
		path string
	}{n, path})
	return n, nil
}

// ref compiles a reference to the root or to one of its $defs. A reference compiles once, so a
// recursive schema makes a cycle of nodes.
func (c *compiler) ref(v any, path string) (*node, error) {
	ref, _ := v.(string)
	if n, ok := c.refs[ref]; ok {
		return n, nil
	}
	var target any
	switch {
	case ref == "#":
		target = c.root
	case strings.HasPrefix(ref, "#/$defs/"):
		if defs, ok := c.root.(*object); ok {
			if d, ok := defs.vals["$defs"].(*object); ok {
				target = d.vals[strings.TrimPrefix(ref, "#/$defs/")]
			}
		}
	}
	if target == nil {
		return nil, &UnsupportedError{Keyword: "$ref", Path: path, Reason: fmt.Sprintf("%q: only \"#\" and \"#/$defs/NAME\" of the root's $defs are supported", ref)}
	}
	n := &node{} // filled below; references met meanwhile point at it
	c.refs[ref] = n
	t, err := c.node(target, ref)
	if err != nil {
		return nil, err
	}
	*n = *t
	return n, nil
}

// dispatch fills an anyOf's table from first byte to branch, refusing branches that could start
// with the same byte: the automaton picks a branch at the value's first byte.
func (c *compiler) dispatch(n *node, path string) error {
	for i, alt := range n.alts {
		var first [256]bool
		if err := firstBytes(alt, &first, map[*node]bool{n: true}); err != nil {
			return &UnsupportedError{Keyword: "anyOf", Path: path, Reason: err.Error()}
		}
		for b, ok := range first {
			if !ok {
				continue
			}
			if n.pick[b] != 0 {
				return &UnsupportedError{Keyword: "anyOf", Path: path, Reason: fmt.Sprintf("has branches %d and %d that can both start with %q: tfd tells branches apart by their first character, so give them different types", n.pick[b]-1, i, rune(b))}
			}
			n.pick[b] = int8(i + 1)
		}
	}
	return nil
}

// firstBytes marks the bytes a value of n may start with.
func firstBytes(n *node, first *[256]bool, seen map[*node]bool) error {
	if seen[n] {
		return fmt.Errorf("refers to itself before any character is written")
	}
	switch n.kind {
	case kAny:
		for _, b := range []byte(`{["-0123456789tfn`) {
			first[b] = true
		}
	case kObject, kAnyObject:
		first['{'] = true
	case kArray:
		first['['] = true
	case kString:
		first['"'] = true
	case kNumber, kInteger:
		for _, b := range []byte("-0123456789") {
			first[b] = true
		}
	case kLiteral, kTagged:
		for _, e := range n.lit[0].next {
			first[e.b] = true
		}
	case kSeq:
		return firstBytes(n.parts[0], first, seen)
	case kAnyOf:
		seen[n] = true
		defer delete(seen, n)
		for _, a := range n.alts {
			if err := firstBytes(a, first, seen); err != nil {
				return err
			}
		}
	}
	return nil
}

// literalOf returns a node matching the compact JSON text of each value (object keys sorted).
func literalOf(vs []any, path string) (*node, error) {
	texts := make([]string, 0, len(vs))
	for _, v := range vs {
		b, err := marshal(plain(v))
		if err != nil {
			return nil, fmt.Errorf("grammar: %s: %w", path, err)
		}
		texts = append(texts, string(b))
	}
	return literal(texts), nil
}

// jsonText returns s as a JSON string literal, without HTML escaping.
func jsonText(s string) string {
	b, _ := marshal(s)
	return string(b)
}

func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// object is a JSON object that keeps its keys' order: properties are written in it.
type object struct {
	keys []string
	vals map[string]any
}

// plain turns decoded ordered objects back into maps, for marshalling a const or enum value.
func plain(v any) any {
	switch v := v.(type) {
	case *object:
		m := make(map[string]any, len(v.keys))
		for _, k := range v.keys {
			m[k] = plain(v.vals[k])
		}
		return m
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = plain(e)
		}
		return out
	}
	return v
}

// decodeOrdered reads one JSON value, objects as *object.
func decodeOrdered(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		o := &object{vals: map[string]any{}}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			k := kt.(string)
			v, err := decodeOrdered(dec)
			if err != nil {
				return nil, err
			}
			if _, dup := o.vals[k]; !dup {
				o.keys = append(o.keys, k)
			}
			o.vals[k] = v
		}
		_, err := dec.Token()
		return o, err
	case json.Delim('['):
		a := []any{}
		for dec.More() {
			v, err := decodeOrdered(dec)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		_, err := dec.Token()
		return a, err
	}
	return tok, nil
}
