//go:build amd64 || arm64

package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"tfd/compute"
	"tfd/compute/computetest"
	"tfd/kernels"
)

// TestAttentionTileEqualsSplit: attention_tile_H gives every row attention_split's bits, its
// outputs and every partial record of a row of several splits, on heads of 64, 128 and 256 with
// 1, 4 and 8 query heads to a kv head. One backend runs the tiled kernel (the default from
// kernels.AttentionTileFrom rows), the other attention_split (TFD_CUDA_ATTN_TILE=0), on the same
// rows:
//   - a prompt: positions 0 … n−1 of one session (n up to 4,100: every length from 1, across
//     chunks and the changes of a split's chunks at 1,025, 2,049, …), after three rows of other
//     sessions, so tiles hold rows of two sessions and straddle those changes;
//   - a sliding window of 700 over positions 0 … 1,499 as the engine lays it out (each row its
//     own base past position 699), so a tile makes a pass per base;
//
// with a sink per head for heads of 64 (GPT-OSS).
func TestAttentionTileEqualsSplit(t *testing.T) {
	t.Setenv("TFD_CUDA_ATTN_TILE", "1") // the tiles even where a pass per base costs (windows)
	tile := openCUDA(t)
	t.Setenv("TFD_CUDA_ATTN_TILE", "0")
	t.Setenv("TFD_CUDA_ATTN_WARP", "0")
	split := openCUDA(t)
	for _, hd := range []int{64, 128, 256} {
		for _, group := range []int{1, 4, 8} {
			kvHeads := 2
			if group > 1 {
				kvHeads = 1 // keep the scratch small
			}
			c := tileCase{hd: hd, heads: group * kvHeads, kvHeads: kvHeads, sinks: hd == 64}
			n := 4100
			if hd == 256 {
				n = 2600
			}
			t.Run(fmt.Sprintf("hd=%d,group=%d,prompt", hd, group), func(t *testing.T) {
				bases := []int32{5000, 6000, 7000}
				positions := []int32{10, 500, 999}
				for p := range n {
					bases, positions = append(bases, 0), append(positions, int32(p))
				}
				c.compare(t, "attention_tile_H", tile, split, bases, positions)
			})
			t.Run(fmt.Sprintf("hd=%d,group=%d,window", hd, group), func(t *testing.T) {
				var bases, positions []int32
				for p := range 1500 {
					first := max(0, p-700+1)
					bases, positions = append(bases, int32(first)), append(positions, int32(p-first))
				}
				c.compare(t, "attention_tile_H", tile, split, bases, positions)
			})
		}
	}
}

// TestAttentionWarpEqualsSplit: attention_warp gives every row attention_split's bits, its outputs
// and every partial record of a row of several splits, on heads of 64, 128 and 256 with 1, 3, 4
// and 8 query heads to a kv head (3: a block's last SIMD groups past the last head), in rounds
// as the engine makes them: one row of each of many sessions of different lengths (one chunk to
// several a split, 2,600 keys at most), rounds small enough for several groups a row and head
// (a lone stream's included) and large enough for one.
func TestAttentionWarpEqualsSplit(t *testing.T) {
	t.Setenv("TFD_CUDA_ATTN_TILE", "0")
	t.Setenv("TFD_CUDA_ATTN_WARP", "") // the default: attention_warp
	warp := openCUDA(t)
	t.Setenv("TFD_CUDA_ATTN_WARP", "0")
	split := openCUDA(t)
	for _, hd := range []int{64, 128, 256} {
		for _, group := range []int{1, 3, 4, 8} {
			c := tileCase{hd: hd, heads: 2 * group, kvHeads: 2, sinks: hd == 64}
			// One row: a group a split (a lone stream); 17 rows: several groups a row and head;
			// rows·heads past 2,048: one, merging.
			for _, rows := range []int{1, 17, (2048 + c.heads) / c.heads} {
				t.Run(fmt.Sprintf("hd=%d,group=%d,rows=%d", hd, group, rows), func(t *testing.T) {
					r := rand.New(rand.NewPCG(uint64(hd), uint64(group*rows)))
					var bases, positions []int32
					for i := range rows {
						// Sessions of 2,600 slots each in the pool of 8,000: three, as many rows.
						bases, positions = append(bases, int32(2600*(i%3))), append(positions, int32(r.IntN(2600)))
					}
					if l := kernels.AttentionWarpLaunch(rows, c.heads, hd, kernels.KVF32); (l.Blocks == 1) != (rows > 17) {
						t.Fatalf("%d rows of %d heads: %d blocks", rows, c.heads, l.Blocks)
					}
					c.compare(t, "attention_warp", warp, split, bases, positions)
				})
			}
		}
	}
}

// tileCase is one shape of TestAttentionTileEqualsSplit: a pool of tileSlots slots of random
// keys and values.
type tileCase struct {
	hd, heads, kvHeads int
	sinks              bool
}

// compare attends from the given rows on both backends, the first running the kernel named
// (attention_tile_H or attention_warp), the second attention_split, and checks the outputs and the
// partial records of every split of each row of several, bit for bit.
func (c tileCase) compare(t *testing.T, kernel string, other, split compute.Backend, bases, positions []int32) {
	rows, qw := len(bases), c.heads*c.hd
	if kernel == "attention_tile_H" {
		if l := kernels.AttentionLaunch(rows, c.heads, c.heads/c.kvHeads, c.hd, kernels.KVF32); !strings.HasPrefix(l.Split.Kernel, "attention_tile_") {
			t.Fatalf("%d rows run %s, not attention_tile_H", rows, l.Split.Kernel)
		}
	}
	qs := computetest.Randn(42, rows*qw)
	var outs, parts [2][]float32
	for i, b := range []compute.Backend{other, split} {
		kv, sk := c.pool(t, b)
		outs[i] = c.attend(t, b, kv, sk, qs, bases, positions)
		parts[i] = make([]float32, rows*c.heads*kernels.AttentionSplits*(c.hd+2))
		if err := b.ReadFloat32(b.(*backend).attnPart, parts[i]); err != nil {
			t.Fatal(err)
		}
	}
	computetest.SameBits(t, kernel+" against attention_split", outs[0], outs[1])
	// The records of the splits a row has, where it has more than one (the rest of the scratch
	// is never written).
	var got, want []float32
	records := 0
	for r := range rows {
		chunks := (int(positions[r]) + kernels.AttentionChunk) / kernels.AttentionChunk
		per := (chunks + kernels.AttentionSplits - 1) / kernels.AttentionSplits
		splits := (chunks + per - 1) / per
		if splits == 1 {
			continue
		}
		for h := range c.heads {
			at := (r*c.heads + h) * kernels.AttentionSplits * (c.hd + 2)
			n := splits * (c.hd + 2)
			got, want = append(got, parts[0][at:at+n]...), append(want, parts[1][at:at+n]...)
			records += splits
		}
	}
	if records == 0 {
		t.Fatal("no row of several splits")
	}
	computetest.SameBits(t, fmt.Sprintf("%d partial records", records), got, want)
}

// attend attends on b from the given rows, with queries qs ([rows][heads·hd]), over c's pool kv
// and sinks (tileCase.pool), and returns the outputs.
func (c tileCase) attend(t *testing.T, b compute.Backend, kv compute.KV, sinks compute.Tensor, qs []float32, bases, positions []int32) []float32 {
	rows, qw := len(bases), c.heads*c.hd
	up := uploader(t, b)
	dst, err := b.Alloc(compute.F32, rows, qw)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Free(dst)
	q, bt, pt := up(compute.F32, computetest.F32Bytes(qs), rows, qw), up(compute.I32, computetest.I32Bytes(bases), rows), up(compute.I32, computetest.I32Bytes(positions), rows)
	b.Attention(dst, q, kv, 0, bt, pt, sinks, rows, c.heads, float32(1/math.Sqrt(float64(c.hd))))
	out := make([]float32, rows*qw)
	if err := b.ReadFloat32(dst, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// tileSlots is the size of a tileCase's pool.
const tileSlots = 8000

// pool makes c's pool on b: random keys and values in every slot (the same on every backend), and
// a sink per head (some above a head's scores, some below) where c has them, else nil.
func (c tileCase) pool(t *testing.T, b compute.Backend) (compute.KV, compute.Tensor) {
	st := c.kvHeads * c.hd
	up := uploader(t, b)
	ks, vs := computetest.Randn(40, tileSlots*st), computetest.Randn(41, tileSlots*st)
	slotPos := make([]int32, tileSlots)
	for i := range slotPos {
		slotPos[i] = int32(i)
	}
	kv, err := b.NewKV(compute.KVSpec{Layers: 1, KVHeads: c.kvHeads, HeadDim: c.hd, Slots: tileSlots})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.FreeKV(kv) })
	b.KVWrite(kv, 0, up(compute.F32, computetest.F32Bytes(ks), tileSlots, st), up(compute.F32, computetest.F32Bytes(vs), tileSlots, st),
		up(compute.I32, computetest.I32Bytes(make([]int32, tileSlots)), tileSlots), up(compute.I32, computetest.I32Bytes(slotPos), tileSlots), tileSlots)
	if !c.sinks {
		return kv, nil
	}
	sinks := computetest.Randn(43, c.heads)
	for h := range sinks {
		sinks[h] *= 4
	}
	return kv, up(compute.F32, computetest.F32Bytes(sinks), c.heads)
}

// uploader returns a function that uploads a tensor to b, freed when the test ends.
func uploader(t *testing.T, b compute.Backend) func(dt compute.DType, data []byte, shape ...int) compute.Tensor {
	return func(dt compute.DType, data []byte, shape ...int) compute.Tensor {
		x, err := b.Upload(dt, shape, data)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Free(x) })
		return x
	}
}

// setAttentionTile sets a cuda backend's choice of attention kernel as TFD_CUDA_ATTN_TILE would
// (a test hook: the benchmarks measure the kernels against each other on one loaded model).
func setAttentionTile(b compute.Backend, mode string) { b.(*backend).attnTile = mode }

// setAttentionWarp sets a cuda backend's choice of attention_warp as TFD_CUDA_ATTN_WARP would
// (a test hook, as setAttentionTile).
func setAttentionWarp(b compute.Backend, mode string) { b.(*backend).attnWarp = mode }
