package engine

import (
	"testing"
	"testing/fstest"
)

// TestGenerationDefaults: generation_config.json's sampling defaults, repetition_penalty
// among them (Qwen2.5's instruct models set 1.05), and -1 for what it leaves out.
func TestGenerationDefaults(t *testing.T) {
	for _, tc := range []struct {
		file        string
		temperature float32
		repetition  float32
	}{
		{`{"eos_token_id": 2, "temperature": 0.7, "repetition_penalty": 1.05}`, 0.7, 1.05},
		{`{"eos_token_id": [2, 3], "do_sample": false}`, 0, -1},
		{`{"eos_token_id": 2, "repetition_penalty": 0}`, -1, -1}, // not a penalty: unset
	} {
		fsys := fstest.MapFS{"generation_config.json": {Data: []byte(tc.file)}}
		g, err := readGeneration(fsys, Config{Vocab: 10}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if g.Temperature != tc.temperature || g.RepetitionPenalty != tc.repetition || g.TopP != -1 {
			t.Errorf("%s: %+v", tc.file, g)
		}
	}
}
