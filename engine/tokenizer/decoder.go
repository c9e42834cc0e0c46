package tokenizer

import "unicode/utf8"

// Decoder turns a stream of ids into text incrementally: Add returns the text that is now complete,
// never half a UTF-8 character (bytes of an incomplete character are held until completed); Flush
// returns what is left (invalid bytes as U+FFFD, as HF's decode does).
//
// The texts returned by Add, then Flush, joined, equal Decode of all the ids. A Decoder is not safe
// for concurrent use; each stream has its own.
type Decoder struct {
	t       *Tokenizer
	pending []byte // bytes not yet returned: at most the start of one character
}

// NewDecoder returns a Decoder for a new stream.
func (t *Tokenizer) NewDecoder() *Decoder { return &Decoder{t: t} }

// Add takes the next id of the stream and returns the text it completes, possibly "". Bytes that
// can never form a character are returned as U+FFFD at once; a truncated character is held.
func (d *Decoder) Add(id int32) string {
	b := d.t.bytes(id)
	if len(d.pending) == 0 && utf8.Valid(b) {
		return string(b) // the common case: whole characters
	}
	d.pending = append(d.pending, b...)
	var out []byte
	i := 0
	for i < len(d.pending) {
		n, state := scanUTF8(d.pending[i:])
		switch state {
		case utf8Valid:
			out = append(out, d.pending[i:i+n]...)
		case utf8Invalid:
			out = utf8.AppendRune(out, utf8.RuneError)
		case utf8Truncated:
			// Keep the start of the character; it is the end of pending.
			d.pending = d.pending[:copy(d.pending, d.pending[i:])]
			return string(out)
		}
		i += n
	}
	d.pending = d.pending[:0]
	return string(out)
}

// Flush returns the held bytes, an unfinished character as U+FFFD, and empties the Decoder, which
// may then take a new stream.
func (d *Decoder) Flush() string {
	s := lossyString(d.pending)
	d.pending = d.pending[:0]
	return s
}
