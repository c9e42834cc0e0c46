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
// by tools/fixtures/make_fixtures.py with transformers in f32): tiny random-init Llama, Qwen2 and
// Qwen3 checkpoints and the bundled model.

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

// TestLoadRefusesWhatItCannotRun: a folder that is not a model, and a checkpoint whose tensors
// do not match its config, are refused with errors that name the problem.
func TestLoadRefusesWhatItCannotRun(t *testing.T) {
	b := openCPU(t)
	empty := t.TempDir()
	mismatched := t.TempDir()
	src := filepath.Join(enginetest.RepoRoot(t), "engine", "testdata", "oracle", "qwen3")
	for _, name := range []string{"config.json", "model.safetensors", "tokenizer.json"} {
		data, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		if name == "config.json" {
			data = bytes.Replace(data, []byte(`"intermediate_size": 128`), []byte(`"intermediate_size": 96`), 1)
		}
		if err := os.WriteFile(filepath.Join(mismatched, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct{ dir, want string }{
		{empty, empty + " has no config.json"}, // the whole path: folders of one name are common
		{mismatched, "model.layers.0.mlp.gate_proj.weight has shape [128 64], config.json implies [96 64]"},
	} {
		_, err := engine.Load(context.Background(), engine.Source{Dir: tc.dir}, b, engine.Options{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Load(%s) = %v, want an error saying %q", tc.dir, err, tc.want)
		}
	}
}
