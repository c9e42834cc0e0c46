package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// The pre-tokenizer regular expressions this package implements. Hugging Face runs them with
// Oniguruma, leftmost-first alternation with backtracking; `\s+(?!\S)` needs a lookahead, which
// Go's regexp (RE2) lacks, so each is written out by hand in splitPattern.next.
const (
	// gpt2Regex is the ByteLevel pre-tokenizer's own pattern (use_regex=true), from GPT-2.
	gpt2Regex = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
	// llama3Regex is Llama 3's Split pattern (OpenAI's cl100k_base): digits in runs of up to three.
	llama3Regex = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// qwen2Regex is Qwen2's and Qwen3's Split pattern: Llama 3's with every digit alone.
	qwen2Regex = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// o200kRegex is OpenAI's o200k_base pattern, GPT-OSS's (openai/gpt-oss-20b's Split): words
	// split at case changes (an upper-case run, then lower case), each with its contraction.
	o200kRegex = `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

// splitPattern is one of the known pre-tokenizer patterns.
type splitPattern uint8

const (
	patternGPT2 splitPattern = iota + 1
	patternLlama3
	patternQwen2
	patternO200K
)

// patternFor recognises a pattern by its exact text.
func patternFor(regex string) (splitPattern, bool) {
	switch regex {
	case gpt2Regex:
		return patternGPT2, true
	case llama3Regex:
		return patternLlama3, true
	case qwen2Regex:
		return patternQwen2, true
	case o200kRegex:
		return patternO200K, true
	}
	return 0, false
}

// next returns the end of the match that starts at s[i], for i < len(s). Each pattern matches at
// every character (the last alternatives take any whitespace, letter, number or other run), so
// the matches tile s and the Split behaviour "Isolated" is simply the sequence of matches.
func (p splitPattern) next(s string, i int) int {
	switch p {
	case patternGPT2:
		return nextGPT2(s, i)
	case patternO200K:
		return nextO200K(s, i)
	}
	maxDigits := 3
	if p == patternQwen2 {
		maxDigits = 1
	}
	return nextCL100K(s, i, maxDigits)
}

// charClass partitions characters the way the patterns test them.
type charClass uint8

const (
	classOther  charClass = iota // [^\s\p{L}\p{N}]
	classLetter                  // \p{L}
	classNumber                  // \p{N}: Nd, Nl and No
	classSpace                   // \s: Unicode White_Space, as Oniguruma and Rust's regex define it
)

var asciiClass = func() (c [utf8.RuneSelf]charClass) {
	for b := range c {
		switch {
		case b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z':
			c[b] = classLetter
		case b >= '0' && b <= '9':
			c[b] = classNumber
		case b == ' ' || b >= '\t' && b <= '\r': // \t \n \v \f \r; not 0x1C..0x1F
			c[b] = classSpace
		}
	}
	return c
}()

// classAt returns the class and width of the character at s[i]. A byte that does not start valid
// UTF-8 counts as one character of class other (Hugging Face never sees one: its input is a
// Rust string).
func classAt(s string, i int) (charClass, int) {
	if b := s[i]; b < utf8.RuneSelf {
		return asciiClass[b], 1
	}
	r, n := utf8.DecodeRuneInString(s[i:])
	switch {
	case unicode.IsLetter(r):
		return classLetter, n
	case unicode.IsNumber(r):
		return classNumber, n
	case unicode.Is(unicode.White_Space, r):
		return classSpace, n
	}
	return classOther, n
}

// classIs reports whether s[i] exists and is of class c.
func classIs(s string, i int, c charClass) bool {
	if i >= len(s) {
		return false
	}
	got, _ := classAt(s, i)
	return got == c
}

// run returns the end of the run of class-c characters starting at s[i], at most max characters
// long (max < 0: unbounded).
func run(s string, i int, c charClass, max int) int {
	for ; i < len(s) && max != 0; max-- {
		got, n := classAt(s, i)
		if got != c {
			break
		}
		i += n
	}
	return i
}

// contraction returns the length of the contraction suffix ('s 't 're 've 'm 'll 'd) that follows
// an apostrophe at s[i-1], or 0. With fold, letters match either case, and 's' also matches 'ſ'
// (U+017F), which Unicode case folding maps to 's'.
func contraction(s string, i int, fold bool) int {
	at := func(k int, want byte) int { // width of s[k] if it matches want, else 0
		if k >= len(s) {
			return 0
		}
		c := s[k]
		if c == want || fold && c == want-'a'+'A' {
			return 1
		}
		if fold && want == 's' && k+1 < len(s) && c == 0xC5 && s[k+1] == 0xBF {
			return 2
		}
		return 0
	}
	for _, one := range [...]byte{'s', 't', 'm', 'd'} {
		if n := at(i, one); n > 0 {
			return n
		}
	}
	for _, two := range [...]string{"re", "ve", "ll"} {
		if n := at(i, two[0]); n > 0 {
			if m := at(i+n, two[1]); m > 0 {
				return n + m
			}
		}
	}
	return 0
}

// whitespaceEnd finishes a match that starts at s[i] inside the whitespace run s[i:end] once
// every alternative before `\s+(?!\S)|\s+` has failed: before a non-space the greedy `\s+`
// backtracks one character so the lookahead holds, leaving the last whitespace character to
// start the next piece (" word", "\tword"); a run of one character, or one that reaches the end,
// is taken whole.
func whitespaceEnd(s string, i, end int) int {
	if end == len(s) {
		return end
	}
	_, last := utf8.DecodeLastRuneInString(s[i:end])
	if end-last > i {
		return end - last
	}
	return end
}

// nextGPT2 implements gpt2Regex.
func nextGPT2(s string, i int) int {
	b := s[i]
	if b == '\'' {
		if n := contraction(s, i+1, false); n > 0 {
			return i + 1 + n
		}
	}
	// ` ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+`: a space joins the run that follows it.
	if b == ' ' && i+1 < len(s) {
		if c, _ := classAt(s, i+1); c != classSpace {
			return run(s, i+1, c, -1)
		}
	}
	c, _ := classAt(s, i)
	end := run(s, i, c, -1)
	if c != classSpace {
		return end
	}
	return whitespaceEnd(s, i, end)
}

// nextCL100K implements llama3Regex (maxDigits 3) and qwen2Regex (maxDigits 1).
func nextCL100K(s string, i int, maxDigits int) int {
	b := s[i]
	if b == '\'' {
		if n := contraction(s, i+1, true); n > 0 {
			return i + 1 + n
		}
	}
	c, n := classAt(s, i)
	// `[^\r\n\p{L}\p{N}]?\p{L}+`: a letter run, with one leading character that is neither a
	// line break, a letter nor a number (" word", "(word", "\u00a0word").
	if c == classLetter {
		return run(s, i, classLetter, -1)
	}
	if c != classNumber && b != '\r' && b != '\n' && classIs(s, i+n, classLetter) {
		return run(s, i+n, classLetter, -1)
	}
	// `\p{N}{1,3}` or `\p{N}`.
	if c == classNumber {
		return run(s, i, classNumber, maxDigits)
	}
	// ` ?[^\s\p{L}\p{N}]+[\r\n]*`: a run of other characters, with one leading space, taking
	// the line breaks that follow it.
	start := -1
	if b == ' ' && classIs(s, i+1, classOther) {
		start = i + 1
	} else if c == classOther {
		start = i
	}
	if start >= 0 {
		end := run(s, start, classOther, -1)
		for end < len(s) && (s[end] == '\r' || s[end] == '\n') {
			end++
		}
		return end
	}
	// Whitespace. `\s*[\r\n]+`: when the run holds a line break, the match ends just after the
	// last one (the greedy `\s*` backtracks from the run's end to it).
	end := run(s, i, classSpace, -1)
	for k := end - 1; k >= i; k-- {
		if s[k] == '\r' || s[k] == '\n' {
			return k + 1
		}
	}
	return whitespaceEnd(s, i, end)
}
