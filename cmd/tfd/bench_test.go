package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestBench runs tfd bench on the bundled model with small figures and reads its table: a row for
// each concurrency, drafts off and on.
func TestBench(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run([]string{"bench", "--streams", "1,2", "--prompt", "32", "--tokens", "16"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if len(lines) != 6 || !strings.Contains(lines[0], "greedy replies of 16 tokens after 32-token prompts") {
		t.Fatalf("want a title, a header and 4 rows:\n%s", stdout.String())
	}
	for i, want := range []string{"1 off", "1 on", "2 off", "2 on"} {
		if f := strings.Fields(lines[2+i]); len(f) < 2 || f[0]+" "+f[1] != want {
			t.Errorf("row %d = %q, want it to start %q", i, lines[2+i], want)
		}
	}
	for _, bad := range [][]string{{"bench", "--streams", "0"}, {"bench", "--streams", "x"}, {"bench", "--tokens", "0"},
		{"bench", "--temperature", "-1"}, {"bench", "--top-p", "1.5"}, {"bench", "--top-k", "x"}} {
		stderr.Reset()
		if code := run(bad, &stdout, &stderr); code != exitUsage {
			t.Errorf("tfd %v: exit %d, want %d (a usage error)\n%s", bad, code, exitUsage, &stderr)
		}
	}
}

// TestBenchSampled runs tfd bench with sampled replies: the title says how they were sampled.
func TestBenchSampled(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run([]string{"bench", "--streams", "2", "--prompt", "32", "--tokens", "16", "--temperature", "0.7", "--top-p", "0.9", "--top-k", "40"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if len(lines) != 4 || !strings.Contains(lines[0], "replies sampled at temperature 0.7, top_p 0.9, top_k 40 (reply i: seed i), of 16 tokens after 32-token prompts") {
		t.Fatalf("want a title, a header and 2 rows:\n%s", stdout.String())
	}
}

// TestBenchConversation runs tfd bench's prompt-cache case on the bundled model with a short
// conversation: a row for each case, the cached ones reusing most of the prompt.
func TestBenchConversation(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"bench", "--conversation", "300"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if len(lines) != 5 || !strings.Contains(lines[0], "fourth turn (about 300 tokens)") {
		t.Fatalf("want a title, a header and 3 rows:\n%s", stdout.String())
	}
	for i, name := range []string{"cache off", "memory hit", "disk hit after a restart"} {
		f := strings.Fields(lines[2+i])
		if !strings.HasPrefix(strings.TrimSpace(lines[2+i]), name) || len(f) < 4 {
			t.Fatalf("row %d = %q, want the %s case", i, lines[2+i], name)
		}
		reused, prompt := f[len(f)-1], f[len(f)-2]
		if (i == 0) != (reused == "0") {
			t.Errorf("%s reused %s of %s prompt tokens", name, reused, prompt)
		}
	}
}
