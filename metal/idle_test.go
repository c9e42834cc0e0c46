//go:build darwin && arm64

package metal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"tfd/compute"
	"tfd/engine"
	"tfd/engine/enginetest"
	"tfd/scheduler"
	"tfd/scheduler/schedulertest"
)

// TestFirstTokenAfterIdle measures what residency buys on this Mac and prints a markdown table
// for docs/metal.md: the time to the first token of a short request after the host sat idle for
// each gap (4 samples each), with residency on (every buffer in one residency set, idle ticks
// for keep_warm, as the daemon runs) and off (no set, no ticks), and sustained decode of one
// greedy stream. It waits on the wall clock on purpose: what it measures is what macOS does to
// an idle GPU's memory in real time, which no fake clock can stand in for. It takes about three
// minutes; -short skips it. TFD_METAL_MODEL=/path/to/hf-folder measures that model instead of
// the bundled one (the effect grows with the model: macOS takes back idle memory in pages).
func TestFirstTokenAfterIdle(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the idle check waits about three minutes")
	}
	src := engine.Source{Dir: filepath.Join(enginetest.RepoRoot(t), "models", "gopher")}
	if dir := os.Getenv("TFD_METAL_MODEL"); dir != "" {
		src = engine.Source{Dir: dir}
	}
	gaps := []time.Duration{200 * time.Millisecond, time.Second, 2 * time.Second, 3 * time.Second, 5 * time.Second, 10 * time.Second}
	const samples = 4
	runs := []idleRun{measureIdle(t, src, true, gaps, samples), measureIdle(t, src, false, gaps, samples)}
	var table strings.Builder
	fmt.Fprintf(&table, "\nFirst token after idle and sustained decode, %s, model %s, on %s:\n\n",
		time.Now().Format("2006-01-02"), filepath.Base(src.Dir), runs[0].device)
	fmt.Fprintf(&table, "| residency | idle gap | first token, %d samples (ms) | median (ms) |\n| --- | --- | --- | --- |\n", samples)
	for _, r := range runs {
		for i, gap := range gaps {
			ms := make([]string, len(r.firsts[i]))
			for j, d := range r.firsts[i] {
				ms[j] = fmt.Sprintf("%.1f", float64(d.Microseconds())/1000)
			}
			fmt.Fprintf(&table, "| %s | %v | %s | %.1f |\n", r.residency, gap, strings.Join(ms, ", "), median(r.firsts[i]))
		}
	}
	fmt.Fprintf(&table, "\n| residency | tokens decoded | tok/s (one greedy stream, after its first token) |\n| --- | --- | --- |\n")
	for _, r := range runs {
		fmt.Fprintf(&table, "| %s | %d | %.1f |\n", r.residency, r.tokens, r.tokPerSec)
	}
	t.Log(table.String())
	fmt.Print(table.String()) // shown by make test-metal (go test -v) even when the test passes
}

// median returns the median of ds in milliseconds.
func median(ds []time.Duration) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	n := len(s)
	return float64((s[(n-1)/2] + s[n/2]).Microseconds()) / 2000
}

// idleRun is what measureIdle saw with residency on or off.
type idleRun struct {
	residency string // "on" or "off"
	device    string
	firsts    [][]time.Duration // [gap][sample]
	tokens    int
	tokPerSec float64
}

// measureIdle loads the model on a backend with residency on or off, as the daemon would run it
// (ticks for keep_warm when on, none when off), and times first tokens after each gap, then one
// greedy stream of up to 256 tokens.
func measureIdle(t *testing.T, src engine.Source, on bool, gaps []time.Duration, samples int) idleRun {
	opts := DefaultResidency()
	opts.Enabled = on
	keep := opts.KeepWarm
	if !on {
		keep = 0
	}
	// Closed here, not at the test's end: the other run must not find this one's set resident.
	b, err := open(opts, slog.Default())
	if errors.Is(err, compute.ErrNoDevice) {
		t.Skipf("no Metal device here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}()
	m, err := engine.Load(context.Background(), src, b, engine.Options{Context: 512, MaxRows: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	h, err := scheduler.NewShared(m, schedulertest.Equip(m, scheduler.SharedOptions{Layout: []int{512}, KeepWarm: keep}))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	prompt := m.Tokenizer().Encode("func main() {\n")
	// run submits a request and returns when its first token came and when its last did.
	run := func(maxTokens int) (first, last time.Duration, tokens int) {
		start := time.Now()
		events, err := h.Submit(context.Background(), scheduler.Request{Prompt: prompt, MaxTokens: maxTokens})
		if err != nil {
			t.Fatal(err)
		}
		for ev := range events {
			if ev.Err != nil {
				t.Fatal(ev.Err)
			}
			if ev.Done {
				continue
			}
			if tokens++; tokens == 1 {
				first = time.Since(start)
			}
			last = time.Since(start)
		}
		return first, last, tokens
	}
	run(1) // the first forward: what idling then loses is what is measured
	r := idleRun{residency: "off", device: b.(*backend).Describe()}
	if on {
		r.residency = "on"
	}
	for _, gap := range gaps {
		var firsts []time.Duration
		for range samples {
			time.Sleep(gap)
			first, _, _ := run(1)
			firsts = append(firsts, first)
		}
		r.firsts = append(r.firsts, firsts)
	}
	first, last, n := run(256)
	r.tokens = n
	if n > 1 {
		r.tokPerSec = float64(n-1) / (last - first).Seconds()
	}
	return r
}
