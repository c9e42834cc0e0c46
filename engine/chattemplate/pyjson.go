package chattemplate

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/ardanlabs/jinja"
)

// toJSON is the tojson filter as transformers defines it: json.dumps(x, ensure_ascii=False,
// indent=None, separators=None, sort_keys=False), each keyword overridable. The template calls it
// as a function (see rewriteToJSON) with the filtered value first.
func toJSON(args []jinja.Value, kwargs map[string]jinja.Value) (jinja.Value, error) {
	if len(args) == 0 {
		return jinja.Value{}, errors.New("tojson: no value to encode")
	}
	enc := pyEncoder{itemSep: ", ", keySep: ": "}
	if v, ok := kwargs["indent"]; ok && !v.IsNone() {
		switch {
		case v.IsBool(): // a Python bool is an int: True indents by one space
			enc.indent, enc.indented = "", true
			if v.AsBool() {
				enc.indent = " "
			}
		case v.IsInt():
			enc.indent, enc.indented = strings.Repeat(" ", int(max(v.AsInt(), 0))), true
		case v.IsString():
			enc.indent, enc.indented = v.AsString(), true
		default:
			return jinja.Value{}, fmt.Errorf("tojson: indent must be an integer or a string, not %s", v)
		}
		enc.itemSep = "," // json.dumps drops the space before a newline
	}
	if v, ok := kwargs["separators"]; ok && !v.IsNone() {
		if !v.IsList() || v.AsList().Len() != 2 || !v.AsList().Get(0).IsString() || !v.AsList().Get(1).IsString() {
			return jinja.Value{}, fmt.Errorf("tojson: separators must be two strings, not %s", v)
		}
		enc.itemSep, enc.keySep = v.AsList().Get(0).AsString(), v.AsList().Get(1).AsString()
	}
	if v, ok := kwargs["ensure_ascii"]; ok {
		enc.ensureASCII = v.IsTruthy()
	}
	if v, ok := kwargs["sort_keys"]; ok {
		enc.sortKeys = v.IsTruthy()
	}
	var b strings.Builder
	if err := enc.encode(&b, args[0], 0); err != nil {
		return jinja.Value{}, fmt.Errorf("tojson: %w", err)
	}
	return jinja.NewString(b.String()), nil
}

// pyEncoder writes values as Python's json.dumps does with the same settings.
type pyEncoder struct {
	indent      string // one level of indentation, if indented
	indented    bool   // whether indent was given (an empty indent still breaks lines)
	itemSep     string
	keySep      string
	ensureASCII bool
	sortKeys    bool
}

func (e *pyEncoder) encode(b *strings.Builder, v jinja.Value, depth int) error {
	switch {
	case v.IsNone():
		b.WriteString("null")
	case v.IsBool():
		b.WriteString(strconv.FormatBool(v.AsBool()))
	case v.IsInt():
		b.WriteString(strconv.FormatInt(v.AsInt(), 10))
	case v.IsFloat():
		b.WriteString(pyFloat(v.AsFloat()))
	case v.IsString():
		e.encodeString(b, v.AsString())
	case v.IsList():
		items := v.AsList().Items
		if len(items) == 0 {
			b.WriteString("[]")
			return nil
		}
		b.WriteByte('[')
		for i, item := range items {
			e.separate(b, i, depth+1)
			if err := e.encode(b, item, depth+1); err != nil {
				return err
			}
		}
		e.newline(b, depth)
		b.WriteByte(']')
	case v.IsDict():
		d := v.AsDict()
		keys := d.Keys
		if e.sortKeys {
			keys = slices.Sorted(slices.Values(keys))
		}
		if len(keys) == 0 {
			b.WriteString("{}")
			return nil
		}
		b.WriteByte('{')
		for i, k := range keys {
			e.separate(b, i, depth+1)
			e.encodeString(b, k)
			b.WriteString(e.keySep)
			if err := e.encode(b, d.Data[k], depth+1); err != nil {
				return err
			}
		}
		e.newline(b, depth)
		b.WriteByte('}')
	case v.IsUndefined():
		// Python raises here too: json.dumps cannot serialize jinja2's Undefined.
		return errors.New("value is undefined")
	default:
		return fmt.Errorf("cannot encode %s", v)
	}
	return nil
}

// separate writes what precedes the i-th item of a container whose items sit at depth.
func (e *pyEncoder) separate(b *strings.Builder, i, depth int) {
	if i > 0 {
		b.WriteString(e.itemSep)
	}
	e.newline(b, depth)
}

// newline starts a new line indented to depth, when indenting.
func (e *pyEncoder) newline(b *strings.Builder, depth int) {
	if e.indented {
		b.WriteByte('\n')
		for range depth {
			b.WriteString(e.indent)
		}
	}
}

// encodeString writes s as a JSON string the way Python does: the short escapes for ", \, \b,
// \f, \n, \r and \t, \u00XX for other control characters, and everything else as is (or, with
// ensureASCII, non-ASCII as \uXXXX, astral characters as surrogate pairs).
func (e *pyEncoder) encodeString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, r := range s { // invalid UTF-8 reads as U+FFFD, which Python strings cannot hold
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || e.ensureASCII && r >= 0x80 && r < 0x10000:
			fmt.Fprintf(b, `\u%04x`, r)
		case e.ensureASCII && r >= 0x10000:
			r -= 0x10000
			fmt.Fprintf(b, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
}

// pyFloat formats f as Python's repr does, which is what json.dumps writes: the shortest digits
// that round-trip, positional when the decimal exponent is in [-4, 16) with ".0" on whole numbers,
// otherwise scientific with a signed exponent of at least two digits (1e-05, 1.5e+16).
func pyFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case f == 0:
		if math.Signbit(f) {
			return "-0.0"
		}
		return "0.0"
	}
	sci := strconv.FormatFloat(f, 'e', -1, 64) // e.g. -1.2345e+06
	mant, expText, _ := strings.Cut(sci, "e")
	exp, _ := strconv.Atoi(expText)
	sign := ""
	if mant[0] == '-' {
		sign, mant = "-", mant[1:]
	}
	digits := strings.Replace(mant, ".", "", 1)
	if exp < -4 || exp >= 16 {
		if len(digits) > 1 {
			mant = digits[:1] + "." + digits[1:]
		}
		return fmt.Sprintf("%s%se%+03d", sign, mant, exp)
	}
	var out string
	switch point := exp + 1; { // digits before the decimal point
	case point <= 0:
		out = "0." + strings.Repeat("0", -point) + digits
	case point >= len(digits):
		out = digits + strings.Repeat("0", point-len(digits)) + ".0"
	default:
		out = digits[:point] + "." + digits[point:]
	}
	return sign + out
}
