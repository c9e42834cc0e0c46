package quant

import (
	"fmt"
	"math"
)

// Activation is one row of activations quantized for the dot products: per block of 32 values,
// an F32 scale D and 32 int8 quants Q, the value j being D·Q[j]. The scale is the block's
// largest |x| over 127, kept as F32 (not rounded to F16 as ggml's Q8_0 rounds it), and each quant
// x·(1/D) rounded to the nearest integer, ties to even (one SIMD conversion does it; ggml's
// quantize_row_q8_0_ref rounds ties away from zero). A block holding a NaN or an infinity gets a
// NaN scale, so that the dot products it enters are NaN rather than quietly finite.
type Activation struct {
	Q []int8
	D []float32
}

// Quantize quantizes the row x, len(x) a multiple of BlockSize, into a, reusing a's memory.
func (a *Activation) Quantize(x []float32) {
	if len(x)%BlockSize != 0 {
		panic(fmt.Sprintf("quant: an activation row of %d values: want a multiple of %d", len(x), BlockSize))
	}
	n := len(x) / BlockSize
	a.Q, a.D = grow(a.Q, len(x)), grow(a.D, n)
	for b := range n {
		a.D[b] = QuantizeBlock((*[BlockSize]int8)(a.Q[b*BlockSize:]), (*[BlockSize]float32)(x[b*BlockSize:]))
	}
}

// QuantizeBlock quantizes one block of activations into q and returns its scale, as
// Activation.Quantize does.
func QuantizeBlock(q *[BlockSize]int8, x *[BlockSize]float32) float32 {
	var amax float32
	for _, v := range x {
		a := abs32(v)
		if !(a <= math.MaxFloat32) { // NaN or infinite
			*q = [BlockSize]int8{}
			return float32(math.NaN())
		}
		amax = max(amax, a)
	}
	d := amax / 127
	var id float32
	if d != 0 {
		id = 1 / d
	}
	for j, v := range x {
		q[j] = int8(math.RoundToEven(float64(v * id))) // |v·id| ≤ 127 (at most 127 plus rounding)
	}
	return d
}

// Lanes returns the lane sums t[k] = Q[4k]+…+Q[4k+3] of block b, which the bias of an affine
// group meets (see the package doc).
func (a *Activation) Lanes(b int) [8]int32 {
	var t [8]int32
	q := a.Q[b*BlockSize : (b+1)*BlockSize]
	for k := range t {
		t[k] = int32(q[4*k]) + int32(q[4*k+1]) + int32(q[4*k+2]) + int32(q[4*k+3])
	}
	return t
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}
