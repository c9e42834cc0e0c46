package engine

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"

	"tfd/engine/tokenizer"
)

// GenerationConfig holds a model's own defaults from generation_config.json.
type GenerationConfig struct {
	// EOS lists the token ids that end a reply: generation_config.json's eos_token_id, else
	// config.json's, else the tokenizer's <|endoftext|> or </s> if it has one.
	EOS []int32
	// Sampling defaults; negative where the model sets none. When do_sample is false the model
	// asks for greedy decoding and Temperature is 0.
	Temperature float32
	TopP        float32
	MinP        float32
	TopK        int
	// RepetitionPenalty is HF's (1 is off); negative where the model sets none.
	RepetitionPenalty float32
}

type rawGeneration struct {
	EOSTokenID  tokenIDs `json:"eos_token_id"`
	DoSample    *bool    `json:"do_sample"`
	Temperature *float32 `json:"temperature"`
	TopP        *float32 `json:"top_p"`
	MinP        *float32 `json:"min_p"`
	TopK        *int     `json:"top_k"`

	RepetitionPenalty *float32 `json:"repetition_penalty"`
}

// tokenIDs reads an id given as a number or a list of numbers.
type tokenIDs []int32

func (t *tokenIDs) UnmarshalJSON(b []byte) error {
	var one int32
	if err := json.Unmarshal(b, &one); err == nil {
		*t = tokenIDs{one}
		return nil
	}
	var many []int32
	if err := json.Unmarshal(b, &many); err != nil {
		return fmt.Errorf("want a token id or a list of them, got %s", b)
	}
	*t = many
	return nil
}

func readGeneration(fsys fs.FS, c Config, tok *tokenizer.Tokenizer) (GenerationConfig, error) {
	g := GenerationConfig{Temperature: -1, TopP: -1, MinP: -1, TopK: -1, RepetitionPenalty: -1}
	var raw rawGeneration
	data, err := fs.ReadFile(fsys, "generation_config.json")
	switch {
	case err == nil:
		if err := json.Unmarshal(data, &raw); err != nil {
			return g, fmt.Errorf("engine: generation_config.json: %w", err)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return g, fmt.Errorf("engine: %w", err)
	}
	if raw.Temperature != nil {
		g.Temperature = *raw.Temperature
	}
	if raw.DoSample != nil && !*raw.DoSample {
		g.Temperature = 0
	}
	if raw.TopP != nil {
		g.TopP = *raw.TopP
	}
	if raw.MinP != nil {
		g.MinP = *raw.MinP
	}
	if raw.TopK != nil {
		g.TopK = *raw.TopK
	}
	if r := raw.RepetitionPenalty; r != nil && *r > 0 {
		g.RepetitionPenalty = *r
	}
	g.EOS = raw.EOSTokenID
	if len(g.EOS) == 0 {
		var cfg struct {
			EOSTokenID tokenIDs `json:"eos_token_id"`
		}
		if data, err := fs.ReadFile(fsys, "config.json"); err == nil {
			_ = json.Unmarshal(data, &cfg) // config.json already parsed once; a bad eos field is not fatal
		}
		g.EOS = cfg.EOSTokenID
	}
	if len(g.EOS) == 0 {
		for _, s := range []string{"<|endoftext|>", "</s>", "<|end_of_text|>"} {
			if id, ok := tok.TokenID(s); ok {
				g.EOS = []int32{id}
				break
			}
		}
	}
	for _, id := range g.EOS {
		if id < 0 || int(id) >= c.Vocab {
			return g, fmt.Errorf("engine: eos token id %d is outside the vocabulary of %d", id, c.Vocab)
		}
	}
	return g, nil
}

// float32Bytes returns v as little-endian bytes, the layout Upload takes.
func float32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return b
}
