package chattemplate

import (
	"strconv"
	"strings"
	"unicode"
)

// toJSONFunc is the variable through which rewritten templates call toJSON. The engine has no way
// to replace a built-in filter, but it calls functions passed as variables.
const toJSONFunc = "__tfd_tojson"

// stringEnd returns the index just past the quoted string that starts at s[i].
func stringEnd(s string, i int) int {
	quote := s[i]
	for i++; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case quote:
			return i + 1
		}
	}
	return len(s)
}

// token is one lexical token of a tag's content.
type token struct {
	kind byte // 'n' name, 's' string, '0' number, ' ' space, 'p' punctuation (one byte)
	text string
}

// lex splits a tag's content into tokens; concatenating their texts gives back the content.
func lex(s string) []token {
	var toks []token
	for i := 0; i < len(s); {
		j := i + 1
		kind := byte('p')
		switch c := s[i]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			kind = ' '
			for j < len(s) && strings.IndexByte(" \t\n\r", s[j]) >= 0 {
				j++
			}
		case c == '\'' || c == '"':
			kind, j = 's', stringEnd(s, i)
		case isIdentStart(c):
			kind = 'n'
			for j < len(s) && (isIdentStart(s[j]) || isDigit(s[j])) {
				j++
			}
		case isDigit(c):
			kind = '0'
			for j < len(s) && (isDigit(s[j]) || s[j] == '_' || s[j] == '.' && j+1 < len(s) && isDigit(s[j+1]) ||
				(s[j] == 'e' || s[j] == 'E') ||
				(s[j] == '+' || s[j] == '-') && (s[j-1] == 'e' || s[j-1] == 'E')) {
				j++
			}
		}
		toks = append(toks, token{kind, s[i:j]})
		i = j
	}
	return toks
}

func isIdentStart(c byte) bool { return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
func isDigit(c byte) bool      { return '0' <= c && c <= '9' }

// operators are the names that act as operators or statement keywords: a bracket after one of
// them opens a new expression rather than calling or indexing what precedes it.
var operators = map[string]bool{
	"and": true, "or": true, "not": true, "in": true, "is": true, "if": true, "else": true,
	"elif": true, "for": true, "set": true, "print": true, "do": true, "with": true, "return": true,
	"recursive": true, "filter": true, "call": true, "macro": true, "import": true, "from": true,
	"as": true, "include": true,
}

// rewriteTag rewrites one tag's content for the engine. Each tojson filter becomes a call to
// toJSONFunc, left to right (filters chained after it see the call as their operand, so they
// keep working). String literals are re-escaped: Jinja2 decodes Python's escapes (\r, \xhh,
// \uXXXX, octal, ...) while the engine knows only \n, \t, \\, \' and \".
func rewriteTag(content string) string {
	toks := lex(content)
	for i, t := range toks {
		if t.kind == 's' && strings.Contains(t.text, "\\") && len(t.text) >= 2 && t.text[0] == t.text[len(t.text)-1] {
			if v, ok := pyUnescape(t.text[1 : len(t.text)-1]); ok {
				toks[i].text = engineQuote(v)
			}
		}
	}
	for i := 0; i < len(toks); i++ {
		if toks[i].text != "|" {
			continue
		}
		name := nextSolid(toks, i+1)
		if name < 0 || toks[name].text != "tojson" {
			continue
		}
		end := name + 1 // the filter application ends before toks[end]
		var args []token
		if p := nextSolid(toks, end); p >= 0 && toks[p].text == "(" {
			closeAt := matching(toks, p, +1)
			if closeAt < 0 {
				continue
			}
			args, end = toks[p+1:closeAt], closeAt+1
		}
		start := operandStart(toks, i)
		if start < 0 {
			continue
		}
		call := toJSONFunc + "(" + strings.TrimSpace(join(toks[start:i]))
		if a := strings.TrimSpace(join(args)); a != "" {
			call += ", " + a
		}
		call += ")"
		rest := append([]token{{'n', call}}, toks[end:]...)
		toks = append(toks[:start], rest...)
		i = start
	}
	return join(toks)
}

// operandStart returns the index of the first token of the operand that the filter bar at
// toks[bar] applies to, or -1 if it cannot tell.
func operandStart(toks []token, bar int) int {
	j := prevSolid(toks, bar-1)
	for j >= 0 {
		t := toks[j]
		switch {
		case t.text == ")" || t.text == "]" || t.text == "}":
			open := matching(toks, j, -1)
			if open < 0 {
				return -1
			}
			// A call or subscript continues the operand leftwards; a bare group, list or dict
			// literal starts it.
			p := prevSolid(toks, open-1)
			if t.text != "}" && p >= 0 && (toks[p].kind == 'n' && !operators[toks[p].text] ||
				toks[p].kind == 's' || toks[p].text == ")" || toks[p].text == "]") {
				j = p
				continue
			}
			return open
		case t.kind == 'n' && !operators[t.text]:
			// An attribute name or a filter name continues the operand leftwards.
			if p := prevSolid(toks, j-1); p >= 0 && (toks[p].text == "." || toks[p].text == "|") {
				j = prevSolid(toks, p-1)
				continue
			}
			return j
		case t.kind == 's' || t.kind == '0':
			return j
		default:
			return -1
		}
	}
	return -1
}

// matching returns the index of the bracket that matches toks[i], searching in direction dir
// (+1 forwards from an opener, -1 backwards from a closer), or -1.
func matching(toks []token, i, dir int) int {
	depth := 0
	for ; i >= 0 && i < len(toks); i += dir {
		switch toks[i].text {
		case "(", "[", "{":
			depth += dir
		case ")", "]", "}":
			depth -= dir
		}
		if depth == 0 {
			return i
		}
	}
	return -1
}

// nextSolid and prevSolid return the index of the nearest token that is not space, from i
// forwards or backwards, or -1.
func nextSolid(toks []token, i int) int {
	for ; i < len(toks); i++ {
		if toks[i].kind != ' ' {
			return i
		}
	}
	return -1
}

func prevSolid(toks []token, i int) int {
	for ; i >= 0; i-- {
		if toks[i].kind != ' ' {
			return i
		}
	}
	return -1
}

// pyUnescape decodes the escapes Python's unicode-escape codec knows, as Jinja2 does for string
// literals. It reports false for what Python would reject (a bad \x, \u or \U, a trailing
// backslash) and for \N{...}, which needs Unicode's name table; the literal is then left as is.
func pyUnescape(s string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			continue
		}
		i++
		if i == len(s) {
			return "", false
		}
		simple := map[byte]string{'\n': "", '\\': "\\", '\'': "'", '"': "\"", 'a': "\a", 'b': "\b",
			'f': "\f", 'n': "\n", 'r': "\r", 't': "\t", 'v': "\v"}
		if r, ok := simple[s[i]]; ok {
			b.WriteString(r)
			continue
		}
		switch c := s[i]; {
		case '0' <= c && c <= '7':
			j := i
			for j < len(s) && j < i+3 && '0' <= s[j] && s[j] <= '7' {
				j++
			}
			n, _ := strconv.ParseUint(s[i:j], 8, 32)
			b.WriteRune(rune(n))
			i = j - 1
		case c == 'x' || c == 'u' || c == 'U':
			digits := map[byte]int{'x': 2, 'u': 4, 'U': 8}[c]
			if i+1+digits > len(s) {
				return "", false
			}
			n, err := strconv.ParseUint(s[i+1:i+1+digits], 16, 32)
			if err != nil || n > unicode.MaxRune {
				return "", false
			}
			b.WriteRune(rune(n))
			i += digits
		case c == 'N':
			return "", false
		default: // unknown escapes keep their backslash
			b.WriteByte('\\')
			b.WriteByte(c)
		}
	}
	return b.String(), true
}

// engineQuote writes s as a single-quoted literal that the engine reads back as s.
func engineQuote(s string) string {
	var b strings.Builder
	b.WriteByte('\'')
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			b.WriteString(`\\`)
		case '\'':
			b.WriteString(`\'`)
		case '\n':
			b.WriteString(`\n`)
		default:
			b.WriteByte(s[i])
		}
	}
	b.WriteByte('\'')
	return b.String()
}

// join concatenates tokens, spacing adjacent closing braces: "}}" inside a balanced expression
// is fine for Jinja2 but would end the engine's tag.
func join(toks []token) string {
	var b strings.Builder
	for i, t := range toks {
		if t.text == "}" && i > 0 && strings.HasSuffix(toks[i-1].text, "}") {
			b.WriteByte(' ')
		}
		b.WriteString(t.text)
	}
	return b.String()
}
