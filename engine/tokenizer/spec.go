package tokenizer

import (
	"cmp"
	"fmt"
	"slices"
)

// Spec describes a byte-level BPE tokenizer by its parts rather than as a tokenizer.json: what a
// GGUF file's metadata holds (tokenizer.ggml.tokens, token_type, merges, pre). New builds a
// Tokenizer from one, and Tokenizer.Spec gives one back.
type Spec struct {
	// Tokens holds each id's string form: byte-level ("Ġthe" for " the") for vocabulary tokens,
	// the content for added tokens; "" where no token has the id.
	Tokens []string
	// Added lists the ids of Tokens that are cut out of the text whole before it is split (a
	// GGUF file's control and user-defined tokens); they are not part of the BPE vocabulary.
	Added []AddedToken
	// Merges are the BPE merges in rank order, each a pair of string forms.
	Merges [][2]string
	// Pre is how text is split into the pieces BPE merges within.
	Pre Pretokenizer
	// NFC normalizes text (outside added tokens) to Unicode NFC first, as Qwen2's tokenizer.json
	// asks.
	NFC bool
	// IgnoreMerges takes a piece found whole in the vocabulary as one token without merging, as
	// Llama 3's tokenizer.json asks.
	IgnoreMerges bool
}

// AddedToken is one added token of a Spec: matched in raw text as itself, neither normalized
// nor stripped of surrounding spaces.
type AddedToken struct {
	ID int32
	// Special marks a control token (such as "<|im_end|>"): IsSpecial reports it.
	Special bool
}

// Pretokenizer names a pre-tokenizer this package implements. The zero value is none.
type Pretokenizer uint8

const (
	// PreGPT2 splits by GPT-2's pattern (the ByteLevel pre-tokenizer's own, use_regex=true).
	PreGPT2 Pretokenizer = iota + 1
	// PreLlama3 splits by Llama 3's pattern (digits in runs of up to three).
	PreLlama3
	// PreQwen2 splits by Qwen2's pattern (Llama 3's with every digit alone), as Qwen2 and Qwen3 do.
	PreQwen2
	// PreO200K splits by OpenAI's o200k_base pattern (words cut at case changes), as GPT-OSS does.
	PreO200K
)

// String returns the pre-tokenizer's name.
func (p Pretokenizer) String() string {
	switch p {
	case PreGPT2:
		return "gpt2"
	case PreLlama3:
		return "llama3"
	case PreQwen2:
		return "qwen2"
	case PreO200K:
		return "o200k"
	}
	return fmt.Sprintf("Pretokenizer(%d)", uint8(p))
}

// steps returns the pre-tokenizer pipeline that tokenizer.json spells for p.
func (p Pretokenizer) steps() ([]preStep, bool) {
	switch p {
	case PreGPT2:
		return []preStep{{useRegex: true}}, true
	case PreLlama3:
		return []preStep{{split: patternLlama3}, {}}, true
	case PreQwen2:
		return []preStep{{split: patternQwen2}, {}}, true
	case PreO200K:
		return []preStep{{split: patternO200K}, {}}, true
	}
	return nil, false
}

// New builds a Tokenizer from its parts. The result encodes and decodes as Load's does for the
// tokenizer.json the Spec describes.
func New(s Spec) (*Tokenizer, error) {
	t := &Tokenizer{nfc: s.NFC}
	var ok bool
	if t.steps, ok = s.Pre.steps(); !ok {
		return nil, fmt.Errorf("tokenizer: no pre-tokenizer given (want gpt2, llama3 or qwen2)")
	}
	if len(s.Tokens) > maxID+1 {
		return nil, fmt.Errorf("tokenizer: %d tokens, more than the %d ids allowed", len(s.Tokens), maxID+1)
	}
	added := make(map[int32]bool, len(s.Added))
	addedJSON := make([]addedTokenJSON, 0, len(s.Added))
	for _, a := range s.Added {
		if a.ID < 0 || int(a.ID) >= len(s.Tokens) || s.Tokens[a.ID] == "" {
			return nil, fmt.Errorf("tokenizer: added token id %d names no token", a.ID)
		}
		if added[a.ID] {
			return nil, fmt.Errorf("tokenizer: added token %q (id %d) is listed twice", s.Tokens[a.ID], a.ID)
		}
		added[a.ID] = true
		addedJSON = append(addedJSON, addedTokenJSON{ID: a.ID, Content: s.Tokens[a.ID], Special: a.Special})
	}
	vocab := make(map[string]int32, len(s.Tokens))
	seen := make(map[string]int32, len(s.Tokens))
	for id, form := range s.Tokens {
		if form == "" {
			continue
		}
		if other, dup := seen[form]; dup {
			return nil, fmt.Errorf("tokenizer: token %q has two ids, %d and %d", form, other, id)
		}
		seen[form] = int32(id)
		if !added[int32(id)] {
			vocab[form] = int32(id)
		}
	}
	var err error
	if t.model, err = buildBPE(vocab, s.Merges, bpeOptions{ignoreMerges: s.IgnoreMerges}); err != nil {
		return nil, err
	}
	if err := t.buildVocab(vocab, addedJSON); err != nil {
		return nil, err
	}
	return t, nil
}

// Spec returns the tokenizer's parts, or an error naming what a Spec cannot express: added
// tokens that strip spaces, match single words only or change under normalization; an unknown
// token or byte fallback; a prefix space; a pre-tokenizer other than the three of Pretokenizer.
func (t *Tokenizer) Spec() (Spec, error) {
	s := Spec{Tokens: make([]string, len(t.forms)), NFC: t.nfc, IgnoreMerges: t.model.ignoreMerges}
	var ok bool
	if s.Pre, ok = pretokenizerOf(t.steps); !ok {
		return Spec{}, fmt.Errorf("tokenizer: its pre-tokenizer is not one of gpt2, llama3 or qwen2 with no prefix space")
	}
	for id, form := range t.forms {
		if t.known[id] {
			s.Tokens[id] = form
		}
	}
	for _, set := range []*addedSet{&t.raw, &t.normalized} {
		for _, a := range set.tokens {
			switch {
			case a.lstrip || a.rstrip || a.singleWord:
				return Spec{}, fmt.Errorf("tokenizer: added token %q strips spaces or matches single words only", a.content)
			case a.normalized && t.normalize(a.content) != a.content:
				return Spec{}, fmt.Errorf("tokenizer: added token %q changes under normalization", a.content)
			}
			s.Added = append(s.Added, AddedToken{ID: a.id, Special: a.special})
		}
	}
	slices.SortFunc(s.Added, func(a, b AddedToken) int { return cmp.Compare(a.ID, b.ID) })
	m := t.model
	if m.unk >= 0 {
		return Spec{}, fmt.Errorf("tokenizer: it has an unknown token")
	}
	for b, id := range m.byteIDs {
		if id >= 0 && t.forms[id] != string(byteRunes[b]) {
			return Spec{}, fmt.Errorf("tokenizer: byte %#x falls back to token %q", b, t.forms[id])
		}
	}
	type ranked struct {
		rank        int32
		left, right int32
	}
	merges := make([]ranked, 0, len(m.merges))
	for key, mg := range m.merges {
		merges = append(merges, ranked{mg.rank, int32(key >> 32), int32(uint32(key))})
	}
	slices.SortFunc(merges, func(a, b ranked) int { return cmp.Compare(a.rank, b.rank) })
	s.Merges = make([][2]string, len(merges))
	for i, mg := range merges {
		s.Merges[i] = [2]string{t.forms[mg.left], t.forms[mg.right]}
	}
	return s, nil
}

// pretokenizerOf recognises the pipelines New makes (and the equivalent Split by GPT-2's pattern
// before a ByteLevel without its own).
func pretokenizerOf(steps []preStep) (Pretokenizer, bool) {
	switch {
	case len(steps) == 1 && steps[0].useRegex && !steps[0].addPrefixSpace:
		return PreGPT2, true
	case len(steps) != 2 || steps[1].useRegex || steps[1].addPrefixSpace:
		return 0, false
	}
	switch steps[0].split {
	case patternGPT2:
		return PreGPT2, true
	case patternLlama3:
		return PreLlama3, true
	case patternQwen2:
		return PreQwen2, true
	case patternO200K:
		return PreO200K, true
	}
	return 0, false
}
