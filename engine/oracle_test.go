package engine_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"tfd/compute"
	_ "tfd/cpu"
	"tfd/engine"
	"tfd/engine/enginetest"
)

// The engine on the CPU backend against the transformers oracle of engine/testdata/oracle (made
// by tools/fixtures/make_fixtures.py and make_moe_fixture.py with transformers in f32): tiny
// random-init Llama, Qwen2, Qwen3 and Qwen3-MoE checkpoints and the bundled model.

func openCPU(t testing.TB) compute.Backend {
	t.Helper()
	b, err := compute.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// TestMatchesTransformers: the engine on the CPU gives transformers' logits and greedy runs,
// and its forwards are batch-invariant (enginetest.CheckBackend).
func TestMatchesTransformers(t *testing.T) {
	enginetest.CheckBackend(t, openCPU(t))
}

// TestForwardSizesKeepBits: a prompt of the bundled model gives every position the same bits in
// forwards of 64, 300 and 100 rows (enginetest.CheckForwardSizes; cuda's test runs the whole
// context in one forward).
func TestForwardSizesKeepBits(t *testing.T) {
	m := enginetest.Load(t, openCPU(t), "models/gopher", engine.Options{MaxRows: 300, Slots: 300})
	enginetest.CheckForwardSizes(t, m, 300, []int{64, 300, 100})
}

// TestLoadRefusesWhatItCannotRun: a folder that is not a model, and a checkpoint whose tensors
// do not match its config, are refused with errors that name the problem.
func TestLoadRefusesWhatItCannotRun(t *testing.T) {
	b := openCPU(t)
	empty := t.TempDir()
	// mismatched copies an oracle checkpoint with one edit to its config.json.
	mismatched := func(model, key, value string) string {
		dir := t.TempDir()
		src := filepath.Join(enginetest.RepoRoot(t), "engine", "testdata", "oracle", model)
		for _, name := range []string{"config.json", "model.safetensors", "tokenizer.json"} {
			data, err := os.ReadFile(filepath.Join(src, name))
			if err != nil {
				t.Fatal(err)
			}
			if name == "config.json" {
				edited := bytes.Replace(data, []byte(key), []byte(value), 1)
				if bytes.Equal(edited, data) {
					t.Fatalf("%s/config.json has no %s", model, key)
				}
				data = edited
			}
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	for _, tc := range []struct{ dir, want string }{
		{empty, empty + " has no config.json"}, // the whole path: folders of one name are common
		{mismatched("qwen3", `"intermediate_size": 128`, `"intermediate_size": 96`),
			"model.layers.0.mlp.gate_proj.weight has shape [128 64], config.json implies [96 64]"},
		{mismatched("qwen3moe", `"moe_intermediate_size": 48`, `"moe_intermediate_size": 40`),
			"model.layers.0.mlp.experts.0.gate_proj.weight has shape [48 64], config.json implies [40 64]"},
		{mismatched("qwen3moe", `"num_local_experts": 8`, `"num_local_experts": 9`),
			"model.layers.0.mlp.gate.weight has shape [8 64], config.json implies [9 64]"},
		{mismatched("qwen3moe", `"mlp_only_layers": [`, `"mlp_only_layers": [0, `),
			"the checkpoint has no tensor model.layers.0.mlp.gate_proj.weight"},
	} {
		_, err := engine.Load(context.Background(), engine.Source{Dir: tc.dir}, b, engine.Options{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Load(%s) = %v, want an error saying %q", tc.dir, err, tc.want)
		}
	}
}
