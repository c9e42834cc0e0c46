package tokenizer

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func decoderTestTokenizer(t testing.TB) *Tokenizer {
	return mustLoad(t, spec{
		merges: [][2]string{{"\xf0", "\x9f"}, {"\xf0\x9f", "\x98"}, {"\xe6", "\x97"}, {"h", "i"}},
		added:  []addedTokenJSON{{Content: "<|im_end|>", Special: true}, {Content: "é!"}},
	})
}

func TestDecoderAdd(t *testing.T) {
	tok := decoderTestTokenizer(t)
	id := func(raw string) int32 {
		i, ok := tok.TokenID(byteLevelString(raw))
		if !ok {
			t.Fatalf("no token for %q", raw)
		}
		return i
	}
	special, _ := tok.TokenID("<|im_end|>")
	cases := []struct {
		name string
		ids  []int32
		want []string // what each Add returns, then Flush
	}{
		{"ascii", []int32{'h', 'i'}, []string{"h", "i", ""}},
		{"emoji byte by byte", []int32{0xF0, 0x9F, 0x98, 0x80}, []string{"", "", "", "😀", ""}},
		{"emoji in two tokens", []int32{id("\xf0\x9f\x98"), 0x80, '!'}, []string{"", "😀", "!", ""}},
		{"character split after ascii", []int32{'a', 0xE6, 0x97, 0xA5}, []string{"a", "", "", "日", ""}},
		{"broken character then a new start", []int32{0xE6, id("\x97"), id("\xe6\x97")}, []string{"", "", "\ufffd", "\ufffd"}},
		{"invalid byte at once", []int32{0xFF, 'x'}, []string{"\ufffd", "x", ""}},
		{"truncated then ascii", []int32{0xF0, 0x9F, 'A'}, []string{"", "", "\ufffdA", ""}},
		{"truncated at the end", []int32{'a', 0xE2, 0x82}, []string{"a", "", "", "\ufffd"}},
		{"special token", []int32{0xF0, special}, []string{"", "\ufffd<|im_end|>", ""}},
		{"unknown id", []int32{-5}, []string{"", ""}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := tok.NewDecoder()
			var got []string
			for _, id := range c.ids {
				got = append(got, d.Add(id))
			}
			got = append(got, d.Flush())
			if !slices.Equal(got, c.want) {
				t.Errorf("Add each of %v, then Flush = %s, want %s", c.ids, quoteAll(got), quoteAll(c.want))
			}
			for i, s := range got[:len(got)-1] {
				if !utf8.ValidString(s) {
					t.Errorf("Add #%d returned invalid UTF-8 %q", i, s)
				}
			}
		})
	}
}

// TestDecoderMatchesDecode checks on random id streams, heavy in lone bytes, that the Add outputs
// and Flush join to Decode of the whole stream, and that each piece is valid UTF-8.
func TestDecoderMatchesDecode(t *testing.T) {
	tok := decoderTestTokenizer(t)
	rng := rand.New(rand.NewPCG(1, 2))
	// Bytes that start, continue or break characters, plus whole tokens.
	pool := []int32{'a', ' ', 0x80, 0x9F, 0xA5, 0xBF, 0xC0, 0xC3, 0xE0, 0xE6, 0xED, 0xF0, 0xF4, 0xF5, 0xFF}
	for id := int32(256); int(id) < tok.VocabSize(); id++ {
		pool = append(pool, id)
	}
	d := tok.NewDecoder()
	for n := range 3000 {
		ids := make([]int32, rng.IntN(12))
		for i := range ids {
			ids[i] = pool[rng.IntN(len(pool))]
		}
		var b strings.Builder
		for _, id := range ids {
			s := d.Add(id)
			if !utf8.ValidString(s) {
				t.Fatalf("stream %d %v: Add returned invalid UTF-8 %q", n, ids, s)
			}
			b.WriteString(s)
		}
		b.WriteString(d.Flush())
		if want := tok.Decode(ids); b.String() != want {
			t.Fatalf("stream %d %v: incremental %q, Decode %q", n, ids, b.String(), want)
		}
	}
}

// TestLossyMatchesRust checks appendLossy on the examples of the Unicode Standard's "U+FFFD
// substitution of maximal subparts" (Table 3-8), which Rust's from_utf8_lossy follows.
func TestLossyMatchesRust(t *testing.T) {
	in := "\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64"
	want := "a\ufffd\ufffd\ufffdb\ufffdc\ufffd\ufffdd"
	if got := lossyString([]byte(in)); got != want {
		t.Errorf("lossy(%q) = %q, want %q", in, got, want)
	}
}
