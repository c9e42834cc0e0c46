package main

import (
	"bytes"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"tfd/hub/hubtest"
)

// TestPull runs tfd pull against a fake hub that HF_ENDPOINT names and that wants HF_TOKEN:
// the model folder arrives where --dir or model.dir says, with one log line per file, the
// command prints the model.path to set, and a second pull fetches nothing.
func TestPull(t *testing.T) {
	weights := bytes.Repeat([]byte("weights!"), 40_000)
	h := &hubtest.Hub{Token: "hf_test", Repos: map[string]map[string]hubtest.File{"acme/tiny": {
		"config.json":           {Content: []byte(`{"model_type":"qwen3"}`)},
		"tokenizer.json":        {Content: []byte(`{"model":{}}`)},
		"tokenizer_config.json": {Content: []byte(`{}`)},
		"model.safetensors":     {Content: weights, LFS: true},
		"pytorch_model.bin":     {Content: weights, LFS: true},
	}}}
	srv := httptest.NewServer(h)
	defer srv.Close()
	t.Setenv("HF_ENDPOINT", srv.URL)
	t.Setenv("HF_TOKEN", "hf_test")
	dir := t.TempDir()
	folder := filepath.Join(dir, "acme", "tiny")

	var stdout, stderr bytes.Buffer
	if code := run([]string{"pull", "--dir", dir, "acme/tiny"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\n%s", code, &stderr)
	}
	for _, want := range []string{
		"acme/tiny (commit " + hubtest.Commit("acme/tiny")[:12] + ") is in " + folder + ": 4 files",
		"(4 fetched, 0 already there)",
		"tfd serve --model " + folder,
		"path = " + strconv.Quote(folder),
	} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, &stdout)
		}
	}
	if n := strings.Count(stderr.String(), `msg=fetched file=`); n != 4 {
		t.Errorf("%d log lines of fetched files, want 4:\n%s", n, &stderr)
	}
	if got, err := os.ReadFile(filepath.Join(folder, "model.safetensors")); err != nil || !bytes.Equal(got, weights) {
		t.Errorf("model.safetensors: %d bytes, %v", len(got), err)
	}
	if _, err := os.Stat(filepath.Join(folder, "pytorch_model.bin")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pytorch_model.bin was fetched: %v", err)
	}

	// model.dir from the config file, and flags after the repo.
	config := filepath.Join(t.TempDir(), "tfd.toml")
	os.WriteFile(config, []byte("[model]\ndir = "+strconv.Quote(dir)+"\n"), 0o644)
	stdout.Reset()
	stderr.Reset()
	if code := run([]string{"pull", "acme/tiny", "--config", config, "--revision", "main"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\n%s", code, &stderr)
	}
	if !strings.Contains(stdout.String(), "(0 fetched, 4 already there)") || !strings.Contains(stdout.String(), "set in "+config) {
		t.Errorf("second pull:\n%s", &stdout)
	}
	if n := strings.Count(stderr.String(), `msg="in place already"`); n != 4 {
		t.Errorf("%d log lines of files in place, want 4:\n%s", n, &stderr)
	}
}

// TestPullRefused: the command's own errors are usage errors (exit 2); the hub's refusals are
// failures (exit 1) that say what to do.
func TestPullRefused(t *testing.T) {
	srv := httptest.NewServer(&hubtest.Hub{Token: "hf_right", Repos: map[string]map[string]hubtest.File{}})
	defer srv.Close()
	t.Setenv("HF_ENDPOINT", srv.URL)
	t.Setenv("HF_TOKEN", "")
	dir := t.TempDir()
	tests := []struct {
		args   []string
		code   int
		stderr string
	}{
		{args: []string{"pull"}, code: exitUsage, stderr: "tfd pull: want one REPO or REPO:FILE, e.g. tfd pull Qwen/Qwen3-0.6B (got 0)"},
		{args: []string{"pull", "a/b", "c/d"}, code: exitUsage, stderr: "(got 2)"},
		{args: []string{"pull", "a/b/c"}, code: exitUsage, stderr: `tfd pull: hub: "a/b/c" is not a repo id`},
		{args: []string{"pull", "a/b:../x"}, code: exitUsage, stderr: "not a file path inside a repo"},
		{args: []string{"pull", "--revision"}, code: exitUsage, stderr: "flag needs an argument: -revision"},
		{args: []string{"pull", "--dir", dir, "acme/private"}, code: exitFailure, stderr: "set HF_TOKEN to an access token"},
	}
	for _, tc := range tests {
		var stdout, stderr bytes.Buffer
		code := run(tc.args, &stdout, &stderr)
		if code != tc.code || !strings.Contains(stderr.String(), tc.stderr) || (code == exitUsage && strings.Count(stderr.String(), "\n") != 1) {
			t.Errorf("tfd %q: exit %d, want %d\nstderr: %s", tc.args, code, tc.code, &stderr)
		}
	}
}

// TestTerminalProgress: a file's line is redrawn in place, at most every redraw, with its bytes,
// share and rate, and ends with "done" on a line of its own.
func TestTerminalProgress(t *testing.T) {
	var out bytes.Buffer
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := &terminalProgress{w: &out, now: func() time.Time { return clock }}
	p.Present("config.json", 2048)
	p.Start("model.safetensors", 1<<20, 4<<20) // resumed from 1 MiB
	clock = clock.Add(redraw / 2)
	p.Update("model.safetensors", 2<<20) // too soon to draw
	clock = clock.Add(redraw / 2)
	p.Update("model.safetensors", 3<<20)
	p.Finish("model.safetensors", nil)
	want := "config.json  2.0 KiB  already here\n" +
		"\rmodel.safetensors  1.0 MiB of 4.0 MiB (25%)  0 B/s\x1b[K" +
		"\rmodel.safetensors  3.0 MiB of 4.0 MiB (75%)  10.0 MiB/s\x1b[K" +
		"\rmodel.safetensors  3.0 MiB of 4.0 MiB (75%)  10.0 MiB/s\x1b[K  done\n"
	if out.String() != want {
		t.Errorf("progress:\n%q\nwant\n%q", out.String(), want)
	}
}
