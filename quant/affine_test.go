package quant

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

// mlxQuantize is a reference of MLX's affine quantization written from MLX's own description and
// its CPU kernel (mlx/backend/cpu/quantized.cpp, quantize), kept apart from QuantizeAffine's
// code: per group, α = max, β = min, s = (α − β)/(2^bits − 1) (at least 1e-7); the edge of larger
// magnitude becomes exact (s = edge/rint(edge/s), β = edge, s negative when the edge is α);
// ŵ = rint((w − β)/s) clamped to [0, 2^bits − 1]. It packs the codes as MLX writes them: for 2,
// 4 and 8 bits, 32/bits codes a little-endian uint32, the first in the lowest bits; for 3, 5 and 6
// bits, 8, 8 and 4 codes gathered the same way into a uint64 and written as its low 3, 5 and 3
// bytes.
func mlxQuantize(bits, groupSize int, w []float32) (packed []byte, scales, biases []float32) {
	perPack, packBytes := 32/bits, 4
	switch bits {
	case 3, 5:
		perPack, packBytes = 8, bits
	case 6:
		perPack, packBytes = 4, 3
	}
	bins := float32(int(1)<<bits - 1)
	for g := 0; g < len(w); g += groupSize {
		x := w[g : g+groupSize]
		lo, hi := float32(math.Inf(1)), float32(math.Inf(-1))
		for _, v := range x {
			lo, hi = min(lo, v), max(hi, v)
		}
		s := max((hi-lo)/bins, 1e-7)
		edge := lo
		if !(math.Abs(float64(lo)) > math.Abs(float64(hi))) {
			s, edge = -s, hi
		}
		var b float32
		if q0 := float32(math.RoundToEven(float64(edge / s))); q0 != 0 {
			s, b = edge/q0, edge
		}
		for p := 0; p < groupSize; p += perPack {
			var word uint64
			for k := range perPack {
				q := float32(math.RoundToEven(float64((x[p+k] - b) / s)))
				q = min(max(q, 0), bins)
				word |= uint64(q) << (k * bits)
			}
			packed = binary.LittleEndian.AppendUint64(packed, word)[:len(packed)+packBytes]
		}
		scales, biases = append(scales, s), append(biases, b)
	}
	return packed, scales, biases
}

func bins(bits int) float32 { return float32(int(1)<<bits - 1) }

// mlxCode reads code i back as MLX's kernels do: the pack holding it as one little-endian number,
// shifted and masked.
func mlxCode(packed []byte, i, bits int) uint8 {
	perPack, packBytes := 32/bits, 4
	switch bits {
	case 3, 5:
		perPack, packBytes = 8, bits
	case 6:
		perPack, packBytes = 4, 3
	}
	var buf [8]byte
	copy(buf[:], packed[i/perPack*packBytes:i/perPack*packBytes+packBytes])
	return uint8(binary.LittleEndian.Uint64(buf[:])>>(i%perPack*bits)) & (1<<bits - 1)
}

// TestAffineMatchesMLX checks QuantizeAffine, Code and DequantizeAffine against the reference
// above for every width and group size MLX defines, on groups that probe the edge rule (random
// ones, all positive, all negative, constant, zero, |min| = |max|) and the rounding of ties.
func TestAffineMatchesMLX(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	const groups = 7
	for _, bits := range []int{2, 3, 4, 5, 6, 8} {
		for _, gs := range []int{32, 64, 128} {
			f := Affine{Bits: bits, GroupSize: gs}
			n := groups * gs
			w := make([]float32, n)
			for i := range w {
				w[i] = float32(r.NormFloat64() * 0.02)
			}
			for j := range gs {
				w[gs+j] = abs32(w[gs+j]) + 0.01  // all positive
				w[2*gs+j] = -abs32(w[2*gs+j])    // all negative
				w[3*gs+j] = 0.25                 // constant
				w[4*gs+j] = 0                    // zero
				w[5*gs+j] = float32(j%3-1) * 0.5 // −0.5, 0, 0.5: |min| = |max|
				// 0 and 2^bits − 1 make the scale −1 and the bias 2^bits − 1, so the others
				// give codes 0.5, 1.5, 2.5 before rounding: ties, which go to even.
				w[6*gs+j] = bins(bits) - float32(j%3) - 0.5
			}
			w[6*gs], w[6*gs+1] = 0, bins(bits)
			wantPacked, wantScales, wantBiases := mlxQuantize(bits, gs, w)
			packed := make([]byte, f.RowBytes(n))
			scales, biases := make([]float32, f.Groups(n)), make([]float32, f.Groups(n))
			QuantizeAffine(f, packed, scales, biases, w)
			if string(packed) != string(wantPacked) {
				t.Errorf("%d bits, groups of %d: packed codes differ from MLX's", bits, gs)
			}
			for g := range scales {
				if math.Float32bits(scales[g]) != math.Float32bits(wantScales[g]) || math.Float32bits(biases[g]) != math.Float32bits(wantBiases[g]) {
					t.Errorf("%d bits, groups of %d, group %d: scale %g bias %g, MLX %g %g", bits, gs, g, scales[g], biases[g], wantScales[g], wantBiases[g])
				}
			}
			back := make([]float32, n)
			DequantizeAffine(f, back, packed, scales, biases)
			for i := range n {
				q := mlxCode(wantPacked, i, bits)
				if got := Code(packed, i, bits); got != q {
					t.Fatalf("%d bits: code %d = %d, MLX reads %d", bits, i, got, q)
				}
				// MLX's dequantization, s·ŵ + β, the product rounded before the sum.
				s, b := wantScales[i/gs], wantBiases[i/gs]
				if want := float32(s*float32(q)) + b; back[i] != want {
					t.Fatalf("%d bits, groups of %d: element %d dequantizes to %g, MLX's formula %g", bits, gs, i, back[i], want)
				}
			}
		}
	}
}
