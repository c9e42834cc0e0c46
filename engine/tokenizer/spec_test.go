package tokenizer

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestSpecRoundTrip: a tokenizer rebuilt by New from its own Spec (what a GGUF file keeps of it)
// encodes every text of the Hugging Face fixtures and the bundled model's oracle as tokenizers
// did, decodes as it did, and marks the same tokens special.
func TestSpecRoundTrip(t *testing.T) {
	paths, err := filepath.Glob("testdata/hf/*.json.gz")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no fixtures in testdata/hf (%v)", err)
	}
	type textCase struct {
		text string
		ids  []int32
	}
	type fixture struct {
		name, tokenizer string
		cases           []textCase
	}
	var fixtures []fixture
	for _, path := range paths {
		fx := readFixture(t, path)
		f := fixture{name: fx.Name, tokenizer: fx.Tokenizer}
		for _, c := range fx.Cases {
			f.cases = append(f.cases, textCase{c.Text, c.IDs})
		}
		fixtures = append(fixtures, f)
	}
	bundled, err := os.ReadFile(oracleTokenizer)
	if err != nil {
		t.Fatal(err)
	}
	fixtures = append(fixtures, fixture{name: "bundled", tokenizer: string(bundled), cases: []textCase{
		{"<|im_start|>user\nfunc main() {}<|im_end|>", nil}, {"x := 12345\t\t\n\n  y", nil},
		{"héllo wörld 日本語 e\u0301", nil}, {"   ", nil}, {"", nil},
	}})
	for _, fx := range fixtures {
		t.Run(fx.name, func(t *testing.T) {
			orig, err := Load([]byte(fx.tokenizer))
			if err != nil {
				t.Fatal(err)
			}
			spec, err := orig.Spec()
			if fx.name == "gpt2_prefix" {
				// GGUF has no prefix space for byte-level BPE: refused, not silently dropped.
				if err == nil || !strings.Contains(err.Error(), "prefix space") {
					t.Fatalf("Spec() = %v, want a refusal naming the prefix space", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			rebuilt, err := New(spec)
			if err != nil {
				t.Fatal(err)
			}
			if rebuilt.VocabSize() != orig.VocabSize() {
				t.Errorf("VocabSize() = %d, want %d", rebuilt.VocabSize(), orig.VocabSize())
			}
			for id := range int32(orig.VocabSize()) {
				if rebuilt.IsSpecial(id) != orig.IsSpecial(id) || string(rebuilt.TokenBytes(id)) != string(orig.TokenBytes(id)) {
					t.Fatalf("token %d: special %t bytes %q, want %t %q", id, rebuilt.IsSpecial(id), rebuilt.TokenBytes(id),
						orig.IsSpecial(id), orig.TokenBytes(id))
				}
			}
			for i, c := range fx.cases {
				want := c.ids
				if want == nil {
					want = orig.Encode(c.text)
				}
				got := rebuilt.Encode(c.text)
				if !slices.Equal(got, want) {
					t.Errorf("case %d: Encode(%q)\n got  %v\n want %v", i, c.text, got, want)
				}
				if rebuilt.Decode(got) != orig.Decode(want) {
					t.Errorf("case %d: Decode = %q, want %q", i, rebuilt.Decode(got), orig.Decode(want))
				}
			}
		})
	}
}

func TestNewRefuses(t *testing.T) {
	byteTokens := make([]string, 256)
	for b := range byteTokens {
		byteTokens[b] = string(byteRunes[b])
	}
	with := func(extra ...string) []string { return append(slices.Clone(byteTokens), extra...) }
	tests := []struct {
		name string
		spec Spec
		want string
	}{
		{"no pre-tokenizer", Spec{Tokens: with()}, "no pre-tokenizer"},
		{"added id outside", Spec{Tokens: with(), Pre: PreQwen2, Added: []AddedToken{{ID: 300}}}, "added token id 300 names no token"},
		{"added id twice", Spec{Tokens: with("<s>"), Pre: PreQwen2, Added: []AddedToken{{ID: 256}, {ID: 256}}}, `added token "<s>" (id 256) is listed twice`},
		{"a token twice", Spec{Tokens: with("ab", "ab"), Pre: PreQwen2}, `token "ab" has two ids, 256 and 257`},
		{"merge of unknown tokens", Spec{Tokens: with(), Pre: PreQwen2, Merges: [][2]string{{"a", "b"}}}, "refers to a token not in the vocabulary"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.spec)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New = %v, want an error saying %q", err, tt.want)
			}
		})
	}
}
