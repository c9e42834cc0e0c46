package engine

import (
	"maps"
	"slices"
	"strings"

	"tfd/engine/chattemplate"
	"tfd/engine/tokenizer"
)

// The GGUF token types (llama.h, enum llama_token_type): how convert_hf_to_gguf.py marks each id.
const (
	ggufTokenNormal      = 1
	ggufTokenUnknown     = 2
	ggufTokenControl     = 3 // a special added token
	ggufTokenUserDefined = 4 // an added token that is not special
	ggufTokenUnused      = 5 // an id the tokenizer leaves empty, filled with "[PAD<id>]"
	ggufTokenByte        = 6
)

// ggufPre is how tfd splits text for one value of tokenizer.ggml.pre.
type ggufPre struct {
	pre tokenizer.Pretokenizer
	// nfc restores the NFC normalizer of the family's tokenizer.json, which GGUF does not record
	// (llama.cpp normalizes nothing; the two differ only on text not already in NFC).
	nfc bool
	// ignoreMerges is Llama 3's: llama.cpp sets it for these names too.
	ignoreMerges bool
}

// ggufPretokenizers maps the tokenizer.ggml.pre values of the families tfd runs to the patterns
// llama-vocab.cpp gives them.
var ggufPretokenizers = map[string]ggufPre{
	"gpt-2":            {pre: tokenizer.PreGPT2},
	"llama3":           {pre: tokenizer.PreLlama3, ignoreMerges: true},
	"llama-v3":         {pre: tokenizer.PreLlama3, ignoreMerges: true},
	"llama-bpe":        {pre: tokenizer.PreLlama3, ignoreMerges: true},
	"qwen2":            {pre: tokenizer.PreQwen2, nfc: true},
	"deepseek-r1-qwen": {pre: tokenizer.PreQwen2, nfc: true},
	// GPT-OSS's o200k_harmony. llama.cpp splits it by its approximation of o200k's pattern; tfd by
	// the pattern itself, as it splits the folder's tokenizer.json.
	"gpt-4o": {pre: tokenizer.PreO200K},
}

// ggufEndTexts are the texts of tokens llama.cpp ends generation at whatever the ids the metadata
// names (llama-vocab.cpp's end-of-generation list, for the families tfd runs): a GGUF file names
// one eos id where generation_config.json lists several.
var ggufEndTexts = []string{"<|eot_id|>", "<|eom_id|>", "<|im_end|>", "<|endoftext|>", "<|end_of_text|>", "</s>",
	"<|return|>", "<|call|>"} // the last two GPT-OSS's (o200k_harmony), whose <|end|> ends a message, not the reply

// metadata reads the tokenizer, the chat template and the generation defaults.
func (g *ggufCheckpoint) metadata() (*tokenizer.Tokenizer, *chattemplate.Template, GenerationConfig, error) {
	tok, tokens, err := g.readTokenizer()
	if err != nil {
		return nil, nil, GenerationConfig{}, err
	}
	gen, err := g.readGeneration(tokens)
	if err != nil {
		return nil, nil, GenerationConfig{}, err
	}
	return tok, g.readTemplate(tokens), gen, nil
}

// readTokenizer builds the tokenizer from tokenizer.ggml.*; it returns the token strings too.
func (g *ggufCheckpoint) readTokenizer() (*tokenizer.Tokenizer, []string, error) {
	model, _, err := g.stringKey("tokenizer.ggml.model")
	if err != nil {
		return nil, nil, err
	}
	if model != "gpt2" {
		return nil, nil, g.errorf("tokenizer %q (tokenizer.ggml.model) is not one tfd runs; it runs byte-level BPE (\"gpt2\"), as Llama 3, Qwen2 and Qwen3 use", model)
	}
	preName, _, err := g.stringKey("tokenizer.ggml.pre")
	if err != nil {
		return nil, nil, err
	}
	pre, ok := ggufPretokenizers[preName]
	if !ok {
		return nil, nil, g.errorf("pre-tokenizer %q (tokenizer.ggml.pre) is not one tfd runs; it runs %s",
			preName, strings.Join(slices.Sorted(maps.Keys(ggufPretokenizers)), ", "))
	}
	tokens, err := g.stringsKey("tokenizer.ggml.tokens")
	if err != nil {
		return nil, nil, err
	}
	if len(tokens) > g.cfg.Vocab {
		return nil, nil, g.errorf("tokenizer.ggml.tokens holds %d tokens, token_embd.weight only %d", len(tokens), g.cfg.Vocab)
	}
	types := make([]int64, len(tokens))
	if v, ok := g.file.Lookup("tokenizer.ggml.token_type"); ok {
		if types, ok = v.Ints(); !ok || len(types) != len(tokens) {
			return nil, nil, g.errorf("tokenizer.ggml.token_type is %s; want integers, one per token (%d)", v.Describe(), len(tokens))
		}
	}
	merges, err := g.stringsKey("tokenizer.ggml.merges")
	if err != nil {
		return nil, nil, err
	}
	spec := tokenizer.Spec{Tokens: make([]string, len(tokens)), Pre: pre.pre, NFC: pre.nfc, IgnoreMerges: pre.ignoreMerges}
	for id, text := range tokens {
		switch types[id] {
		case 0, ggufTokenNormal: // 0: a converter that left the type undefined
			spec.Tokens[id] = text
		case ggufTokenControl, ggufTokenUserDefined:
			spec.Tokens[id] = text
			spec.Added = append(spec.Added, tokenizer.AddedToken{ID: int32(id), Special: types[id] == ggufTokenControl})
		case ggufTokenUnused:
			// No token: as in the tokenizer.json it was converted from.
		default:
			return nil, nil, g.errorf("token %d (%q) has type %d, which byte-level BPE does not use", id, text, types[id])
		}
	}
	spec.Merges = make([][2]string, len(merges))
	for i, m := range merges {
		// Split at the first space after the first character, as llama.cpp does: a merge's
		// halves are byte-level strings, whose spaces are written as 'Ġ'.
		cut := strings.IndexByte(m[min(1, len(m)):], ' ') + min(1, len(m))
		if cut < 1 {
			return nil, nil, g.errorf("tokenizer.ggml.merges[%d] (%q) is not two tokens separated by a space", i, m)
		}
		spec.Merges[i] = [2]string{m[:cut], m[cut+1:]}
	}
	tok, err := tokenizer.New(spec)
	if err != nil {
		return nil, nil, g.errorf("the tokenizer in the metadata: %w", err)
	}
	return tok, tokens, nil
}

// stringsKey reads an array of strings that must be there.
func (g *ggufCheckpoint) stringsKey(key string) ([]string, error) {
	v, ok := g.file.Lookup(key)
	if !ok {
		return nil, g.errorf("the metadata has no %s", key)
	}
	s, ok := v.Strings()
	if !ok {
		return nil, g.errorf("%s is %s, want an array of strings", key, v.Describe())
	}
	return s, nil
}

// tokenKey reads a token id key; a missing or out-of-range id is -1, as llama.cpp ignores one
// outside the vocabulary.
func (g *ggufCheckpoint) tokenKey(key string, tokens []string) (int32, error) {
	n, ok, err := g.intKey(key)
	if err != nil || !ok || n >= len(tokens) {
		return -1, err
	}
	return int32(n), nil
}

// readTemplate reads tokenizer.chat_template, with the bos and eos tokens' texts; nil when the
// file has none or it does not parse (chat requests are then refused, as for a folder).
func (g *ggufCheckpoint) readTemplate(tokens []string) *chattemplate.Template {
	source, _, err := g.stringKey("tokenizer.chat_template")
	if err != nil || source == "" {
		return nil
	}
	text := func(key string) string {
		id, err := g.tokenKey(key, tokens)
		if err != nil || id < 0 {
			return ""
		}
		return tokens[id]
	}
	tmpl, err := chattemplate.New(source, text("tokenizer.ggml.bos_token_id"), text("tokenizer.ggml.eos_token_id"))
	if err != nil {
		return nil
	}
	return tmpl
}

// readGeneration reads the generation defaults: the ids that end a reply (eos, eot, eom and the
// tokens of ggufEndTexts) and the sampling the converter took from generation_config.json
// (general.sampling.*).
func (g *ggufCheckpoint) readGeneration(tokens []string) (GenerationConfig, error) {
	gen := GenerationConfig{Temperature: -1, TopP: -1, MinP: -1, TopK: -1, RepetitionPenalty: -1}
	for _, key := range []string{"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"} {
		id, err := g.tokenKey(key, tokens)
		if err != nil {
			return gen, err
		}
		if id >= 0 && !slices.Contains(gen.EOS, id) {
			gen.EOS = append(gen.EOS, id)
		}
	}
	for id, text := range tokens {
		if slices.Contains(ggufEndTexts, text) && !slices.Contains(gen.EOS, int32(id)) {
			gen.EOS = append(gen.EOS, int32(id))
		}
	}
	for _, f := range []struct {
		dst *float32
		key string
	}{
		{&gen.Temperature, "general.sampling.temp"}, {&gen.TopP, "general.sampling.top_p"},
		{&gen.MinP, "general.sampling.min_p"}, {&gen.RepetitionPenalty, "general.sampling.penalty_repeat"},
	} {
		x, ok, err := g.floatKey(f.key)
		if err != nil {
			return gen, err
		}
		if ok && x >= 0 {
			*f.dst = float32(x)
		}
	}
	if k, ok, err := g.intKey("general.sampling.top_k"); err != nil {
		return gen, err
	} else if ok {
		gen.TopK = k
	}
	return gen, nil
}
