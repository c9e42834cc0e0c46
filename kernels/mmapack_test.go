package kernels

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// TestPackMMA checks the packed order three ways: every element lands where MMAPackedAt says,
// the padding rows are zeros, and bands packed a few at a time give the bytes of the whole.
func TestPackMMA(t *testing.T) {
	for _, c := range []struct{ n, k int }{{1, 32}, {16, 64}, {37, 96}, {50, 320}} {
		src := make([]byte, 2*c.n*c.k)
		for i := range c.n * c.k {
			binary.LittleEndian.PutUint16(src[2*i:], uint16(i*2654435761>>7)) // distinct enough to catch a swap
		}
		dst := make([]byte, 2*MMAPackedLen(c.n, c.k))
		for i := range dst {
			dst[i] = 0xee // padding must be written, not left
		}
		PackMMA(dst, src, c.n, c.k)
		seen := make([]bool, MMAPackedLen(c.n, c.k))
		for o := range c.n {
			for i := range c.k {
				at := MMAPackedAt(o, i, c.k)
				if seen[at] {
					t.Fatalf("%d×%d: element %d of row %d lands on %d, taken already", c.n, c.k, i, o, at)
				}
				seen[at] = true
				if got, want := binary.LittleEndian.Uint16(dst[2*at:]), binary.LittleEndian.Uint16(src[2*(o*c.k+i):]); got != want {
					t.Fatalf("%d×%d: packed[%d] = %#x, want row %d element %d, %#x", c.n, c.k, at, got, o, i, want)
				}
			}
		}
		for at, s := range seen {
			if !s && binary.LittleEndian.Uint16(dst[2*at:]) != 0 {
				t.Fatalf("%d×%d: padding element %d is %#x, want 0", c.n, c.k, at, binary.LittleEndian.Uint16(dst[2*at:]))
			}
		}
		// Band by band, as the CUDA backend packs a large matrix.
		var parts []byte
		for b0 := 0; b0*MMABandRows < c.n; b0++ {
			rows := min(MMABandRows, c.n-b0*MMABandRows)
			part := make([]byte, 2*MMAPackedLen(rows, c.k))
			PackMMA(part, src[2*b0*MMABandRows*c.k:2*(b0*MMABandRows+rows)*c.k], rows, c.k)
			parts = append(parts, part...)
		}
		if !bytes.Equal(parts, dst) {
			t.Errorf("%d×%d: packed a band at a time differs from packed whole", c.n, c.k)
		}
	}
}

// TestPackMMARefusesRaggedRows checks that a row length the packed order cannot hold panics.
func TestPackMMARefusesRaggedRows(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("PackMMA of rows 40 long did not panic")
		}
	}()
	PackMMA(make([]byte, 2*MMAPackedLen(2, 40)), make([]byte, 2*2*40), 2, 40)
}

// BenchmarkPackMMA measures the host's packing of one 8B-shaped 4,096 × 4,096 BF16 matrix (the
// CUDA backend packs every matrix as it uploads, a few bands at a time over the CPUs).
func BenchmarkPackMMA(b *testing.B) {
	n, k := 4096, 4096
	src := make([]byte, 2*n*k)
	for i := range src {
		src[i] = byte(i * 131)
	}
	dst := make([]byte, 2*MMAPackedLen(n, k))
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		PackMMA(dst, src, n, k)
	}
}
