package daemon

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// completion is what these tests read of a completion's answer.
type completion struct {
	Choices []struct {
		Text string `json:"text"`
	} `json:"choices"`
	Usage struct {
		PromptTokens int `json:"prompt_tokens"`
		Details      *struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
}

func (c completion) cached() int {
	if c.Usage.Details == nil {
		return 0
	}
	return c.Usage.Details.CachedTokens
}

// complete posts a greedy completion of prompt and returns its answer.
func complete(t *testing.T, url, prompt string) completion {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"prompt": prompt, "max_tokens": 12, "temperature": 0})
	resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var c completion
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil || resp.StatusCode != http.StatusOK || len(c.Choices) != 1 {
		t.Fatalf("completion: %s, %v, %+v", resp.Status, err, c)
	}
	return c
}

// longPrompt is a prompt of several blocks of the prompt cache.
var longPrompt = strings.Repeat("// Package ring implements a fixed-size ring buffer of bytes, safe for one writer.\n", 12) + "package ring\n"

// TestPromptCacheAcrossARestart: a prompt served again after another took the one session comes
// from the cache's memory; after a graceful stop and a new start on the same spill folder, from
// disk; each time the reply is the one the first, uncached request got, and usage says how many
// prompt tokens were reused.
func TestPromptCacheAcrossARestart(t *testing.T) {
	spill := t.TempDir()
	cfg := fmt.Sprintf("[sessions]\nparallel = 1\n[prompt_cache]\ngib = 0.05\nspill_dir = %q\nspill_gib = 1\n", spill)
	d := startDaemon(t, cfg)
	first := complete(t, d.url, longPrompt)
	whole := first.Usage.PromptTokens / 64 * 64
	if whole < 128 {
		t.Fatalf("the prompt has %d tokens, too few for the test", first.Usage.PromptTokens)
	}
	complete(t, d.url, "func main() {") // takes the one session
	again := complete(t, d.url, longPrompt)
	if again.Choices[0].Text != first.Choices[0].Text || again.cached() < whole-1 {
		t.Errorf("from memory: %q reusing %d tokens; first %q; want at least %d reused", again.Choices[0].Text, again.cached(), first.Choices[0].Text, whole-1)
	}
	if rep := d.status(t).PromptCache; rep.Hits == 0 || rep.Blocks == 0 || rep.SpillDir != spill {
		t.Errorf("status after a hit: %+v", rep)
	}
	d.stop(t)
	files, _ := filepath.Glob(filepath.Join(spill, "*.tfdkv"))
	if len(files) < whole/64 {
		t.Fatalf("%d spill files after a graceful stop, want at least %d\n%s", len(files), whole/64, d.log)
	}
	for _, f := range files {
		if info, err := os.Stat(f); err != nil || info.Mode().Perm() != 0o640 {
			t.Errorf("spill file %s: %v, mode %v, want 0640", f, err, info.Mode().Perm())
		}
	}

	d = startDaemon(t, cfg)
	restarted := complete(t, d.url, longPrompt)
	if restarted.Choices[0].Text != first.Choices[0].Text || restarted.cached() < whole-1 {
		t.Errorf("after a restart: %q reusing %d tokens; first %q; want at least %d reused", restarted.Choices[0].Text, restarted.cached(), first.Choices[0].Text, whole-1)
	}
	metrics := get(t, d.url+"/metrics")
	for _, want := range []string{"tfd_prompt_cache_hits_total 1", "tfd_prompt_cache_spill_reads_total"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(metrics, "tfd_prompt_cache_spill_reads_total 0") {
		t.Error("/metrics counts no spill reads after a restart served from disk")
	}
}

// TestPromptCacheReload: prompt_cache.gib edits resize the cache at once (a smaller budget evicts
// down to it, 0 empties it, a larger one grows it again within the memory the plan allows), and a
// spill folder can be set and dropped by editing the file.
func TestPromptCacheReload(t *testing.T) {
	d := startDaemon(t, "[sessions]\nparallel = 1\n[prompt_cache]\ngib = 0.05\n")
	file := filepath.Join(d.dir, "tfd.toml")
	complete(t, d.url, longPrompt)
	full := d.status(t).PromptCache
	if full.CapacityBlocks == 0 || full.Blocks == 0 {
		t.Fatalf("at start: %+v", full)
	}
	// capacity waits for config generation gen, then for the host to resize the cache (at its
	// next turn, which a request makes sure of) until ok holds, and returns the capacity.
	capacity := func(gen int, ok func(int) bool) int {
		t.Helper()
		d.waitGeneration(t, gen, 0)
		c := 0
		for range 50 {
			if c = d.status(t).PromptCache.CapacityBlocks; ok(c) {
				break
			}
			complete(t, d.url, "x")
		}
		return c
	}
	writeText(t, file, "[sessions]\nparallel = 1\n[prompt_cache]\ngib = 0.01\n")
	if got := capacity(2, func(c int) bool { return c < full.CapacityBlocks }); got == 0 || got >= full.CapacityBlocks {
		t.Errorf("capacity %d blocks after shrinking to 0.01 GiB, had %d", got, full.CapacityBlocks)
	}
	writeText(t, file, "[sessions]\nparallel = 1\n[prompt_cache]\ngib = 0\n")
	if got := capacity(3, func(c int) bool { return c == 0 }); got != 0 {
		t.Errorf("capacity %d blocks after turning the cache off", got)
	}
	if c := complete(t, d.url, longPrompt); c.cached() > 0 && d.status(t).PromptCache.Hits > 0 {
		t.Errorf("the cache served a prompt while off")
	}
	spill := t.TempDir()
	writeText(t, file, fmt.Sprintf("[sessions]\nparallel = 1\n[prompt_cache]\ngib = 0.05\nspill_dir = %q\nspill_gib = 1\n", spill))
	if got := capacity(4, func(c int) bool { return c == full.CapacityBlocks }); got != full.CapacityBlocks {
		t.Errorf("capacity %d blocks after growing back, want %d", got, full.CapacityBlocks)
	}
	if rep := d.status(t).PromptCache; rep.SpillDir != spill {
		t.Errorf("spill folder %q after the edit, want %q", rep.SpillDir, spill)
	}
	writeText(t, file, "[sessions]\nparallel = 1\n[prompt_cache]\ngib = 0.05\n")
	d.waitGeneration(t, 5, 0)
	if rep := d.status(t).PromptCache; rep.SpillDir != "" {
		t.Errorf("spill folder %q after dropping it", rep.SpillDir)
	}
}

// TestPromptCacheOnQwen3Next: a hybrid model serves from the prompt cache too (its blocks carry
// the DeltaNet states at their ends): a prompt served again after another took the one session
// reuses its whole blocks and replies as the first, uncached request did.
func TestPromptCacheOnQwen3Next(t *testing.T) {
	model, err := filepath.Abs("../engine/testdata/oracle/qwen3next")
	if err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, fmt.Sprintf("[model]\npath = %q\n[sessions]\nparallel = 1\n[prompt_cache]\ngib = 0.05\n", model))
	prompt := strings.Repeat("// Package delta keeps one state a layer.\n", 6)
	first := complete(t, d.url, prompt)
	whole := first.Usage.PromptTokens / 64 * 64
	if whole < 128 || first.Usage.PromptTokens > 400 {
		t.Fatalf("the prompt has %d tokens, too few or too many for the test", first.Usage.PromptTokens)
	}
	complete(t, d.url, "func main() {") // takes the one session
	again := complete(t, d.url, prompt)
	if again.Choices[0].Text != first.Choices[0].Text || again.cached() < whole-1 {
		t.Errorf("from the cache: %q reusing %d tokens; first %q; want at least %d reused", again.Choices[0].Text, again.cached(), first.Choices[0].Text, whole-1)
	}
	if rep := d.status(t).PromptCache; rep.Hits == 0 || rep.Blocks == 0 {
		t.Errorf("status after a hit: %+v", rep)
	}
}
