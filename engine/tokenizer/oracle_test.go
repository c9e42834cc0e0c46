package tokenizer

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"slices"
	"testing"
)

// The oracle: the bundled model's tokenizer and encodings of it made by Hugging Face tokenizers
// (encode(text, add_special_tokens=False), decode(ids, skip_special_tokens=False)).
const (
	oracleTokenizer = "../../models/gopher/tokenizer.json"
	oracleCases     = "../testdata/oracle/tokenizer/encodings.json"
)

// oracleCase is one encoding. Field names vary between generators, so several are accepted.
type oracleCase struct {
	Text    string  `json:"text"`
	IDs     []int32 `json:"ids"`
	Decoded *string `json:"decoded"`
}

func (c *oracleCase) UnmarshalJSON(b []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	pick := func(dst any, names ...string) error {
		for _, n := range names {
			if raw, ok := m[n]; ok {
				return json.Unmarshal(raw, dst)
			}
		}
		return nil
	}
	if err := pick(&c.Text, "text", "input", "prompt"); err != nil {
		return err
	}
	if err := pick(&c.IDs, "ids", "input_ids", "tokens", "token_ids"); err != nil {
		return err
	}
	return pick(&c.Decoded, "decoded", "decode", "text_decoded", "roundtrip")
}

func TestOracle(t *testing.T) {
	tokJSON, err := os.ReadFile(oracleTokenizer)
	if errors.Is(err, fs.ErrNotExist) {
		t.Skipf("no oracle tokenizer at %s yet (made on the GPU machine by tools/)", oracleTokenizer)
	}
	if err != nil {
		t.Fatal(err)
	}
	casesJSON, err := os.ReadFile(oracleCases)
	if errors.Is(err, fs.ErrNotExist) {
		t.Skipf("no oracle encodings at %s yet (made on the GPU machine by tools/)", oracleCases)
	}
	if err != nil {
		t.Fatal(err)
	}
	tok, err := Load(tokJSON)
	if err != nil {
		t.Fatalf("Load(%s): %v", oracleTokenizer, err)
	}
	var cases []oracleCase
	if err := json.Unmarshal(casesJSON, &cases); err != nil {
		t.Fatalf("reading %s: %v", oracleCases, err)
	}
	if len(cases) == 0 {
		t.Fatalf("%s holds no cases", oracleCases)
	}
	decoded := 0
	for i, c := range cases {
		if got := tok.Encode(c.Text); !slices.Equal(got, c.IDs) {
			t.Errorf("case %d: Encode(%q)\n got  %v\n want %v", i, c.Text, got, c.IDs)
		}
		if c.Decoded == nil {
			continue
		}
		decoded++
		if got := tok.Decode(c.IDs); got != *c.Decoded {
			t.Errorf("case %d: Decode(%v) = %q, want %q", i, c.IDs, got, *c.Decoded)
		}
		d := tok.NewDecoder()
		var stream []byte
		for _, id := range c.IDs {
			stream = append(stream, d.Add(id)...)
		}
		if got := string(stream) + d.Flush(); got != *c.Decoded {
			t.Errorf("case %d: incremental decode = %q, want %q", i, got, *c.Decoded)
		}
	}
	t.Logf("%d encodings, %d decodings checked", len(cases), decoded)
}
