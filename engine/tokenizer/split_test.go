package tokenizer

import (
	"slices"
	"testing"
)

func pieces(p splitPattern, s string) []string {
	var out []string
	for i := 0; i < len(s); {
		j := p.next(s, i)
		out = append(out, s[i:j])
		i = j
	}
	return out
}

type splitCase struct {
	name, in string
	want     []string
}

// Cases whose answer is the same under all three patterns.
var commonSplitCases = []splitCase{
	{"words", "Hello world", []string{"Hello", " world"}},
	{"two spaces", "a  b", []string{"a", " ", " b"}},
	{"space newline space", "a \n b", []string{"a", " \n", " b"}},
	{"trailing spaces", "end  ", []string{"end", "  "}},
	{"only spaces", "   ", []string{"   "}},
	{"three spaces before word", "a   b", []string{"a", "  ", " b"}},
	{"contraction", "you're", []string{"you", "'re"}},
	{"contraction ll", "we'll go", []string{"we", "'ll", " go"}},
	{"unicode letters", "héllo wörld ñ", []string{"héllo", " wörld", " ñ"}},
	{"greek and cjk", "αβγ 日本語", []string{"αβγ", " 日本語"}},
	{"emoji", "😀😀 ok", []string{"😀😀", " ok"}},
	{"empty-adjacent apostrophes", "''", []string{"''"}},
}

func TestSplitGPT2(t *testing.T) {
	cases := []splitCase{
		{"crlf", "x\r\ny", []string{"x", "\r", "\n", "y"}},
		{"tab before word", "a\t\tb", []string{"a", "\t", "\t", "b"}},
		{"nbsp before word", "a\u00a0b", []string{"a", "\u00a0", "b"}},
		{"contraction is case-sensitive", "I'M", []string{"I", "'", "M"}},
		{"contraction first", "'sam", []string{"'s", "am"}},
		{"digits stay together", "x 123456", []string{"x", " 123456"}},
		{"space before punctuation", "a ...", []string{"a", " ..."}},
		{"newline run before word", "a\n\nb", []string{"a", "\n", "\n", "b"}},
		{"space apostrophe", "a 's", []string{"a", " '", "s"}},
		{"letters then digits", "abc123def", []string{"abc", "123", "def"}},
		{"paren before word", "(hello", []string{"(", "hello"}},
		{"punctuation", "f(x) = y;", []string{"f", "(", "x", ")", " =", " y", ";"}},
		{"combining marks", "e\u0301t\u0301", []string{"e", "\u0301", "t", "\u0301"}},
	}
	for _, c := range append(slices.Clone(commonSplitCases), cases...) {
		t.Run(c.name, func(t *testing.T) {
			if got := pieces(patternGPT2, c.in); !slices.Equal(got, c.want) {
				t.Errorf("split %q = %s, want %s", c.in, quoteAll(got), quoteAll(c.want))
			}
		})
	}
}

// cl100kCases are the cases where Llama 3 and Qwen2 agree.
var cl100kCases = []splitCase{
	{"crlf", "x\r\ny", []string{"x", "\r\n", "y"}},
	{"newlines then spaces", "x\n\n  y", []string{"x", "\n\n", " ", " y"}},
	{"mixed whitespace with newline", "a  \t\n x", []string{"a", "  \t\n", " x"}},
	{"tab before word", "a\tb", []string{"a", "\tb"}},
	{"two tabs before word", "a\t\tb", []string{"a", "\t", "\tb"}},
	{"nbsp before word", "a\u00a0b", []string{"a", "\u00a0b"}},
	{"ideographic space before word", "a\u3000b", []string{"a", "\u3000b"}},
	{"contraction any case", "I'M HE'LL", []string{"I", "'M", " HE", "'LL"}},
	{"contraction mixed case", "x'Re", []string{"x", "'Re"}},
	{"contraction long s", "it'ſ", []string{"it", "'ſ"}},
	{"contraction first", "'sam", []string{"'s", "am"}},
	{"apostrophe before word", "'hello", []string{"'hello"}},
	{"paren before word", "(hello", []string{"(hello"}},
	{"emoji before word", "😀a", []string{"😀a"}},
	{"punctuation takes newlines", "x.\n\ny", []string{"x", ".\n\n", "y"}},
	{"space punctuation newline", "a ...\r\n", []string{"a", " ...\r\n"}},
	{"space before digit", "x 1", []string{"x", " ", "1"}},
	{"punctuation", "f(x) = y;", []string{"f", "(x", ")", " =", " y", ";"}},
	{"combining mark before letter", "e\u0301t\u0301", []string{"e", "\u0301t", "\u0301"}},
	{"newline before digits", "x\n1", []string{"x", "\n", "1"}},
	{"space apostrophe", "a 's", []string{"a", " '", "s"}},
	{"newline then trailing spaces", "a\n  ", []string{"a", "\n", "  "}},
	{"spaces then newline at end", "a  \n", []string{"a", "  \n"}},
	{"unicode space before digit", "a\u2003 1", []string{"a", "\u2003", " ", "1"}},
	{"vertical tab and form feed", "a\v\fb", []string{"a", "\v", "\fb"}},
	{"info separator is not space", "a\x1fb", []string{"a", "\x1fb"}},
}

func TestSplitLlama3(t *testing.T) {
	cases := []splitCase{
		{"digits by three", "12345", []string{"123", "45"}},
		{"letters then digits", "abc1234def", []string{"abc", "123", "4", "def"}},
		{"arabic-indic digits", "٣٤٥٦", []string{"٣٤٥", "٦"}},
		{"superscript digits are numbers", "x²³", []string{"x", "²³"}},
	}
	for _, c := range slices.Concat(commonSplitCases, cl100kCases, cases) {
		t.Run(c.name, func(t *testing.T) {
			if got := pieces(patternLlama3, c.in); !slices.Equal(got, c.want) {
				t.Errorf("split %q = %s, want %s", c.in, quoteAll(got), quoteAll(c.want))
			}
		})
	}
}

func TestSplitQwen2(t *testing.T) {
	cases := []splitCase{
		{"digits alone", "12345", []string{"1", "2", "3", "4", "5"}},
		{"letters then digits", "abc12def", []string{"abc", "1", "2", "def"}},
		{"arabic-indic digits", "٣٤", []string{"٣", "٤"}},
	}
	for _, c := range slices.Concat(commonSplitCases, cl100kCases, cases) {
		t.Run(c.name, func(t *testing.T) {
			if got := pieces(patternQwen2, c.in); !slices.Equal(got, c.want) {
				t.Errorf("split %q = %s, want %s", c.in, quoteAll(got), quoteAll(c.want))
			}
		})
	}
}

// FuzzSplitTiles checks on arbitrary bytes, invalid UTF-8 included, that every pattern's pieces
// are non-empty and tile the input.
func FuzzSplitTiles(f *testing.F) {
	f.Add("a \n b\r\n\t😀 'll 12345 \xff\xfe")
	f.Fuzz(func(t *testing.T, s string) {
		for _, p := range []splitPattern{patternGPT2, patternLlama3, patternQwen2, patternO200K} {
			for i := 0; i < len(s); {
				j := p.next(s, i)
				if j <= i || j > len(s) {
					t.Fatalf("pattern %d: next(%q, %d) = %d", p, s, i, j)
				}
				i = j
			}
		}
	})
}
