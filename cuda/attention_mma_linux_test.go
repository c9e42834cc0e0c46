//go:build amd64 || arm64

package cuda

import (
	"fmt"
	"math"
	"testing"

	"tfd/compute"
	"tfd/compute/computetest"
	"tfd/engine"
	"tfd/engine/enginetest"
	"tfd/kernels"
	"tfd/scheduler/schedulertest"
)

// Attention on the tensor cores (TFD_CUDA_ATTN_MMA=1, attention_mma): its own arithmetic, so the
// checks the default kernels pass are run again with it, from the op against the cpu backend to
// the engine against transformers' oracle and shared, drafted rounds against solo ones.

func onAttentionMMA(t *testing.T) { t.Setenv("TFD_CUDA_ATTN_MMA", "1") }

func TestAttentionMMAMatchesCPU(t *testing.T) {
	onAttentionMMA(t)
	computetest.CheckAttention(t, newPair(t))
}

func TestAttentionMMAIsBatchInvariant(t *testing.T) {
	onAttentionMMA(t)
	computetest.CheckAttentionBatchInvariance(t, newPair(t))
}

func TestEngineMatchesOracleWithAttentionMMA(t *testing.T) {
	onAttentionMMA(t)
	enginetest.CheckBackend(t, openCUDA(t))
}

func TestSharedAndDraftedEqualSoloWithAttentionMMA(t *testing.T) {
	onAttentionMMA(t)
	schedulertest.CheckSharedAndDrafted(t, openCUDA(t))
}

func TestHalfKVEngineWithAttentionMMA(t *testing.T) {
	onAttentionMMA(t)
	enginetest.CheckHalfKV(t, openCUDA(t))
}

func TestLongForwardsKeepBitsWithAttentionMMA(t *testing.T) {
	onAttentionMMA(t)
	m := enginetest.Load(t, openCUDA(t), bundledDir, engine.Options{MaxRows: 2048, Slots: 2048})
	enginetest.CheckForwardSizes(t, m, 2048, []int{256, 2048, 700})
}

// TestAttentionMMAPromptTilesKeepBits: a prompt's rows attended in one launch (tiles of 32/group
// rows sharing each stage of keys, a pass per base where a tile holds rows of two sessions) give
// each row the bits it gets attended alone (a tile of one row), across the chunks and the changes
// of a split's chunks (at 1,025 and 2,049 keys), on heads of 64 and 128 with 1, 4 and 8 query heads
// to a kv head, with a sink per head on heads of 64.
func TestAttentionMMAPromptTilesKeepBits(t *testing.T) {
	onAttentionMMA(t)
	b := openCUDA(t)
	for _, hd := range []int{64, 128} {
		for _, group := range []int{1, 4, 8} {
			t.Run(fmt.Sprintf("hd=%d,group=%d", hd, group), func(t *testing.T) {
				c := tileCase{hd: hd, heads: 2 * group, kvHeads: 2, sinks: hd == 64}
				bases, positions := []int32{5000, 6000, 7000}, []int32{10, 500, 999}
				for p := range 2100 {
					bases, positions = append(bases, 0), append(positions, int32(p))
				}
				if l := kernels.AttentionMMALaunch(len(bases), 4, c.heads, group, hd, kernels.KVF32); l.Tile != 32/group {
					t.Fatalf("a prompt's rows: tiles of %d rows, want %d", l.Tile, 32/group)
				}
				at := c.attender(t, b)
				all := at(bases, positions)
				qw := c.heads * hd
				for _, i := range []int{0, 1, 2, 3, 4, 66, 67, 100, 1027, 1028, 1029, 1700, 2051, 2052, 2053, 2102} {
					got := at(bases[i:i+1], positions[i:i+1])
					computetest.SameBits(t, fmt.Sprintf("row %d (position %d) alone against among the prompt's", i, positions[i]), got, all[i*qw:(i+1)*qw])
				}
			})
		}
	}
}

// attender returns a function that attends from the given rows on b over c's pool (tileCase.pool),
// each row's query its own (base, position)'s, and returns the outputs.
func (c tileCase) attender(t *testing.T, b compute.Backend) func(bases, positions []int32) []float32 {
	kv, sk := c.pool(t, b)
	// Each row's query is keyed by its (base, position), so a row alone gets the query it has
	// among others.
	query := func(base, pos int32) []float32 { return computetest.Randn(uint64(base)<<20|uint64(pos), c.heads*c.hd) }
	return func(bases, positions []int32) []float32 {
		var qs []float32
		for i := range bases {
			qs = append(qs, query(bases[i], positions[i])...)
		}
		return c.attend(t, b, kv, sk, qs, bases, positions)
	}
}

// TestAttentionMMAMovesBits checks the premise of the tests above: with TFD_CUDA_ATTN_MMA=1 the
// launches are attention_mma's, whose bits differ from the default kernels' on random data, and
// the backend says so in its Arithmetic (which keys the prompt cache's blocks).
func TestAttentionMMAMovesBits(t *testing.T) {
	c := tileCase{hd: 128, heads: 8, kvHeads: 2}
	bases, positions := []int32{0, 0, 3000}, []int32{5, 700, 1500}
	def := openCUDA(t)
	want := c.attender(t, def)(bases, positions)
	onAttentionMMA(t)
	b := openCUDA(t)
	if !b.(*backend).attnMMA {
		t.Fatal("TFD_CUDA_ATTN_MMA=1 did not put attention on the tensor cores")
	}
	if a, d := b.(*backend).Arithmetic(), def.(*backend).Arithmetic(); a == d {
		t.Errorf("Arithmetic is %q with attention on the tensor cores and without", a)
	}
	got := c.attender(t, b)(bases, positions)
	computetest.Near(t, "attention_mma against the default kernels", got, want, 1e-5, 1)
	same := true
	for i := range got {
		same = same && math.Float32bits(got[i]) == math.Float32bits(want[i])
	}
	if same {
		t.Error("attention_mma gave the default kernels' bits: the tests above would not test it")
	}
}
