package engine

import (
	"math"
	"slices"
	"testing"

	"tfd/compute"
	"tfd/quant"
)

// TestPermuteRowsAsLlamaCpp: the writer orders llama's q/k rows as convert_hf_to_gguf.py's
// permute does (reshape(heads, 2, rows/heads/2, …).swapaxes(1, 2)), and the loader undoes it.
func TestPermuteRowsAsLlamaCpp(t *testing.T) {
	for _, tc := range []struct {
		rows, heads int
		want        []byte // the HF row each GGUF row holds
	}{
		{8, 1, []byte{0, 4, 1, 5, 2, 6, 3, 7}},
		{8, 2, []byte{0, 2, 1, 3, 4, 6, 5, 7}},
		{4, 2, []byte{0, 1, 2, 3}},
	} {
		hf := make([]byte, 0, 2*tc.rows) // two bytes a row: the row's index twice
		for r := range tc.rows {
			hf = append(hf, byte(r), byte(r))
		}
		gg, err := ggufPermuteRows(hf, tc.rows, tc.heads, true)
		if err != nil {
			t.Fatal(err)
		}
		for g, want := range tc.want {
			if gg[2*g] != want || gg[2*g+1] != want {
				t.Errorf("%d rows, %d heads: GGUF row %d holds HF row %d, want %d", tc.rows, tc.heads, g, gg[2*g], want)
			}
		}
		back, err := ggufPermuteRows(gg, tc.rows, tc.heads, false)
		if err != nil || !slices.Equal(back, hf) {
			t.Errorf("%d rows, %d heads: loading the permuted rows gives %v, %v; want %v", tc.rows, tc.heads, back, err, hf)
		}
	}
	if _, err := ggufPermuteRows(make([]byte, 6), 6, 2, false); err == nil {
		t.Error("3 rows a head were permuted; a head needs an even number")
	}
}

// TestNarrowing: F32 to F16 and BF16 (package quant's narrowing, which the GGUF writer uses) round to nearest, ties to even, as numpy does: every 16-bit
// value survives widening and narrowing, the midpoint of two neighbours goes to the even one and
// anything off it to the nearer, overflow is infinity and NaN stays NaN.
func TestNarrowing(t *testing.T) {
	for _, c := range []struct {
		name   string
		widen  func(uint16) float32
		narrow func(float32) uint16
	}{{"F16", compute.F16ToF32, quant.F32ToF16}, {"BF16", compute.BF16ToF32, quant.F32ToBF16}} {
		t.Run(c.name, func(t *testing.T) {
			for h := range 0x10000 {
				f := c.widen(uint16(h))
				if math.IsNaN(float64(f)) {
					if got := c.widen(c.narrow(f)); !math.IsNaN(float64(got)) {
						t.Fatalf("NaN %#04x narrowed to %v", h, got)
					}
					continue
				}
				if got := c.narrow(f); got != uint16(h) {
					t.Fatalf("%#04x (%v) narrowed to %#04x", h, f, got)
				}
				next := c.widen(uint16(h + 1))
				if h&0x7fff >= 0x7c00 && c.name == "F16" || h&0x7fff >= 0x7f80 || math.IsInf(float64(next), 0) || math.IsNaN(float64(next)) {
					continue // no finite neighbour above
				}
				mid := float32((float64(f) + float64(next)) / 2) // exact: one bit more than either
				even := uint16(h)
				if h&1 == 1 {
					even = uint16(h + 1)
				}
				if got := c.narrow(mid); got != even {
					t.Fatalf("midpoint of %#04x and %#04x (%v) narrowed to %#04x, want %#04x", h, h+1, mid, got, even)
				}
				below := math.Nextafter32(mid, float32(math.Copysign(0, float64(mid))))
				above := math.Nextafter32(mid, float32(math.Copysign(math.Inf(1), float64(mid))))
				if got := c.narrow(below); got != uint16(h) {
					t.Fatalf("just inside %#04x's half (%v) narrowed to %#04x", h, below, got)
				}
				if got := c.narrow(above); got != uint16(h+1) {
					t.Fatalf("just inside %#04x's half (%v) narrowed to %#04x", h+1, above, got)
				}
			}
		})
	}
	for _, tc := range []struct {
		f    float32
		want uint16
	}{{65519, 0x7bff}, {65520, 0x7c00}, {1e10, 0x7c00}, {-1e10, 0xfc00}, {0x1p-25, 0}, {0x1.000002p-25, 1}, {0x1p-26, 0}} {
		if got := quant.F32ToF16(tc.f); got != tc.want {
			t.Errorf("F32ToF16(%v) = %#04x, want %#04x", tc.f, got, tc.want)
		}
	}
}

// TestMXFP4AsGGML: a row of ggml's MXFP4 blocks, regrouped into compute.MXFP4, dequantizes to the
// values ggml's dequantize_row_mxfp4 gives (byte j of a block holds weight j low and weight j+16
// high, kvalues_mxfp4 times 2^(e−128)), and regrouping back gives the blocks byte for byte.
func TestMXFP4AsGGML(t *testing.T) {
	kvalues := [16]float32{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12} // ggml-common.h
	const rows, in = 3, 64
	const blocks = in / quant.BlockSize
	ggml := make([]byte, rows*blocks*17)
	for i := range ggml {
		ggml[i] = byte(i*37 + i/5)
	}
	want := make([]float32, rows*in)
	for r := range rows {
		for b := range blocks {
			blk := ggml[(r*blocks+b)*17:][:17]
			blk[0] = byte(120 + r + b) // a scale byte in E8M0's normal range
			d := float32(math.Ldexp(1, int(blk[0])-128))
			for j := range 16 {
				want[r*in+b*32+j] = kvalues[blk[1+j]&0xf] * d
				want[r*in+b*32+j+16] = kvalues[blk[1+j]>>4] * d
			}
		}
	}
	got, err := ggufMXFP4ToCompute(ggml, []int{rows, in})
	if err != nil {
		t.Fatal(err)
	}
	rowCodes, rowScales := quant.MXFP4RowCodes(in), quant.MXFP4RowScales(in)
	row := make([]float32, in)
	for r := range rows {
		quant.DequantizeMXFP4(row, got[r*rowCodes:], got[rows*rowCodes+r*rowScales:])
		for i, v := range row {
			if math.Float32bits(v) != math.Float32bits(want[r*in+i]) && !(v == 0 && want[r*in+i] == 0) {
				t.Fatalf("row %d weight %d: %v, ggml's %v", r, i, v, want[r*in+i])
			}
		}
	}
	if back := computeMXFP4ToGGUF(got, []int{rows, in}); !slices.Equal(back, ggml) {
		t.Error("regrouping back does not give ggml's blocks")
	}
	if _, err := ggufMXFP4ToCompute(ggml[:len(ggml)-1], []int{rows, in}); err == nil {
		t.Error("a short tensor was regrouped")
	}
}
