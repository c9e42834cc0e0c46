package cuda

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"tfd/batch"
	"tfd/engine"
	"tfd/engine/enginetest"
)

// TestGraphsKeepBits runs one script of engine forwards with CUDA graphs off and then on, and
// demands the same logits bit for bit, and that graphs were really captured and replayed. The
// script has each shape of forward a server makes: a prompt in one forward, greedy decode steps
// of one row, rounds of one decode row for each of three sessions, and a prompt in equal chunks.
// Each run rewrites every KV slot it reads, so the two runs start from the same state.
func TestGraphsKeepBits(t *testing.T) {
	b := openCUDA(t)
	if on, _, _, err := graphState(b); !on {
		if err != nil {
			t.Fatalf("graphs turned themselves off: %v", err)
		}
		t.Skip("graphs are off here (TFD_CUDA_GRAPHS=0, or the driver has no graph API)")
	}
	for _, name := range []string{"qwen3", "qwen3moe", "gopher"} {
		t.Run(name, func(t *testing.T) {
			o := enginetest.Read(t, name)
			m := enginetest.Load(t, b, o.Model, engine.Options{MaxRows: 32, Slots: 512})
			setGraphs(b, false)
			off := graphScript(t, m)
			setGraphs(b, true)
			_, c0, r0, _ := graphState(b)
			on := graphScript(t, m)
			_, c1, r1, err := graphState(b)
			if err != nil {
				t.Fatalf("graphs failed: %v", err)
			}
			t.Logf("%d forwards: %d graphs captured, %d replayed", len(on), c1-c0, r1-r0)
			if c1 == c0 || r1-r0 < len(on)/2 {
				t.Errorf("%d forwards with graphs on captured %d graphs and replayed %d: the graph path went unused", len(on), c1-c0, r1-r0)
			}
			if len(on) != len(off) {
				t.Fatalf("%d forwards with graphs, %d without", len(on), len(off))
			}
			for i := range on {
				for k := range on[i] {
					if math.Float32bits(on[i][k]) != math.Float32bits(off[i][k]) {
						t.Fatalf("forward %d, logit %d: %v with graphs, %v without", i, k, on[i][k], off[i][k])
					}
				}
			}
		})
	}
}

// graphScript runs the script of TestGraphsKeepBits and returns each forward's logits.
func graphScript(t *testing.T, m *engine.Model) [][]float32 {
	t.Helper()
	var out [][]float32
	forward := func(rows []batch.Row) []float32 {
		logits, err := m.Forward(context.Background(), rows)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, slices.Clone(logits))
		return logits
	}
	r := rand.New(rand.NewPCG(11, 12))
	token := func() int32 { return int32(r.IntN(m.Vocab())) }

	// A 20-token prompt, then 24 greedy steps of one row.
	prompt := make([]batch.Row, 20)
	for i := range prompt {
		prompt[i] = batch.Row{Pos: i, Token: token(), Logits: i == len(prompt)-1}
	}
	logits := forward(prompt)
	for pos := len(prompt); pos < len(prompt)+24; pos++ {
		logits = forward([]batch.Row{{Pos: pos, Token: batch.Argmax(logits), Logits: true}})
	}
	// Rounds of one row for each of three sessions, positions 0..11.
	for pos := range 12 {
		rows := make([]batch.Row, 3)
		for s := range rows {
			rows[s] = batch.Row{Base: 128 * (s + 1), Pos: pos, Token: token(), Logits: true}
		}
		forward(rows)
	}
	// A 48-token prompt in chunks of 8 rows, every row's logits wanted.
	for start := 0; start < 48; start += 8 {
		rows := make([]batch.Row, 8)
		for i := range rows {
			rows[i] = batch.Row{Base: 448, Pos: start + i, Token: token(), Logits: true}
		}
		forward(rows)
	}
	return out
}

// TestDependentLaunchKeepsBits runs TestGraphsKeepBits' script with programmatic dependent launch
// off and then on, with graphs and without, and demands the same logits bit for bit: every kernel
// waits for the one before it before it reads or writes what kernels share (pdl_linux.go).
func TestDependentLaunchKeepsBits(t *testing.T) {
	b := openCUDA(t)
	if !setDependentLaunch(b, true) {
		t.Skip("no programmatic dependent launch here (compute capability below 9.0, or a driver before CUDA 12.0)")
	}
	defer setDependentLaunch(b, true)
	for _, name := range []string{"qwen3", "qwen3moe", "gopher"} {
		t.Run(name, func(t *testing.T) {
			o := enginetest.Read(t, name)
			m := enginetest.Load(t, b, o.Model, engine.Options{MaxRows: 32, Slots: 512})
			for _, graphs := range []bool{true, false} {
				t.Run(fmt.Sprintf("graphs=%v", graphs), func(t *testing.T) {
					setGraphs(b, graphs)
					defer setGraphs(b, true)
					scriptKeepsBits(t, m, func(on bool) { setDependentLaunch(b, on) })
				})
			}
			if _, _, _, err := graphState(b); err != nil {
				t.Fatalf("graphs failed with dependent launch: %v", err)
			}
		})
	}
}
