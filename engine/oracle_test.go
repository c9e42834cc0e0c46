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

// TestLogitsMatchTransformers compares every position's logits with transformers' f32 logits to
// 1e-4 of the row's largest magnitude.
func TestLogitsMatchTransformers(t *testing.T) {
	for _, name := range enginetest.Models {
		t.Run(name, func(t *testing.T) {
			o := enginetest.Read(t, name)
			m := enginetest.Load(t, openCPU(t), o.Model, engine.Options{MaxRows: 64})
			t.Logf("worst max|Δlogit| / max|logit|: %.3g", enginetest.CheckLogits(t, m, o))
		})
	}
}

// TestGreedyMatchesTransformers decodes 64 tokens greedily and demands transformers' tokens.
func TestGreedyMatchesTransformers(t *testing.T) {
	for _, name := range enginetest.Models {
		t.Run(name, func(t *testing.T) {
			o := enginetest.Read(t, name)
			enginetest.CheckGreedy(t, enginetest.Load(t, openCPU(t), o.Model, engine.Options{MaxRows: 64}), o)
		})
	}
}

// TestGreedyChainMatchesTransformers: greedy chains run without the host between tokens give
// transformers' tokens too.
func TestGreedyChainMatchesTransformers(t *testing.T) {
	for _, name := range enginetest.Models {
		t.Run(name, func(t *testing.T) {
			o := enginetest.Read(t, name)
			enginetest.CheckChain(t, enginetest.Load(t, openCPU(t), o.Model, engine.Options{MaxRows: 64}), o)
		})
	}
}

// TestForwardIsBatchInvariant: a forward that mixes sessions and positions gives every row the
// bits it gets alone.
func TestForwardIsBatchInvariant(t *testing.T) {
	for _, name := range []string{"qwen2", "gopher"} {
		t.Run(name, func(t *testing.T) {
			o := enginetest.Read(t, name)
			enginetest.CheckBatchInvariance(t, enginetest.Load(t, openCPU(t), o.Model, engine.Options{MaxRows: 48, Slots: 600}))
		})
	}
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
