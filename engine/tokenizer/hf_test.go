package tokenizer

import (
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"unicode/utf8"
)

// hfFixture is one file made by tools/fixtures/tokenizers/generate.py with Hugging Face tokenizers: a small
// trained tokenizer in one family's configuration and what tokenizers made of many texts.
type hfFixture struct {
	Name      string `json:"name"`
	Version   string `json:"tokenizers_version"`
	Tokenizer string `json:"tokenizer"`
	Cases     []struct {
		Text    string   `json:"text"`
		IDs     []int32  `json:"ids"`
		Decoded string   `json:"decoded"`
		Pieces  []string `json:"pieces"` // pre_tokenize_str(text), byte-level form
	} `json:"cases"`
	Decodes []struct {
		IDs  []int32 `json:"ids"`
		Text string  `json:"text"`
	} `json:"decodes"`
}

func readFixture(t testing.TB, path string) *hfFixture {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var fx hfFixture
	if err := json.NewDecoder(zr).Decode(&fx); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return &fx
}

// TestHFFixtures compares encoding, pre-tokenizer splitting, decoding and incremental decoding
// with Hugging Face tokenizers on every case of every fixture.
func TestHFFixtures(t *testing.T) {
	paths, err := filepath.Glob("testdata/hf/*.json.gz")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no fixtures in testdata/hf (%v)", err)
	}
	for _, path := range paths {
		fx := readFixture(t, path)
		t.Run(fx.Name, func(t *testing.T) {
			tok, err := Load([]byte(fx.Tokenizer))
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			for i, c := range fx.Cases {
				if got := tok.Encode(c.Text); !slices.Equal(got, c.IDs) {
					t.Errorf("case %d: Encode(%q)\n got  %s\n want %s", i, c.Text, quoteAll(tokens(t, tok, got)), quoteAll(tokens(t, tok, c.IDs)))
				}
				if got := tok.Decode(c.IDs); got != c.Decoded {
					t.Errorf("case %d: Decode(%v) = %q, want %q", i, c.IDs, got, c.Decoded)
				}
				if got := tok.preTokenizePieces(c.Text); !slices.Equal(got, c.Pieces) {
					t.Errorf("case %d: pre-tokenizing %q\n got  %s\n want %s", i, c.Text, quoteAll(got), quoteAll(c.Pieces))
				}
			}
			for i, c := range fx.Decodes {
				want := c.Text
				if got := tok.Decode(c.IDs); got != want {
					t.Errorf("decode %d: Decode(%v) = %q, want %q", i, c.IDs, got, want)
				}
				d := tok.NewDecoder()
				var stream []byte
				for _, id := range c.IDs {
					stream = append(stream, d.Add(id)...)
				}
				if got := string(stream) + d.Flush(); got != want {
					t.Errorf("decode %d: incremental decode of %v = %q, want %q", i, c.IDs, got, want)
				}
			}
			t.Logf("tokenizers %s: %d encodings, %d decodings", fx.Version, len(fx.Cases), len(fx.Decodes))
		})
	}
}

// preTokenizePieces returns the pieces the pre-tokenizers alone make of s, in byte-level form, as
// Hugging Face's pre_tokenizer.pre_tokenize_str does.
func (t *Tokenizer) preTokenizePieces(s string) []string {
	var pieces []string
	if s != "" {
		pieces = []string{s}
	}
	for _, st := range t.steps {
		var next []string
		for _, p := range pieces {
			if st.split == 0 && st.addPrefixSpace && p[0] != ' ' {
				p = " " + p
			}
			pat := st.split
			if st.split == 0 {
				if !st.useRegex {
					next = append(next, p)
					continue
				}
				pat = patternGPT2
			}
			next = append(next, splitAll(pat, p)...)
		}
		pieces = next
	}
	out := make([]string, len(pieces))
	for i, p := range pieces {
		out[i] = byteLevelString(p)
	}
	return out
}

func splitAll(p splitPattern, s string) []string {
	var out []string
	for i := 0; i < len(s); {
		j := p.next(s, i)
		out = append(out, s[i:j])
		i = j
	}
	return out
}

// FuzzRoundTrip checks on the Llama 3 fixture's tokenizer (no normalizer) that decoding an
// encoding gives back valid UTF-8 text unchanged, and that the incremental decoder agrees.
func FuzzRoundTrip(f *testing.F) {
	fx := readFixture(f, "testdata/hf/llama3.json.gz")
	tok, err := Load([]byte(fx.Tokenizer))
	if err != nil {
		f.Fatal(err)
	}
	for _, c := range fx.Cases[:50] {
		f.Add(c.Text)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ids := tok.Encode(s)
		got := tok.Decode(ids)
		if utf8.ValidString(s) && got != s {
			t.Fatalf("Decode(Encode(%q)) = %q", s, got)
		}
		d := tok.NewDecoder()
		var stream []byte
		for _, id := range ids {
			stream = append(stream, d.Add(id)...)
		}
		if inc := string(stream) + d.Flush(); inc != got {
			t.Fatalf("incremental %q, Decode %q", inc, got)
		}
	})
}
