// Package tokenizer implements the byte-level BPE tokenizers of Hugging Face's tokenizer.json
// format, as GPT-2, Llama 3, Qwen2/Qwen3 and GPT-OSS (o200k) use: encoding text to token ids,
// decoding ids to text, and decoding a stream of ids incrementally for streamed responses.
//
// Encode and Decode give what Hugging Face tokenizers gives for encode(text,
// add_special_tokens=False).ids and decode(ids, skip_special_tokens=False). The pipeline is
// theirs: added tokens are cut out of the raw text first, the gaps are normalized (NFC), cut again
// at normalized added tokens, split by the pre-tokenizer's pattern, and each piece is merged by
// BPE. The patterns use a lookahead that Go's regexp lacks, so the known ones are implemented by
// hand (split.go) and any other pattern is refused when loading.
//
// Load reads a tokenizer.json; New builds the same Tokenizer from its parts (a Spec), as a GGUF
// file's metadata holds them.
package tokenizer

import (
	"encoding/json"
	"fmt"

	"golang.org/x/text/unicode/norm"
)

// Tokenizer encodes and decodes text for one model. It is safe for concurrent use: after Load its
// only changing state is a cache of piece encodings built for concurrent use (see pieceCache).
type Tokenizer struct {
	model *bpe
	nfc   bool      // the normalizer is NFC
	steps []preStep // the pre-tokenizers; the last is ByteLevel

	// Added tokens are found in the raw input (raw) or in normalized gaps (normalized).
	raw, normalized addedSet

	ids     map[string]int32 // string form → id: vocabulary, then added tokens over it
	forms   []string         // id → string form
	known   []bool           // id → whether a token has that id
	special []bool           // id → whether it is a special added token
	text    []byte           // every token's decoded bytes back to back
	textEnd []uint32         // id → end of its bytes in text; they start at textEnd[id-1]
}

// Load parses a tokenizer.json (HF tokenizers format). Supported: model type BPE with byte-level
// pre-tokenization, as GPT-2, Llama 3, Qwen2/Qwen3 and GPT-OSS tokenizers use. Anything else is
// refused with an error naming what is unsupported.
//
// In detail: normalizer none, NFC or a Sequence of those; pre-tokenizer ByteLevel (with or without
// its GPT-2 pattern, with or without add_prefix_space), optionally after Split pre-tokenizers
// using the GPT-2, Llama 3, Qwen2 or o200k pattern with behavior Isolated; decoder ByteLevel; BPE
// with merges as "a b" strings or pairs, ignore_merges, unk_token, fuse_unk and byte_fallback,
// without dropout or subword affixes. The post-processor, truncation and padding are ignored (see
// Encode).
func Load(tokenizerJSON []byte) (*Tokenizer, error) {
	var f fileJSON
	if err := json.Unmarshal(tokenizerJSON, &f); err != nil {
		return nil, fmt.Errorf("tokenizer: reading tokenizer.json: %w", err)
	}
	if err := checkModel(f.Model); err != nil {
		return nil, err
	}
	if err := checkDecoder(f.Decoder); err != nil {
		return nil, err
	}
	t := &Tokenizer{}
	var err error
	if t.nfc, err = parseNormalizer(f.Normalizer); err != nil {
		return nil, err
	}
	if t.steps, err = parsePreTokenizer(f.PreTokenizer, nil); err != nil {
		return nil, err
	}
	if err := checkSteps(t.steps); err != nil {
		return nil, err
	}
	if t.model, err = buildModel(f.Model); err != nil {
		return nil, err
	}
	if err := t.buildVocab(f.Model.Vocab, f.AddedTokens); err != nil {
		return nil, err
	}
	return t, nil
}

// maxID bounds token ids, so that a corrupt file cannot make Load allocate tables of billions of
// entries; the largest vocabularies in use hold a few hundred thousand tokens.
const maxID = 1<<24 - 1

// buildVocab fills the id tables and the added-token sets.
func (t *Tokenizer) buildVocab(vocab map[string]int32, added []addedTokenJSON) error {
	size := int32(0)
	t.ids = make(map[string]int32, len(vocab)+len(added))
	for s, id := range vocab {
		if id < 0 || id > maxID {
			return fmt.Errorf("tokenizer: vocabulary token %q has id %d, outside 0..%d", s, id, maxID)
		}
		t.ids[s] = id
		size = max(size, id+1)
	}
	for _, a := range added {
		if a.ID < 0 || a.ID > maxID {
			return fmt.Errorf("tokenizer: added token %q has id %d, outside 0..%d", a.Content, a.ID, maxID)
		}
		size = max(size, a.ID+1)
	}
	t.forms = make([]string, size)
	t.known = make([]bool, size)
	t.special = make([]bool, size)
	for s, id := range vocab {
		t.forms[id], t.known[id] = s, true
	}
	for _, a := range added {
		// Added tokens take precedence over the vocabulary in both directions, as in Hugging Face.
		t.ids[a.Content] = a.ID
		t.forms[a.ID], t.known[a.ID], t.special[a.ID] = a.Content, true, a.Special
		tok := addedToken{id: a.ID, content: a.Content, singleWord: a.SingleWord, lstrip: a.LStrip,
			rstrip: a.RStrip, normalized: a.Normalized, special: a.Special}
		if a.Normalized {
			t.normalized.add(tok, t.normalize(a.Content))
		} else {
			t.raw.add(tok, a.Content)
		}
	}
	t.textEnd = make([]uint32, size)
	for id, s := range t.forms {
		b, _ := byteLevelBytes(s)
		t.text = append(t.text, b...)
		t.textEnd[id] = uint32(len(t.text))
	}
	return nil
}

// normalize applies the normalizer.
func (t *Tokenizer) normalize(s string) string {
	if t.nfc && !norm.NFC.IsNormalString(s) {
		return norm.NFC.String(s)
	}
	return s
}

// Encode returns the token ids of text, equal to Hugging Face's encode(text,
// add_special_tokens=False).ids: added and special tokens written in text are matched as single
// tokens, and no beginning-of-text or other template token is added. Bytes of text that are not
// valid UTF-8 are encoded as the byte tokens they are.
func (t *Tokenizer) Encode(text string) []int32 {
	ids := make([]int32, 0, len(text)/3+1)
	var buf [8]span
	for _, sp := range t.raw.split(text, buf[:0]) {
		if sp.id >= 0 {
			ids = append(ids, sp.id)
			continue
		}
		gap := t.normalize(text[sp.start:sp.end])
		var buf2 [8]span
		for _, sp2 := range t.normalized.split(gap, buf2[:0]) {
			if sp2.id >= 0 {
				ids = append(ids, sp2.id)
				continue
			}
			ids = t.preTokenize(gap[sp2.start:sp2.end], t.steps, ids)
		}
	}
	return ids
}

// preTokenize appends the tokens of s (non-empty), which the pre-tokenizers steps split in turn.
// It goes depth first, so pieces are encoded in order without being collected.
func (t *Tokenizer) preTokenize(s string, steps []preStep, ids []int32) []int32 {
	st := &steps[0]
	if st.split != 0 {
		for i := 0; i < len(s); {
			j := st.split.next(s, i)
			ids = t.preTokenize(s[i:j], steps[1:], ids)
			i = j
		}
		return ids
	}
	// ByteLevel, the last step.
	if st.addPrefixSpace && s[0] != ' ' {
		s = " " + s
	}
	if !st.useRegex {
		return t.model.encode(s, ids)
	}
	for i := 0; i < len(s); {
		j := patternGPT2.next(s, i)
		ids = t.model.encode(s[i:j], ids)
		i = j
	}
	return ids
}

// Decode returns the text of ids, equal to Hugging Face's decode(ids, skip_special_tokens=False):
// the tokens' bytes joined, with each ill-formed UTF-8 sequence replaced by U+FFFD. Special tokens
// appear as their content. Ids that name no token are skipped.
func (t *Tokenizer) Decode(ids []int32) string {
	var b []byte
	for _, id := range ids {
		b = append(b, t.bytes(id)...)
	}
	return lossyString(b)
}

// bytes returns the decoded bytes of id, none for an unknown id. The slice aliases t.text.
func (t *Tokenizer) bytes(id int32) []byte {
	if id < 0 || int(id) >= len(t.known) || !t.known[id] {
		return nil
	}
	start := uint32(0)
	if id > 0 {
		start = t.textEnd[id-1]
	}
	return t.text[start:t.textEnd[id]]
}

// TokenBytes returns the bytes token id stands for (a byte-level token decoded; an added token's
// content), none for an id that names no token. The slice is shared: do not change it.
func (t *Tokenizer) TokenBytes(id int32) []byte { return t.bytes(id) }

// TokenID returns the id of the token whose string form is s: an added token's content, or a
// vocabulary entry in its byte-level form ("Ġthe" for " the").
func (t *Tokenizer) TokenID(s string) (int32, bool) {
	id, ok := t.ids[s]
	return id, ok
}

// Token returns the string form of id, as TokenID takes it.
func (t *Tokenizer) Token(id int32) (string, bool) {
	if id < 0 || int(id) >= len(t.known) || !t.known[id] {
		return "", false
	}
	return t.forms[id], true
}

// VocabSize returns the highest id over vocabulary and added tokens, plus one. Ids below it may
// be unused.
func (t *Tokenizer) VocabSize() int { return len(t.known) }

// IsSpecial reports whether id is an added token marked special (such as "<|im_end|>").
func (t *Tokenizer) IsSpecial(id int32) bool {
	return id >= 0 && int(id) < len(t.special) && t.special[id]
}
