package tokenizer

import (
	"encoding/json"
	"strings"
	"testing"
)

// Pre-tokenizer configurations as the families write them.
var (
	gpt2PreTokenizer   = `{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}`
	llama3PreTokenizer = `{"type": "Sequence", "pretokenizers": [
		{"type": "Split", "pattern": {"Regex": ` + jsonString(llama3Regex) + `}, "behavior": "Isolated", "invert": false},
		{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}]}`
	qwen2PreTokenizer = `{"type": "Sequence", "pretokenizers": [
		{"type": "Split", "pattern": {"Regex": ` + jsonString(qwen2Regex) + `}, "behavior": "Isolated", "invert": false},
		{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}]}`
	// o200kPreTokenizer is openai/gpt-oss-20b's.
	o200kPreTokenizer = `{"type": "Sequence", "pretokenizers": [
		{"type": "Split", "pattern": {"Regex": ` + jsonString(o200kRegex) + `}, "behavior": "Isolated", "invert": false},
		{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}]}`
)

func jsonString(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// spec describes a small tokenizer.json: the 256 byte tokens (id = byte value), then the result of
// each merge in order, then extra vocabulary entries, then the added tokens. Merges and extra
// entries are written as raw text and mapped to the byte-level alphabet here.
type spec struct {
	normalizer    string // JSON; "" for null
	preTokenizer  string // JSON; "" for gpt2PreTokenizer
	decoder       string // JSON; "" for ByteLevel
	merges        [][2]string
	mergeStrings  bool // write merges as "a b" rather than pairs
	extra         []string
	added         []addedTokenJSON // IDs are assigned after the vocabulary when 0
	ignoreMerges  bool
	modelType     string // "" for BPE
	modelOverride map[string]any
}

func (s spec) json() []byte {
	vocab := map[string]int{}
	order := 0
	addToken := func(raw string) {
		tok := byteLevelString(raw)
		if _, ok := vocab[tok]; !ok {
			vocab[tok] = order
			order++
		}
	}
	for b := 0; b < 256; b++ {
		addToken(string([]byte{byte(b)}))
	}
	var merges []any
	for _, m := range s.merges {
		addToken(m[0] + m[1])
		l, r := byteLevelString(m[0]), byteLevelString(m[1])
		if s.mergeStrings {
			merges = append(merges, l+" "+r)
		} else {
			merges = append(merges, []string{l, r})
		}
	}
	for _, e := range s.extra {
		addToken(e)
	}
	added := append([]addedTokenJSON(nil), s.added...)
	for i := range added {
		if added[i].ID == 0 {
			added[i].ID = int32(order)
			order++
		}
	}
	modelType := s.modelType
	if modelType == "" {
		modelType = "BPE"
	}
	model := map[string]any{"type": modelType, "dropout": nil, "unk_token": nil,
		"continuing_subword_prefix": nil, "end_of_word_suffix": nil, "fuse_unk": false,
		"byte_fallback": false, "ignore_merges": s.ignoreMerges, "vocab": vocab, "merges": merges}
	for k, v := range s.modelOverride {
		model[k] = v
	}
	doc := map[string]any{
		"version":        "1.0",
		"truncation":     nil,
		"padding":        nil,
		"added_tokens":   added,
		"normalizer":     raw(s.normalizer, "null"),
		"pre_tokenizer":  raw(s.preTokenizer, gpt2PreTokenizer),
		"post_processor": nil,
		"decoder":        raw(s.decoder, `{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true}`),
		"model":          model,
	}
	b, err := json.Marshal(doc)
	if err != nil {
		panic(err)
	}
	return b
}

func raw(s, def string) json.RawMessage {
	if s == "" {
		s = def
	}
	return json.RawMessage(s)
}

func (a addedTokenJSON) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]any{"id": a.ID, "content": a.Content, "single_word": a.SingleWord,
		"lstrip": a.LStrip, "rstrip": a.RStrip, "normalized": a.Normalized, "special": a.Special})
}

func mustLoad(t testing.TB, s spec) *Tokenizer {
	t.Helper()
	tok, err := Load(s.json())
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return tok
}

// tokens returns ids as text for readable failures: an added token's content, a vocabulary
// token's raw bytes.
func tokens(t testing.TB, tok *Tokenizer, ids []int32) []string {
	t.Helper()
	added := map[int32]string{}
	for _, set := range []*addedSet{&tok.raw, &tok.normalized} {
		for _, a := range set.tokens {
			added[a.id] = a.content
		}
	}
	out := make([]string, len(ids))
	for i, id := range ids {
		if s, ok := added[id]; ok {
			out[i] = s
		} else {
			out[i] = string(tok.bytes(id))
		}
	}
	return out
}

func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = jsonString(s)
	}
	return "[" + strings.Join(q, " ") + "]"
}
