package engine

import (
	"fmt"
	"math"
	"strings"

	"tfd/compute"
)

// FormatBytes writes n in the largest binary unit that keeps it at least 1, one decimal: "4.1 GiB".
func FormatBytes(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	x, i := float64(n), 0
	for math.Abs(x) >= 1024 && i < len(units)-1 {
		x /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%d B", n)
	}
	return fmt.Sprintf("%.1f %s", x, units[i])
}

// String writes the plan as one readable block, as `tfd plan` and the startup log show it.
func (p Plan) String() string {
	var b strings.Builder
	row := func(name string, n int64, why string) {
		fmt.Fprintf(&b, "  %-9s %10s  %s\n", name, FormatBytes(n), why)
	}
	fmt.Fprintf(&b, "memory plan\n")
	if p.WorkingSet > 0 {
		row("memory", p.Memory, "RAM (hw.memsize), shared with the GPU")
		row("gpu", p.WorkingSet, "the GPU's recommended working set (recommendedMaxWorkingSetSize)")
	}
	row("limit", p.Limit, p.LimitFrom)
	weights := "as the backend stores them"
	if p.Quantize != NoQuantization {
		weights += fmt.Sprintf(", quantized at load (model.quantize = %s)", p.Quantize)
	}
	row("weights", p.Weights, weights)
	what := fmt.Sprintf("activations and logits for %d rows", p.MaxRows)
	if p.LogitRows > 0 && p.LogitRows < p.MaxRows {
		what = fmt.Sprintf("activations for %d rows, logits for %d", p.MaxRows, p.LogitRows)
	}
	row("scratch", p.Scratch, what)
	row("margin", p.Margin, "memory.margin_gb")
	host := "shared host"
	if p.Serial() {
		host = "serial host: one reply at a time"
	}
	cache := "prompt cache: " + p.CacheFrom
	if p.CacheStatePerBlock > 0 && p.Cache > 0 {
		cache += fmt.Sprintf("; a block of %d tokens takes %s, %s of it the DeltaNet states at its end",
			StateBlockTokens, FormatBytes(p.CacheBlockBytes(StateBlockTokens)), FormatBytes(p.CacheStatePerBlock))
	}
	row("cache", p.Cache, cache)
	perToken := FormatBytes(p.KVPerToken) + " a token"
	if p.KVCache == compute.F16 {
		perToken += " (keys and values in F16)"
	}
	if p.RingPerSession > 0 {
		perToken += fmt.Sprintf(" and %s of sliding-layer rings a session", FormatBytes(p.RingPerSession))
	}
	row("sessions", p.KV, fmt.Sprintf("%s (%s; parallel %s), %s", p.Layout.String(), host, p.Parallel, perToken))
	if p.StatePerSession > 0 {
		row("states", p.States, fmt.Sprintf("DeltaNet states: %s a session (its newest %d positions, %d block boundaries for the prompt cache)", FormatBytes(p.StatePerSession), p.StateDepth, p.StateSnapshots))
	}
	row("session", p.layoutBytes(1, p.Context), fmt.Sprintf("the keys and values of one session of the context (%d tokens)", p.Context))
	row("left", p.Left, "")
	fmt.Fprintf(&b, "  context   %d tokens\n", p.Context)
	for _, n := range p.Notes {
		fmt.Fprintf(&b, "  note: %s\n", n)
	}
	return b.String()
}

// LayoutString writes the plan's layout as sessions.layout reads it.
func (p Plan) LayoutString() string { return p.Layout.String() }
