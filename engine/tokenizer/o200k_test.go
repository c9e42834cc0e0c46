package tokenizer

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// o200kCases are o200k_base splits, each as Python's regex module (backtracking, leftmost-first,
// as Oniguruma) splits by o200kRegex; TestSplitO200KWithPython checks them against it.
var o200kCases = []splitCase{
	{"words", "Hello world", []string{"Hello", " world"}},
	{"two spaces", "a  b", []string{"a", " ", " b"}},
	{"space newline space", "a \n b", []string{"a", " \n", " b"}},
	{"trailing spaces", "end  ", []string{"end", "  "}},
	{"contraction joins its word", "you're", []string{"you're"}},
	{"contraction ll joins", "we'll go", []string{"we'll", " go"}},
	{"unicode letters", "héllo wörld ñ", []string{"héllo", " wörld", " ñ"}},
	{"greek and cjk", "αβγ 日本語", []string{"αβγ", " 日本語"}},
	{"emoji", "😀😀 ok", []string{"😀😀", " ok"}},
	{"apostrophes", "''", []string{"''"}},
	{"case change", "HelloWorld", []string{"Hello", "World"}},
	{"an upper run before a word", "XMLHttpRequest", []string{"XMLHttp", "Request"}},
	{"lower then upper", "iPhone", []string{"i", "Phone"}},
	{"upper word, then lower", "ÉCOLE été", []string{"ÉCOLE", " été"}},
	{"upper-case contraction", "don't STOP'S", []string{"don't", " STOP'S"}},
	{"newline run", "a  b\n\n c", []string{"a", " ", " b", "\n\n", " c"}},
	{"slashes go with breaks", "path/to//x\n", []string{"path", "/to", "//", "x", "\n"}},
	{"other runs and digits by three", " (hello) 12345", []string{" (", "hello", ")", " ", "123", "45"}},
	{"camel case", "camelCaseJSONParser", []string{"camel", "Case", "JSONParser"}},
	{"upper run then lower", "ABCdef", []string{"ABCdef"}},
	{"greek case change", "Δελτα ΑΛΦΑβ", []string{"Δελτα", " ΑΛΦΑβ"}},
	{"titlecase letter", "ǅungla", []string{"ǅungla"}},
	{"combining mark in a word", "x\u0301y", []string{"x\u0301y"}},
	{"leading combining mark", "\u0301abc", []string{"\u0301abc"}},
	{"tab before word", "a\tb", []string{"a", "\tb"}},
	{"superscript digits", "x²³", []string{"x", "²³"}},
	{"space apostrophe", "a 's", []string{"a", " '", "s"}},
	{"upper-case contraction ll", "I'LL go", []string{"I'LL", " go"}},
	{"slash then newlines", "ab/\n\ncd", []string{"ab", "/\n\n", "cd"}},
	{"space slash", " /x", []string{" /", "x"}},
	{"letters and digits", "A1b2C3", []string{"A", "1", "b", "2", "C", "3"}},
	{"modifier letter", "ʰello", []string{"ʰello"}},
	{"crlf", "x\r\ny", []string{"x", "\r\n", "y"}},
	{"leading contraction", "'sam", []string{"'sam"}},
	{"marks after letters", "e\u0301t\u0301", []string{"e\u0301t\u0301"}},
}

func TestSplitO200K(t *testing.T) {
	for _, c := range o200kCases {
		t.Run(c.name, func(t *testing.T) {
			if got := pieces(patternO200K, c.in); !slices.Equal(got, c.want) {
				t.Errorf("split %q = %s, want %s", c.in, quoteAll(got), quoteAll(c.want))
			}
		})
	}
}

// TestSplitO200KWithPython splits the table's inputs and a thousand random strings (letters of
// each case, marks, digits, spaces, breaks, slashes, apostrophes and punctuation) with Python's
// regex module by o200kRegex, and demands the same pieces. It runs with TFD_CHECK_WITH_PYTHON=1.
func TestSplitO200KWithPython(t *testing.T) {
	if os.Getenv("TFD_CHECK_WITH_PYTHON") == "" {
		t.Skip("set TFD_CHECK_WITH_PYTHON=1 to compare the o200k split with Python's regex module")
	}
	var inputs []string
	for _, c := range o200kCases {
		inputs = append(inputs, c.in)
	}
	alphabet := []string{"a", "z", "A", "Z", "é", "É", "ǅ", "ʰ", "日", "\u0301", "ß", "Σ", "σ", "1", "٣", "²",
		" ", "  ", "\t", "\n", "\r", "\u00a0", "/", "'", "'s", "'LL", "(", ".", "😀", "-"}
	rng := rand.New(rand.NewPCG(7, 200))
	for range 1000 {
		var b strings.Builder
		for range 1 + rng.IntN(12) {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		inputs = append(inputs, b.String())
	}
	data, err := json.Marshal(inputs)
	if err != nil {
		t.Fatal(err)
	}
	script := "import json, sys, regex\nPAT = " + pyString(o200kRegex) +
		"\nprint(json.dumps([regex.findall(PAT, s) for s in json.load(sys.stdin)]))\n"
	cmd := exec.Command("python3", "-c", script)
	cmd.Stdin = strings.NewReader(string(data))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python3 with the regex module: %v", err)
	}
	var want [][]string
	if err := json.Unmarshal(out, &want); err != nil {
		t.Fatal(err)
	}
	for i, in := range inputs {
		if got := pieces(patternO200K, in); !slices.Equal(got, want[i]) {
			t.Errorf("split %q = %s, Python %s", in, quoteAll(got), quoteAll(want[i]))
		}
	}
}

// pyString writes s as a Python string literal (JSON's escapes are Python's).
func pyString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
