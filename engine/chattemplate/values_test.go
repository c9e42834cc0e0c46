package chattemplate

import "testing"

func TestDecodeValue(t *testing.T) {
	tests := []struct {
		in, want string // want is the value's Python-style repr
	}{
		{`{"z": 1, "a": {"y": [1, 2.5, "s"], "b": null}, "m": true}`,
			`{'z': 1, 'a': {'y': [1, 2.5, 's'], 'b': None}, 'm': True}`},
		{`[]`, `[]`},
		{` "x" `, `'x'`},
		{`9007199254740993`, `9007199254740993`}, // an integer stays exact
		{`1.0`, `1`},                             // a float stays a float (the engine prints it in Go's form)
	}
	for _, tt := range tests {
		v, err := decodeValue([]byte(tt.in))
		if err != nil || v.String() != tt.want {
			t.Errorf("decodeValue(%s) = %s, %v; want %s", tt.in, v.String(), err, tt.want)
		}
		if tt.in == `1.0` && !v.IsFloat() {
			t.Errorf("decodeValue(1.0) is not a float")
		}
	}
	for _, bad := range []string{`{"a": 1`, `[1, 2] 3`, ``, `{"a" 1}`} {
		if _, err := decodeValue([]byte(bad)); err == nil {
			t.Errorf("decodeValue(%q) succeeded, want an error", bad)
		}
	}
}
