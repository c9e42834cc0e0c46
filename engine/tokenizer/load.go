package tokenizer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// fileJSON is the part of a tokenizer.json that Load reads. post_processor is not read: it only
// adds special tokens when asked to (add_special_tokens=True), which Encode never does; truncation
// and padding are not read either, so Encode never shortens a text.
type fileJSON struct {
	AddedTokens  []addedTokenJSON `json:"added_tokens"`
	Normalizer   json.RawMessage  `json:"normalizer"`
	PreTokenizer json.RawMessage  `json:"pre_tokenizer"`
	Model        *modelJSON       `json:"model"`
	Decoder      json.RawMessage  `json:"decoder"`
}

type addedTokenJSON struct {
	ID         int32  `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

// componentJSON holds the fields of any normalizer, pre-tokenizer or decoder this package knows.
type componentJSON struct {
	Type          string            `json:"type"`
	Normalizers   []json.RawMessage `json:"normalizers"`   // Sequence normalizer
	PreTokenizers []json.RawMessage `json:"pretokenizers"` // Sequence pre-tokenizer

	AddPrefixSpace *bool `json:"add_prefix_space"` // ByteLevel
	UseRegex       *bool `json:"use_regex"`        // ByteLevel; absent means true

	Pattern *struct { // Split
		Regex  *string `json:"Regex"`
		String *string `json:"String"`
	} `json:"pattern"`
	Behavior string `json:"behavior"`
	Invert   bool   `json:"invert"`
}

type modelJSON struct {
	Type                    string           `json:"type"`
	Vocab                   map[string]int32 `json:"vocab"`
	Merges                  json.RawMessage  `json:"merges"` // see parseMerges
	Dropout                 *float64         `json:"dropout"`
	UnkToken                *string          `json:"unk_token"`
	ContinuingSubwordPrefix *string          `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string          `json:"end_of_word_suffix"`
	FuseUnk                 bool             `json:"fuse_unk"`
	ByteFallback            bool             `json:"byte_fallback"`
	IgnoreMerges            bool             `json:"ignore_merges"`
}

// parseMerges reads the merges, written "left right" (older files) or ["left", "right"]. The
// whole array is decoded as one Go type, picked by its first element, which is much faster than
// a custom unmarshaler per merge.
func parseMerges(raw json.RawMessage) ([][2]string, error) {
	body := bytes.TrimLeft(bytes.TrimPrefix(bytes.TrimSpace(raw), []byte("[")), " \t\r\n")
	if isNull(raw) || len(body) == 0 || body[0] == ']' {
		return nil, nil
	}
	if body[0] == '"' {
		var lines []string
		if err := json.Unmarshal(raw, &lines); err != nil {
			return nil, fmt.Errorf("tokenizer: reading merges: %w", err)
		}
		merges := make([][2]string, len(lines))
		for i, line := range lines {
			left, right, ok := strings.Cut(line, " ")
			if !ok || strings.Contains(right, " ") {
				return nil, fmt.Errorf("tokenizer: merge %d (%q) is not two tokens separated by a space", i, line)
			}
			merges[i] = [2]string{left, right}
		}
		return merges, nil
	}
	var pairs [][]string
	if err := json.Unmarshal(raw, &pairs); err != nil {
		return nil, fmt.Errorf("tokenizer: reading merges: %w", err)
	}
	merges := make([][2]string, len(pairs))
	for i, p := range pairs {
		if len(p) != 2 {
			return nil, fmt.Errorf("tokenizer: merge %d (%q) is not a pair", i, p)
		}
		merges[i] = [2]string{p[0], p[1]}
	}
	return merges, nil
}

// isNull reports whether a component is absent or JSON null.
func isNull(raw json.RawMessage) bool {
	return len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null"
}

// parseNormalizer returns whether the normalizer amounts to NFC; it refuses anything but none,
// NFC, and Sequences of those.
func parseNormalizer(raw json.RawMessage) (nfc bool, err error) {
	if isNull(raw) {
		return false, nil
	}
	var c componentJSON
	if err := json.Unmarshal(raw, &c); err != nil {
		return false, fmt.Errorf("tokenizer: reading normalizer: %w", err)
	}
	switch c.Type {
	case "NFC":
		return true, nil
	case "Sequence":
		for _, sub := range c.Normalizers {
			subNFC, err := parseNormalizer(sub)
			if err != nil {
				return false, err
			}
			nfc = nfc || subNFC // NFC is idempotent: once is as good as twice
		}
		return nfc, nil
	}
	return false, fmt.Errorf("tokenizer: normalizer %q is not supported (supported: NFC and Sequence)", c.Type)
}

// preStep is one pre-tokenizer of the pipeline: a Split by a known pattern, or ByteLevel.
type preStep struct {
	split          splitPattern // 0 for ByteLevel
	addPrefixSpace bool         // ByteLevel: put a space before a piece that lacks one
	useRegex       bool         // ByteLevel: split by gpt2Regex
}

// parsePreTokenizer flattens the pre-tokenizer into steps, refusing what this package cannot run.
func parsePreTokenizer(raw json.RawMessage, steps []preStep) ([]preStep, error) {
	if isNull(raw) {
		return steps, nil
	}
	var c componentJSON
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("tokenizer: reading pre_tokenizer: %w", err)
	}
	switch c.Type {
	case "Sequence":
		for _, sub := range c.PreTokenizers {
			var err error
			if steps, err = parsePreTokenizer(sub, steps); err != nil {
				return nil, err
			}
		}
		return steps, nil
	case "ByteLevel":
		if c.AddPrefixSpace == nil {
			return nil, fmt.Errorf("tokenizer: ByteLevel pre-tokenizer lacks add_prefix_space")
		}
		return append(steps, preStep{addPrefixSpace: *c.AddPrefixSpace, useRegex: c.UseRegex == nil || *c.UseRegex}), nil
	case "Split":
		if c.Pattern == nil || c.Pattern.Regex == nil {
			return nil, fmt.Errorf("tokenizer: Split pre-tokenizer without a Regex pattern is not supported")
		}
		p, ok := patternFor(*c.Pattern.Regex)
		if !ok {
			return nil, fmt.Errorf("tokenizer: Split pattern %q is not supported (known: the GPT-2, Llama 3, Qwen2 and o200k patterns)", *c.Pattern.Regex)
		}
		if c.Behavior != "Isolated" || c.Invert {
			return nil, fmt.Errorf("tokenizer: Split behavior %q with invert=%t is not supported (supported: Isolated, invert=false)", c.Behavior, c.Invert)
		}
		return append(steps, preStep{split: p}), nil
	}
	return nil, fmt.Errorf("tokenizer: pre-tokenizer %q is not supported (supported: ByteLevel, Split and Sequence)", c.Type)
}

// checkSteps requires exactly one ByteLevel step, the last: the BPE model sees byte-level pieces,
// and a Split after ByteLevel would test character classes on the mapped characters.
func checkSteps(steps []preStep) error {
	for i, st := range steps {
		if st.split == 0 && i != len(steps)-1 {
			return fmt.Errorf("tokenizer: a ByteLevel pre-tokenizer before another pre-tokenizer is not supported")
		}
	}
	if len(steps) == 0 || steps[len(steps)-1].split != 0 {
		return fmt.Errorf("tokenizer: pre-tokenizer lacks ByteLevel: only byte-level BPE is supported")
	}
	return nil
}

// checkDecoder accepts the ByteLevel decoder only.
func checkDecoder(raw json.RawMessage) error {
	if isNull(raw) {
		return fmt.Errorf("tokenizer: a tokenizer without a decoder is not supported (want ByteLevel)")
	}
	var c componentJSON
	if err := json.Unmarshal(raw, &c); err != nil {
		return fmt.Errorf("tokenizer: reading decoder: %w", err)
	}
	if c.Type != "ByteLevel" {
		return fmt.Errorf("tokenizer: decoder %q is not supported (supported: ByteLevel)", c.Type)
	}
	return nil
}

// checkModel refuses BPE options that byte-level tokenizers do not use and this package does not
// implement.
func checkModel(m *modelJSON) error {
	if m == nil {
		return fmt.Errorf("tokenizer: tokenizer.json has no model")
	}
	if m.Type != "BPE" && !(m.Type == "" && m.Merges != nil) { // old files leave the type out
		return fmt.Errorf("tokenizer: model type %q is not supported (supported: BPE)", m.Type)
	}
	if m.Dropout != nil && *m.Dropout != 0 {
		return fmt.Errorf("tokenizer: BPE dropout %g is not supported", *m.Dropout)
	}
	if m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "" {
		return fmt.Errorf("tokenizer: BPE continuing_subword_prefix %q is not supported", *m.ContinuingSubwordPrefix)
	}
	if m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "" {
		return fmt.Errorf("tokenizer: BPE end_of_word_suffix %q is not supported", *m.EndOfWordSuffix)
	}
	return nil
}

// buildModel makes the BPE model from the vocabulary and merges.
func buildModel(m *modelJSON) (*bpe, error) {
	merges, err := parseMerges(m.Merges)
	if err != nil {
		return nil, err
	}
	opts := bpeOptions{ignoreMerges: m.IgnoreMerges, fuseUnk: m.FuseUnk, byteFallback: m.ByteFallback}
	if m.UnkToken != nil {
		opts.unk = *m.UnkToken
	}
	return buildBPE(m.Vocab, merges, opts)
}

// bpeOptions are the BPE model's settings beyond its vocabulary and merges.
type bpeOptions struct {
	ignoreMerges, fuseUnk, byteFallback bool
	unk                                 string // "" for none
}

// buildBPE makes the BPE model from a vocabulary and its merges in rank order.
func buildBPE(vocab map[string]int32, merges [][2]string, opts bpeOptions) (*bpe, error) {
	model := &bpe{ignoreMerges: opts.ignoreMerges, unk: -1, fuseUnk: opts.fuseUnk, cache: newPieceCache()}
	for b := range model.byteIDs {
		id, ok := vocab[string(byteRunes[b])]
		if !ok && opts.byteFallback {
			id, ok = vocab[fmt.Sprintf("<0x%02X>", b)]
		}
		if !ok {
			id = -1
		}
		model.byteIDs[b] = id
	}
	if opts.unk != "" {
		// Hugging Face fails an encoding that needs an unk_token missing from the vocabulary;
		// here such bytes are dropped, as they are when there is no unk_token at all.
		if id, ok := vocab[opts.unk]; ok {
			model.unk = id
		}
	}
	model.merges = make(map[uint64]merge, len(merges))
	for rank, mg := range merges {
		left, okL := vocab[mg[0]]
		right, okR := vocab[mg[1]]
		id, okM := vocab[mg[0]+mg[1]]
		if !okL || !okR || !okM {
			return nil, fmt.Errorf("tokenizer: merge %d (%q %q) refers to a token not in the vocabulary", rank, mg[0], mg[1])
		}
		// A repeated pair takes its last rank, as Hugging Face's map of merges does.
		model.merges[pairKey(left, right)] = merge{rank: int32(rank), id: id}
	}
	if opts.ignoreMerges {
		model.words = make(map[string]int32, len(vocab))
		for tok, id := range vocab {
			if raw, ok := byteLevelBytes(tok); ok {
				model.words[string(raw)] = id
			}
		}
	}
	return model, nil
}
