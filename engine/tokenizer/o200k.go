package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// o200k_base (o200kRegex) splits words where their case changes: its first two alternatives are
// a word of upper-case letters then lower-case ones, U*L+ and U+L*, each with an optional leading
// character that is no line break, letter or number, and an optional contraction after. U holds
// Lu, Lt, Lm, Lo and marks (M), L holds Ll, Lm, Lo and marks: modifier and other letters and
// marks are in both. The rest is cl100k's (numbers by three, other runs, white space), with '/'
// among the breaks an other run takes after it.

// caseAt returns whether the character at s[i] is in o200k's upper set U and its lower set L,
// and its width; a character in neither is no letter or mark.
func caseAt(s string, i int) (upper, lower bool, n int) {
	if b := s[i]; b < utf8.RuneSelf {
		return b >= 'A' && b <= 'Z', b >= 'a' && b <= 'z', 1
	}
	r, n := utf8.DecodeRuneInString(s[i:])
	switch {
	case unicode.In(r, unicode.Lm, unicode.Lo, unicode.M):
		return true, true, n
	case unicode.In(r, unicode.Lu, unicode.Lt):
		return true, false, n
	case unicode.Is(unicode.Ll, r):
		return false, true, n
	}
	return false, false, n
}

// caseWord returns the end of U*L+ (upperFirst false) or U+L* (upperFirst true) from s[j], as
// a backtracking matcher takes it: the greedy U* gives back characters until L+ can start (which
// only a character in both sets allows), then L+ runs greedily; -1 when there is no match.
func caseWord(s string, j int, upperFirst bool) int {
	// The run of U from j, and where each of its characters ends (a long run grows the buffer).
	var starts [64]int
	ends := starts[:0]
	k := j
	for k < len(s) {
		u, _, n := caseAt(s, k)
		if !u {
			break
		}
		k += n
		ends = append(ends, k)
	}
	lowerRun := func(at int) int {
		for at < len(s) {
			_, l, n := caseAt(s, at)
			if !l {
				break
			}
			at += n
		}
		return at
	}
	if upperFirst {
		if k == j {
			return -1
		}
		return lowerRun(k) // L* after the whole U run: U+ never needs to give back
	}
	// U* L+: try the U run at its longest, then shorter, until a lower character follows.
	for m := len(ends); m >= 0; m-- {
		at := j
		if m > 0 {
			at = ends[m-1]
		}
		if end := lowerRun(at); end > at {
			return end
		}
	}
	return -1
}

// withContraction extends a word ending at end by the contraction after it, if any.
func withContraction(s string, end int) int {
	if end < len(s) && s[end] == '\'' {
		if n := contraction(s, end+1, true); n > 0 {
			return end + 1 + n
		}
	}
	return end
}

// nextO200K implements o200kRegex.
func nextO200K(s string, i int) int {
	b := s[i]
	c, n := classAt(s, i)
	// The optional leading character: no line break, letter or number (a space, a mark, …).
	prefix := b != '\r' && b != '\n' && c != classLetter && c != classNumber
	for _, upperFirst := range []bool{false, true} {
		if prefix {
			if end := caseWord(s, i+n, upperFirst); end >= 0 {
				return withContraction(s, end)
			}
		}
		if end := caseWord(s, i, upperFirst); end >= 0 {
			return withContraction(s, end)
		}
	}
	// `\p{N}{1,3}`.
	if c == classNumber {
		return run(s, i, classNumber, 3)
	}
	// ` ?[^\s\p{L}\p{N}]+[\r\n/]*`: a run of other characters, with one leading space, taking
	// the line breaks and slashes that follow it.
	start := -1
	if b == ' ' && classIs(s, i+1, classOther) {
		start = i + 1
	} else if c == classOther {
		start = i
	}
	if start >= 0 {
		end := run(s, start, classOther, -1)
		for end < len(s) && (s[end] == '\r' || s[end] == '\n' || s[end] == '/') {
			end++
		}
		return end
	}
	// Whitespace, as cl100k's.
	end := run(s, i, classSpace, -1)
	for k := end - 1; k >= i; k-- {
		if s[k] == '\r' || s[k] == '\n' {
			return k + 1
		}
	}
	return whitespaceEnd(s, i, end)
}
