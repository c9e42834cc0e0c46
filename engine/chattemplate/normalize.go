package chattemplate

import (
	"errors"
	"strconv"
	"strings"
	"unicode"
)

// textVar is the variable that holds the template's protected text pieces (see normalize).
const textVar = "__tfd_text"

// normalize rewrites a template so that the engine renders it as Jinja2 would, and returns the
// text pieces that the rewritten source prints through textVar.
//
// It applies Jinja2's own lexing of whitespace, as transformers configures it: line breaks
// normalised to \n and one trailing newline dropped; "-" markers stripping all whitespace beside
// a tag and "+" markers keeping it; lstrip_blocks and trim_blocks around block tags and comments;
// {% raw %} blocks. The engine also trims around block tags, but reaches past expressions to the
// nearest text: in `{% if x %}{{ y }}\n{% endif %}` it eats the newline that Jinja2 prints. So
// the output has no markers and no comments, and every text piece that the engine's trimming
// could still change (or that a raw block holds) is printed as {{ __tfd_text[i] }} instead.
//
// Inside tags, each tojson filter becomes a call to toJSONFunc and string literals are
// re-escaped for the engine, which knows fewer escapes than Python (see rewriteTag).
func normalize(source string) (out string, texts []string, err error) {
	source = normalizeNewlines(source)
	var b strings.Builder
	pending := "" // text not yet emitted: pieces separated only by comments join up
	flush := func(protect bool) {
		switch {
		case pending == "":
		case protect || needsProtection(pending):
			b.WriteString("{{ " + textVar + "[" + strconv.Itoa(len(texts)) + "] }}")
			texts = append(texts, pending)
		default:
			b.WriteString(pending)
		}
		pending = ""
	}

	lineStarting := true // whether the last thing lexed ended with a newline, as in Jinja2
	for pos := 0; ; {
		open := nextTag(source, pos)
		if open < 0 {
			pending += source[pos:]
			flush(false)
			return b.String(), texts, nil
		}
		kind := source[open+1]
		body := open + 2 // past the opener and any sign
		var sign byte
		if body < len(source) && (source[body] == '-' || source[body] == '+') {
			sign = source[body]
			body++
		}
		pending += leftStrip(source[pos:open], kind, sign, lineStarting)

		if kind == '%' {
			if end, ok := rawBegin(source, body); ok {
				flush(false)
				content, after, err := rawBody(source, end, source[end-1] == '\n')
				if err != nil {
					return "", nil, err
				}
				pending = content
				flush(true) // raw text may hold tag openers
				pos, lineStarting = after, source[after-1] == '\n'
				continue
			}
		}
		content, end, err := tagBody(source, body, kind)
		if err != nil {
			return "", nil, err
		}
		after := tagEnd(source, end, kind)
		pos, lineStarting = after, source[after-1] == '\n'
		if kind == '#' {
			continue // a comment prints nothing
		}
		flush(false)
		// Spaces keep the content's first and last characters from reading as markers.
		content = strings.TrimFunc(rewriteTag(content), pyIsSpace)
		if kind == '{' {
			b.WriteString("{{ " + content + " }}")
		} else {
			b.WriteString("{% " + content + " %}")
		}
	}
}

// normalizeNewlines does what Jinja2's lexer does first: \r\n and \r become \n, and one
// trailing newline is dropped (keep_trailing_newline is off in transformers).
func normalizeNewlines(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	return strings.TrimSuffix(s, "\n")
}

// nextTag returns the index of the next tag opener ({{, {% or {#) at or after from, or -1.
func nextTag(s string, from int) int {
	for i := from; i+1 < len(s); i++ {
		if s[i] == '{' && (s[i+1] == '{' || s[i+1] == '%' || s[i+1] == '#') {
			return i
		}
	}
	return -1
}

// leftStrip applies a tag's left-side whitespace control to the text before it: a "-" strips
// all trailing whitespace; otherwise, before a block tag or comment without "+", lstrip_blocks
// removes the spaces that precede the tag when it is the first thing on its line.
func leftStrip(text string, kind, sign byte, lineStarting bool) string {
	switch {
	case sign == '-':
		return strings.TrimRightFunc(text, pyIsSpace)
	case sign == '+' || kind == '{':
		return text
	}
	lineStart := strings.LastIndexByte(text, '\n') + 1
	if (lineStart > 0 || lineStarting) && lineStart < len(text) &&
		strings.TrimLeftFunc(text[lineStart:], pyIsSpace) == "" {
		return text[:lineStart]
	}
	return text
}

// tagEnd returns where a tag's right-side whitespace control leaves the source, given the index
// of its closer (or of the "-" or "+" before it): a "-" consumes all following whitespace, and a
// block tag or comment without "+" consumes one newline (trim_blocks).
func tagEnd(s string, end int, kind byte) int {
	sign := s[end]
	if sign == '-' || sign == '+' {
		end++
	}
	end += 2 // the closer
	switch {
	case sign == '-':
		return len(s) - len(strings.TrimLeftFunc(s[end:], pyIsSpace))
	case sign != '+' && kind != '{' && strings.HasPrefix(s[end:], "\n"):
		return end + 1
	}
	return end
}

// errUnclosed reports a tag without its closer; New then lets the engine describe the problem.
var errUnclosed = errors.New("unclosed tag")

// tagBody scans a tag's content from body to its closer, as Jinja2's lexer does: a closer
// counts only outside strings and with brackets balanced. It returns the content and the index
// of the closer, or of the "-" or "+" that precedes it.
func tagBody(s string, body int, kind byte) (content string, end int, err error) {
	if kind == '#' { // comments end at the first closer, quotes or not
		for i := body; i+1 < len(s); i++ {
			if s[i] == '#' && s[i+1] == '}' {
				if i > body && (s[i-1] == '-' || s[i-1] == '+') {
					i--
				}
				return s[body:i], i, nil
			}
		}
		return "", 0, errUnclosed
	}
	closer := "%}"
	if kind == '{' {
		closer = "}}"
	}
	depth := 0
	for i := body; i < len(s); {
		if depth == 0 {
			if strings.HasPrefix(s[i:], closer) ||
				(s[i] == '-' || s[i] == '+' && kind == '%') && strings.HasPrefix(s[i+1:], closer) {
				return s[body:i], i, nil
			}
		}
		switch c := s[i]; {
		case c == '\'' || c == '"':
			i = stringEnd(s, i)
			continue
		case c == '(' || c == '[' || c == '{':
			depth++
		case c == ')' || c == ']' || c == '}':
			depth--
		}
		i++
	}
	return "", 0, errUnclosed
}

// rawBegin reports whether a {% raw %} tag starts at body (just past "{%" and any sign), and
// returns where it ends. Unlike other block tags it takes no trim_blocks newline.
func rawBegin(s string, body int) (end int, ok bool) {
	rest := strings.TrimLeftFunc(s[body:], pyIsSpace)
	if !strings.HasPrefix(rest, "raw") {
		return 0, false
	}
	rest = strings.TrimLeftFunc(rest[3:], pyIsSpace)
	at := len(s) - len(rest)
	switch {
	case strings.HasPrefix(rest, "-%}"):
		return len(s) - len(strings.TrimLeftFunc(rest[3:], pyIsSpace)), true
	case strings.HasPrefix(rest, "%}"):
		return at + 2, true
	}
	return 0, false
}

// rawBody returns the text of a raw block that starts at from, with the whitespace control of
// its {% endraw %} applied, and where the endraw tag's whitespace control leaves the source.
// lineStarting is whether the raw tag's end took a newline.
func rawBody(s string, from int, lineStarting bool) (content string, after int, err error) {
	for i := from; ; {
		open := strings.Index(s[i:], "{%")
		if open < 0 {
			return "", 0, errors.New("missing end of raw directive")
		}
		open += i
		body, sign := open+2, byte(0)
		if body < len(s) && (s[body] == '-' || s[body] == '+') {
			sign = s[body]
			body++
		}
		rest := strings.TrimLeftFunc(s[body:], pyIsSpace)
		if strings.HasPrefix(rest, "endraw") {
			rest = strings.TrimLeftFunc(rest[len("endraw"):], pyIsSpace)
			end := len(s) - len(rest)
			if strings.HasPrefix(rest, "%}") || strings.HasPrefix(rest, "-%}") || strings.HasPrefix(rest, "+%}") {
				// Jinja2 treats the raw text like any text before a block tag.
				return leftStrip(s[from:open], '%', sign, lineStarting), tagEnd(s, end, '%'), nil
			}
		}
		i = open + 2
	}
}

// needsProtection reports whether the engine's own trimming could change text printed as is,
// or whether it ends in a "{" that would join the next tag's opener.
func needsProtection(text string) bool {
	if strings.HasPrefix(text, "\n") || strings.HasSuffix(text, "{") {
		return true // trim_blocks would take the newline; "{" + "{{" would open a tag
	}
	trimmed := strings.TrimRight(text, " \t")
	return trimmed != text && (trimmed == "" || strings.HasSuffix(trimmed, "\n"))
}

// pyIsSpace reports whether Python's str.isspace holds for r, which is what Jinja2's \s and
// str.strip use: Go's unicode.IsSpace plus the separators U+001C to U+001F.
func pyIsSpace(r rune) bool {
	return unicode.IsSpace(r) || 0x1c <= r && r <= 0x1f
}
