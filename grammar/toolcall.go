package grammar

import (
	"fmt"
	"strings"
)

// Tool is a function a reply may call: its name and the JSON Schema of its arguments (empty: any
// JSON object).
type Tool struct {
	Name       string
	Parameters []byte
}

// ToolCall returns the grammar of a reply that is exactly one call of one of tools, written as
// open + {"name":NAME,"arguments":ARGUMENTS} + close (Qwen's and Hermes' form has open
// "<tool_call>\n" and close "\n</tool_call>"). The arguments follow the schema of the tool
// named, so the name is written first and picks it. An error names the tool whose parameters
// cannot be compiled.
func ToolCall(open, close string, tools []Tool) (*Grammar, error) {
	if len(tools) == 0 {
		return nil, fmt.Errorf("grammar: a tool call needs at least one tool")
	}
	names := make([]string, len(tools))
	calls := make([]*node, len(tools))
	seen := map[string]bool{}
	for i, t := range tools {
		if seen[t.Name] {
			return nil, fmt.Errorf("grammar: two tools are named %q: give each tool its own name", t.Name)
		}
		seen[t.Name] = true
		args := anyObject
		if len(strings.TrimSpace(string(t.Parameters))) > 0 {
			g, err := Compile(t.Parameters)
			if err != nil {
				return nil, fmt.Errorf("tool %q: %w", t.Name, err)
			}
			args = g.root
		}
		names[i] = jsonText(t.Name)
		calls[i] = &node{kind: kSeq, parts: []*node{literal([]string{`,"arguments":`}), args, literal([]string{"}" + close})}}
	}
	byName := literal(names)
	byName.kind, byName.tagged = kTagged, calls
	return &Grammar{root: &node{kind: kSeq, parts: []*node{literal([]string{open + `{"name":`}), byName}}}, nil
}
