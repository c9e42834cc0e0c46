package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCommandLine(t *testing.T) {
	config := filepath.Join(t.TempDir(), "tfd.toml")
	os.WriteFile(config, []byte("[sessions]\ngrow = 512\n"), 0o644)
	tests := []struct {
		args   []string
		code   int
		stdout string // substrings
		stderr string
	}{
		{args: nil, code: exitUsage, stderr: "Usage:"},
		{args: []string{"frobnicate"}, code: exitUsage, stderr: `unknown command "frobnicate"`},
		{args: []string{"install", "now"}, code: exitUsage, stderr: `unexpected argument "now"`},
		{args: []string{"status"}, code: exitFailure, stdout: "tfd is not installed"},
		{args: []string{"stop"}, code: exitFailure, stderr: "tfd is not installed"},
		{args: []string{"plan", "--parallel", "2"}, code: 0, stdout: "(shared host; parallel 2)"},
		{args: []string{"plan", "--listen", "nowhere"}, code: exitUsage, stderr: "server.listen"},
		{args: []string{"version"}, code: 0, stdout: "tfd "},
		{args: []string{"help"}, code: 0, stdout: "tfd serve"},
		{args: []string{"help"}, code: 0, stdout: "--log-file FILE"},
		{args: []string{"help"}, code: 0, stdout: "tfd pull [flags] REPO[:FILE]"},
		{args: []string{"config", "--config", config, "--parallel", "3"}, code: 0,
			stdout: "grow = 512        # file " + config},
		{args: []string{"config", "--config", config, "--parallel", "3"}, code: 0, stdout: `parallel = "3"    # flag --parallel`},
		{args: []string{"config", "--config", filepath.Join(t.TempDir(), "none.toml")}, code: exitUsage, stderr: "does not exist"},
		{args: []string{"config", "--listen", "nowhere"}, code: exitUsage, stderr: `tfd: config: server.listen = "nowhere" (flag --listen)`},
		{args: []string{"serve", "--bogus"}, code: exitUsage, stderr: "flag provided but not defined"},
		{args: []string{"serve", "extra"}, code: exitUsage, stderr: `unexpected argument "extra"`},
		// Every bad flag value is a usage error: exit 2, one line naming the flag and what it takes.
		{args: []string{"bench", "--tokens", "-1"}, code: exitUsage,
			stderr: `tfd bench: invalid value "-1" for flag -tokens: want a whole number of tokens, 1 or more`},
		{args: []string{"bench", "--prompt", "x"}, code: exitUsage,
			stderr: `tfd bench: invalid value "x" for flag -prompt: want a whole number of tokens, 1 or more`},
		{args: []string{"bench", "--streams", "1,0"}, code: exitUsage,
			stderr: `tfd bench: invalid value "1,0" for flag -streams: want whole numbers of 1 or more separated by commas`},
		{args: []string{"bench", "--tokens"}, code: exitUsage, stderr: "tfd bench: flag needs an argument: -tokens"},
		{args: []string{"logs", "-n", "-1"}, code: exitUsage,
			stderr: `tfd logs: invalid value "-1" for flag -n: want a whole number of lines, 0 or more`},
		{args: []string{"logs", "now"}, code: exitUsage, stderr: `tfd logs: unexpected argument "now"`},
		{args: []string{"plan", "-h"}, code: 0, stderr: "Usage:"},
	}
	for _, tc := range tests {
		var stdout, stderr bytes.Buffer
		code := runWith(tc.args, &stdout, &stderr, fakeManager(t, nil))
		if code != tc.code || !strings.Contains(stdout.String(), tc.stdout) || !strings.Contains(stderr.String(), tc.stderr) ||
			(code == exitUsage && !strings.Contains(stderr.String(), "Usage:") && strings.Count(stderr.String(), "\n") != 1) {
			t.Errorf("tfd %q: exit %d, want %d\nstdout: %s\nstderr: %s", tc.args, code, tc.code, stdout.String(), stderr.String())
		}
	}
}

// TestStrayEnvironment: a TFD_* variable that names no config key is a warning, not a failure.
func TestStrayEnvironment(t *testing.T) {
	t.Setenv("TFD_SESION_PARALLEL", "2")
	config := filepath.Join(t.TempDir(), "tfd.toml")
	os.WriteFile(config, []byte("[sessions]\ngrow = 512\n"), 0o644)
	var stdout, stderr bytes.Buffer
	code := runWith([]string{"config", "--config", config}, &stdout, &stderr, fakeManager(t, nil))
	if code != 0 || !strings.Contains(stderr.String(), "tfd: warning: config: ignored the environment variable TFD_SESION_PARALLEL") {
		t.Errorf("exit %d\nstderr: %s", code, &stderr)
	}
}
