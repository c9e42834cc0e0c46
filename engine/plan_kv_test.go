package engine

import (
	"testing"

	"tfd/compute"
)

// TestPlanHalvesTheKV plans Qwen3-8B's shape (36 layers, 8 KV heads of 128, a window of 40,960)
// in BF16 weights (16.4 GB) with the daemon's defaults (a 2 GiB margin, the prompt cache's default
// share, grow 2048) on an H200 and on a 64 GiB Mac: F16 keys and values take half the memory a
// token, so auto fits twice the whole-context sessions on the H200, and three for one and two smaller ones on the Mac (the figures docs/choices.md and the README quote).
func TestPlanHalvesTheKV(t *testing.T) {
	c := Config{Hidden: 4096, Intermediate: 12288, Layers: 36, Heads: 32, KVHeads: 8, HeadDim: 128, Vocab: 151936, MaxPositions: 40960}
	for _, m := range []struct {
		name     string
		memory   uint64
		f32, f16 string
	}{
		{"H200", 140 << 30, "40960x6", "40960x12"},
		{"64 GiB Mac", 64 << 30, "40960,20480,10240", "40960x3"},
	} {
		var perToken [2]int64
		for i, kv := range []compute.DType{compute.F32, compute.F16} {
			p, err := MakePlan(PlanInput{Model: c, WeightBytes: 16_400_000_000, DeviceMemory: m.memory, MarginGB: 2, Grow: 2048, PromptCacheGiB: -1, KVCache: kv})
			if err != nil {
				t.Fatalf("%s, %v: %v", m.name, kv, err)
			}
			if want := []string{m.f32, m.f16}[i]; p.LayoutString() != want {
				t.Errorf("%s, %v keys and values: %s, want %s\n%s", m.name, kv, p.LayoutString(), want, p)
			}
			perToken[i] = p.KVPerToken
		}
		if perToken[0] != 2*perToken[1] {
			t.Errorf("%s: %d bytes a token in F32, %d in F16", m.name, perToken[0], perToken[1])
		}
	}
}
