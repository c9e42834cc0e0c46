package chattemplate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/ardanlabs/jinja"
)

// decodeValue decodes one JSON value into a template value. Objects become dicts that keep the
// key order of the JSON text (Python's json.loads does the same, and templates print tool schemas
// with tojson, so the order reaches the prompt). Numbers without a fraction or exponent become
// integers, as in Python.
func decodeValue(data []byte) (jinja.Value, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeNext(dec)
	if err != nil {
		return jinja.Value{}, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return jinja.Value{}, errors.New("unexpected data after the JSON value")
	}
	return v, nil
}

// decodeNext decodes the value that starts at the decoder's next token.
func decodeNext(dec *json.Decoder) (jinja.Value, error) {
	tok, err := dec.Token()
	if err != nil {
		return jinja.Value{}, err
	}
	switch tok := tok.(type) {
	case nil:
		return jinja.None(), nil
	case bool:
		return jinja.NewBool(tok), nil
	case string:
		return jinja.NewString(tok), nil
	case json.Number:
		return jinja.FromGoValue(tok), nil
	case json.Delim:
		if tok == '[' {
			var items []jinja.Value
			for dec.More() {
				item, err := decodeNext(dec)
				if err != nil {
					return jinja.Value{}, err
				}
				items = append(items, item)
			}
			_, err := dec.Token() // ']'
			return jinja.NewList(items), err
		}
		d := jinja.NewDict()
		for dec.More() {
			key, err := dec.Token()
			if err != nil {
				return jinja.Value{}, err
			}
			val, err := decodeNext(dec)
			if err != nil {
				return jinja.Value{}, err
			}
			d.AsDict().Set(key.(string), val)
		}
		_, err := dec.Token() // '}'
		return d, err
	}
	return jinja.Value{}, fmt.Errorf("unexpected JSON token %v", tok)
}
