package tokenizer

import "unicode/utf8"

// GPT-2's byte-level alphabet gives each of the 256 byte values a printable character, so that any
// byte string becomes a string of printable characters a vocabulary can hold: bytes that are
// printable Latin-1 ('!'..'~', '¡'..'¬', '®'..'ÿ') stand for themselves, the other 68 take the
// characters U+0100 onwards in byte order (so ' ' is 'Ġ' and '\n' is 'Ċ').
var (
	byteRunes [256]rune       // byte → its character
	runeBytes [256 + 68]int16 // character → its byte, -1 where the character is not in the alphabet
)

func init() {
	for i := range runeBytes {
		runeBytes[i] = -1
	}
	next := rune(256)
	for b := 0; b < 256; b++ {
		r := rune(b)
		if !(b >= '!' && b <= '~' || b >= 0xA1 && b <= 0xAC || b >= 0xAE && b <= 0xFF) {
			r = next
			next++
		}
		byteRunes[b] = r
		runeBytes[r] = int16(b)
	}
}

// byteLevelBytes returns the bytes a token's string form stands for under the byte-level decoder:
// each character mapped back to its byte when every character is in the alphabet, and otherwise
// the string's own UTF-8 bytes. Hugging Face's ByteLevel decoder makes the same choice per token,
// which is how added tokens such as "<|im_end|>" or ones holding a newline decode to themselves.
// ok reports whether every character was in the alphabet.
func byteLevelBytes(token string) (b []byte, ok bool) {
	b = make([]byte, 0, len(token))
	for _, r := range token {
		if r < 0 || int(r) >= len(runeBytes) || runeBytes[r] < 0 {
			return []byte(token), false
		}
		b = append(b, byte(runeBytes[r]))
	}
	return b, true
}

// byteLevelString returns the string form of raw bytes in the byte-level alphabet.
func byteLevelString(b string) string {
	r := make([]rune, len(b))
	for i := 0; i < len(b); i++ {
		r[i] = byteRunes[b[i]]
	}
	return string(r)
}

// utf8State says how a UTF-8 sequence read by scanUTF8 ended.
type utf8State uint8

const (
	utf8Valid     utf8State = iota // a whole, well-formed character
	utf8Invalid                    // ill-formed: the bytes read can never start a character
	utf8Truncated                  // the input ended inside a sequence that could still complete
)

// scanUTF8 reads the sequence at the start of b (len(b) > 0) and returns its length and state. For
// an ill-formed or truncated sequence the length is that of its maximal subpart, the unit that
// Rust's String::from_utf8_lossy (and so Hugging Face's decode) replaces with one U+FFFD; Go's
// utf8 package would instead replace byte by byte.
func scanUTF8(b []byte) (n int, state utf8State) {
	c := b[0]
	if c < utf8.RuneSelf {
		return 1, utf8Valid
	}
	var need int
	lo, hi := byte(0x80), byte(0xBF) // the range of the second byte; later bytes are 0x80..0xBF
	switch {
	case c >= 0xC2 && c <= 0xDF:
		need = 1
	case c == 0xE0:
		need, lo = 2, 0xA0 // no overlong forms
	case c == 0xED:
		need, hi = 2, 0x9F // no surrogates
	case c >= 0xE1 && c <= 0xEF:
		need = 2
	case c == 0xF0:
		need, lo = 3, 0x90 // no overlong forms
	case c == 0xF4:
		need, hi = 3, 0x8F // nothing above U+10FFFF
	case c >= 0xF1 && c <= 0xF3:
		need = 3
	default:
		return 1, utf8Invalid
	}
	for k := 1; k <= need; k++ {
		if k == len(b) {
			return k, utf8Truncated
		}
		if b[k] < lo || b[k] > hi {
			return k, utf8Invalid
		}
		lo, hi = 0x80, 0xBF
	}
	return need + 1, utf8Valid
}

// appendLossy appends b to dst as valid UTF-8, each maximal ill-formed subpart (truncated ones
// included) replaced by U+FFFD, as String::from_utf8_lossy does.
func appendLossy(dst, b []byte) []byte {
	for len(b) > 0 {
		n, state := scanUTF8(b)
		if state == utf8Valid {
			dst = append(dst, b[:n]...)
		} else {
			dst = utf8.AppendRune(dst, utf8.RuneError)
		}
		b = b[n:]
	}
	return dst
}

// lossyString returns b as a string the way appendLossy writes it.
func lossyString(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return string(appendLossy(make([]byte, 0, len(b)+8), b))
}
