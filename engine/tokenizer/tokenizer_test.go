package tokenizer

import (
	"slices"
	"strings"
	"testing"
)

// encodeCase expects the tokens of in, as raw text.
type encodeCase struct {
	name, in string
	want     []string
}

func runEncodeCases(t *testing.T, tok *Tokenizer, cases []encodeCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ids := tok.Encode(c.in)
			if got := tokens(t, tok, ids); !slices.Equal(got, c.want) {
				t.Errorf("Encode(%q) = %s, want %s", c.in, quoteAll(got), quoteAll(c.want))
			}
		})
	}
}

func TestMergesByRank(t *testing.T) {
	tok := mustLoad(t, spec{merges: [][2]string{
		{"b", "c"},   // rank 0: taken before (a, b) although (a, b) is further left
		{"a", "b"},   // rank 1
		{"a", "bc"},  // rank 2
		{"x", "x"},   // rank 3: ties go leftmost
		{"xx", "xx"}, // rank 4
		{" ", "a"},   // rank 5
	}})
	runEncodeCases(t, tok, []encodeCase{
		{"lower rank first", "abc", []string{"abc"}},
		{"pair only", "ab", []string{"ab"}},
		{"rank beats position", "abcab", []string{"abc", "ab"}},
		{"leftmost on ties", "xxx", []string{"xx", "x"}},
		{"merged merges", "xxxx", []string{"xxxx"}},
		{"five", "xxxxx", []string{"xxxx", "x"}},
		{"space merge", "b a", []string{"b", " a"}},
		{"unmerged bytes", "zq", []string{"zq"[:1], "q"}},
		{"multibyte character stays bytes", "é", []string{"\xc3", "\xa9"}},
		{"empty", "", nil},
	})
	// A long piece goes through the heap many times; compare with a naive merge.
	long := strings.Repeat("x", 1000) + strings.Repeat("abc", 300)
	if got, want := tok.Encode(long), naiveEncode(t, tok, long); !slices.Equal(got, want) {
		t.Errorf("long piece: got %d tokens, naive merge gives %d", len(got), len(want))
	}
}

// naiveEncode merges a single piece by rescanning for the best pair after each merge.
func naiveEncode(t *testing.T, tok *Tokenizer, piece string) []int32 {
	t.Helper()
	var ids []int32
	for i := 0; i < len(piece); i++ {
		ids = append(ids, tok.model.byteIDs[piece[i]])
	}
	for {
		best, at := merge{rank: -1}, -1
		for i := 0; i+1 < len(ids); i++ {
			if m, ok := tok.model.merges[pairKey(ids[i], ids[i+1])]; ok && (at < 0 || m.rank < best.rank) {
				best, at = m, i
			}
		}
		if at < 0 {
			return ids
		}
		ids = slices.Replace(ids, at, at+2, best.id)
	}
}

func TestMergeFormats(t *testing.T) {
	merges := [][2]string{{"a", "b"}, {"ab", "c"}, {" ", "ab"}}
	pairs := mustLoad(t, spec{merges: merges})
	strs := mustLoad(t, spec{merges: merges, mergeStrings: true})
	for _, in := range []string{"abc ab abcab", "cab"} {
		if a, b := pairs.Encode(in), strs.Encode(in); !slices.Equal(a, b) {
			t.Errorf("Encode(%q): merges as pairs give %v, as strings %v", in, a, b)
		}
	}
}

func TestIgnoreMerges(t *testing.T) {
	s := spec{
		preTokenizer: llama3PreTokenizer,
		merges:       [][2]string{{"h", "e"}, {"l", "l"}},
		extra:        []string{"hello", " world", "ab"}, // in the vocabulary, not reachable by merges
	}
	plain := mustLoad(t, s)
	runEncodeCases(t, plain, []encodeCase{
		{"merges only", "hello", []string{"he", "ll", "o"}},
		{"two bytes, no merge", "ab", []string{"a", "b"}},
	})
	s.ignoreMerges = true
	ignoring := mustLoad(t, s)
	runEncodeCases(t, ignoring, []encodeCase{
		{"whole word", "hello world", []string{"hello", " world"}},
		{"not whole", "hellos", []string{"he", "ll", "o", "s"}},
		{"two bytes whole", "ab", []string{"ab"}},
	})
}

func TestAddedTokens(t *testing.T) {
	tok := mustLoad(t, spec{
		normalizer: `{"type": "NFC"}`,
		merges:     [][2]string{{"h", "i"}},
		added: []addedTokenJSON{
			{Content: "<|im_start|>", Special: true},
			{Content: "<|im_end|>", Special: true},
			{Content: "<a>", Special: true},
			{Content: "<a><b>", Special: true}, // longer match wins
			{Content: "[L]", LStrip: true},
			{Content: "[R]", RStrip: true},
			{Content: "word", SingleWord: true},
			{Content: "é", Normalized: true}, // matched after NFC
			{Content: "e\u0301!"},            // raw match, before normalization
		},
	})
	runEncodeCases(t, tok, []encodeCase{
		{"chat", "<|im_start|>hi\n<|im_end|>", []string{"<|im_start|>", "hi", "\n", "<|im_end|>"}},
		{"adjacent", "<|im_end|><|im_end|>", []string{"<|im_end|>", "<|im_end|>"}},
		{"inside word", "x<|im_end|>y", []string{"x", "<|im_end|>", "y"}},
		{"partial is text", "<|im_end", []string{"<", "|", "i", "m", "_", "e", "n", "d"}},
		{"longest", "<a><b><a>", []string{"<a><b>", "<a>"}},
		{"lstrip takes the spaces before", "hi  [L]x", []string{"hi", "[L]", "x"}},
		{"lstrip alone", "[L] x", []string{"[L]", " ", "x"}},
		{"rstrip takes the spaces after", "x[R] \t hi", []string{"x", "[R]", "hi"}},
		{"single word alone", "a word b", []string{"a", " ", "word", " ", "b"}},
		{"single word inside", "swordfish", []string{"s", "w", "o", "r", "d", "f", "i", "s", "h"}},
		{"normalized token", "ae\u0301b", []string{"a", "é", "b"}},
		{"raw token first", "e\u0301!", []string{"e\u0301!"}},
	})
}

func TestNFC(t *testing.T) {
	tok := mustLoad(t, spec{normalizer: `{"type": "Sequence", "normalizers": [{"type": "NFC"}]}`,
		preTokenizer: qwen2PreTokenizer, merges: [][2]string{{"\xc3", "\xa9"}}})
	runEncodeCases(t, tok, []encodeCase{
		{"composed", "é", []string{"é"}},
		{"decomposed", "e\u0301", []string{"é"}},
	})
	if got := tok.Decode(tok.Encode("cafe\u0301")); got != "café" {
		t.Errorf("decode of encoded decomposed text = %q, want the composed form", got)
	}
}

func TestAddPrefixSpace(t *testing.T) {
	tok := mustLoad(t, spec{
		preTokenizer: `{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true}`,
		merges:       [][2]string{{" ", "h"}, {" h", "i"}},
		added:        []addedTokenJSON{{Content: "<s>", Special: true}},
	})
	runEncodeCases(t, tok, []encodeCase{
		{"first word", "hi", []string{" hi"}},
		{"already spaced", " hi", []string{" hi"}},
		{"after added token", "<s>hi", []string{"<s>", " hi"}},
	})
}

func TestDecodeRoundTrip(t *testing.T) {
	for name, pre := range map[string]string{"gpt2": gpt2PreTokenizer, "llama3": llama3PreTokenizer, "qwen2": qwen2PreTokenizer, "o200k": o200kPreTokenizer} {
		tok := mustLoad(t, spec{preTokenizer: pre, merges: [][2]string{{"t", "h"}, {"th", "e"}, {" ", "the"}, {"\xf0", "\x9f"}},
			added: []addedTokenJSON{{Content: "<|endoftext|>", Special: true}}})
		for _, s := range []string{
			"the theme of the thesis", "😀 emoji 🎉 mixed with ascii", "line\r\nbreaks\n\n\tand  spaces  ",
			"日本語のテキスト", "<|endoftext|>after", "x'S 12345 ٣٤٥", "",
		} {
			if got := tok.Decode(tok.Encode(s)); got != s {
				t.Errorf("%s: Decode(Encode(%q)) = %q", name, s, got)
			}
		}
	}
}

func TestDecode(t *testing.T) {
	tok := mustLoad(t, spec{added: []addedTokenJSON{
		{Content: "<|im_end|>", Special: true},
		{Content: "<think>\n"}, // holds a character outside the byte alphabet: decodes as itself
		{Content: "é!"},        // every character in the alphabet: decodes as the bytes they stand for
	}})
	id := func(s string) int32 {
		i, ok := tok.TokenID(s)
		if !ok {
			t.Fatalf("no token %q", s)
		}
		return i
	}
	cases := []struct {
		name string
		ids  []int32
		want string
	}{
		{"special", []int32{'a', id("<|im_end|>"), 'b'}, "a<|im_end|>b"},
		{"added with newline", []int32{id("<think>\n"), 'x'}, "<think>\nx"},
		{"added in alphabet", []int32{id("é!")}, "\ufffd!"}, // 0xE9 '!': as Hugging Face does
		{"emoji bytes", []int32{0xF0, 0x9F, 0x98, 0x80}, "😀"},
		{"truncated at end", []int32{'a', 0xE2, 0x82}, "a\ufffd"},
		{"truncated then ascii", []int32{0xF0, 0x9F, 'A'}, "\ufffdA"},
		{"overlong", []int32{0xC0, 0x80}, "\ufffd\ufffd"},
		{"surrogate", []int32{0xED, 0xA0, 0x80}, "\ufffd\ufffd\ufffd"},
		{"lone continuation", []int32{0x80, 'a'}, "\ufffda"},
		{"unknown ids skipped", []int32{'a', -1, 1 << 20, 'b'}, "ab"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := tok.Decode(c.ids); got != c.want {
				t.Errorf("Decode(%v) = %q, want %q", c.ids, got, c.want)
			}
		})
	}
}

func TestLookups(t *testing.T) {
	tok := mustLoad(t, spec{merges: [][2]string{{" ", "t"}}, added: []addedTokenJSON{
		{ID: 300, Content: "<|endoftext|>", Special: true},
		{ID: 257, Content: "<tool>"},
	}})
	if got := tok.VocabSize(); got != 301 {
		t.Errorf("VocabSize = %d, want 301", got)
	}
	if id, ok := tok.TokenID("Ġt"); !ok || id != 256 {
		t.Errorf(`TokenID("Ġt") = %d, %t; want 256, true`, id, ok)
	}
	if s, ok := tok.Token(256); !ok || s != "Ġt" {
		t.Errorf("Token(256) = %q, %t", s, ok)
	}
	if id, ok := tok.TokenID("<|endoftext|>"); !ok || id != 300 || !tok.IsSpecial(id) {
		t.Errorf("special token: id %d, %t, special %t", id, ok, tok.IsSpecial(id))
	}
	if id, _ := tok.TokenID("<tool>"); tok.IsSpecial(id) {
		t.Errorf("<tool> is not special")
	}
	if _, ok := tok.Token(299); ok {
		t.Errorf("Token(299) found a token in a gap of the id space")
	}
	if _, ok := tok.TokenID("nope"); ok {
		t.Errorf(`TokenID("nope") found a token`)
	}
	if tok.IsSpecial(-1) || tok.IsSpecial(1000) {
		t.Errorf("IsSpecial true out of range")
	}
}

func TestLoadRefuses(t *testing.T) {
	cases := []struct {
		name string
		s    spec
		want string
	}{
		{"normalizer", spec{normalizer: `{"type": "NFKC"}`}, `normalizer "NFKC"`},
		{"normalizer in sequence", spec{normalizer: `{"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Lowercase"}]}`}, `normalizer "Lowercase"`},
		{"pre-tokenizer", spec{preTokenizer: `{"type": "Whitespace"}`}, `pre-tokenizer "Whitespace"`},
		{"unknown pattern", spec{preTokenizer: `{"type": "Sequence", "pretokenizers": [
			{"type": "Split", "pattern": {"Regex": "\\s+"}, "behavior": "Isolated", "invert": false},
			{"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}]}`}, `pattern "\\s+"`},
		{"split behavior", spec{preTokenizer: `{"type": "Sequence", "pretokenizers": [
			{"type": "Split", "pattern": {"Regex": ` + jsonString(qwen2Regex) + `}, "behavior": "Removed", "invert": false},
			{"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}]}`}, `behavior "Removed"`},
		{"no byte level", spec{preTokenizer: `{"type": "Split", "pattern": {"Regex": ` + jsonString(qwen2Regex) + `}, "behavior": "Isolated"}`}, "lacks ByteLevel"},
		{"no pre-tokenizer", spec{preTokenizer: "null"}, "lacks ByteLevel"},
		{"model", spec{modelType: "WordPiece"}, `model type "WordPiece"`},
		{"dropout", spec{modelOverride: map[string]any{"dropout": 0.1}}, "dropout"},
		{"suffix", spec{modelOverride: map[string]any{"end_of_word_suffix": "</w>"}}, "end_of_word_suffix"},
		{"decoder", spec{decoder: `{"type": "Metaspace"}`}, `decoder "Metaspace"`},
		{"no decoder", spec{decoder: "null"}, "without a decoder"},
		{"merge out of vocabulary", spec{modelOverride: map[string]any{"merges": []string{"q z"}}}, "not in the vocabulary"},
		{"merge of three", spec{modelOverride: map[string]any{"merges": []string{"a b c"}}}, "not two tokens"},
		{"merge triple", spec{modelOverride: map[string]any{"merges": [][]string{{"a", "b", "c"}}}}, "not a pair"},
		{"huge id", spec{added: []addedTokenJSON{{ID: 1 << 30, Content: "<x>"}}}, "outside"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Load(c.s.json())
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "tokenizer: ") {
				t.Errorf("Load: error %v, want one starting %q and containing %q", err, "tokenizer: ", c.want)
			}
		})
	}
	if _, err := Load([]byte("{")); err == nil || !strings.HasPrefix(err.Error(), "tokenizer: ") {
		t.Errorf("Load of broken JSON: %v", err)
	}
}

// TestConcurrentEncode runs encodings in parallel, for the race detector and the shared cache.
func TestConcurrentEncode(t *testing.T) {
	tok := mustLoad(t, spec{preTokenizer: llama3PreTokenizer, merges: [][2]string{{"a", "b"}, {" ", "ab"}}})
	want := tok.Encode("ab ab abab")
	done := make(chan []int32)
	for range 8 {
		go func() {
			var last []int32
			for range 200 {
				last = tok.Encode("ab ab abab")
			}
			done <- last
		}()
	}
	for range 8 {
		if got := <-done; !slices.Equal(got, want) {
			t.Errorf("concurrent Encode = %v, want %v", got, want)
		}
	}
}
