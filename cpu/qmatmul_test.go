package cpu

import (
	"fmt"
	"math"
	"testing"

	"tfd/compute"
	"tfd/compute/computetest"
	"tfd/quant"
)

// forQuantKernels runs f once with each kind of quantized kernel this machine has: pure Go, AVX2,
// AVX-512 VNNI, NEON with widening multiplies, NEON with SDOT.
func forQuantKernels(t *testing.T, f func(t *testing.T)) {
	savedAsm, savedVNNI, savedNEON, savedSDOT := useQuantAsm, useVNNI, useNEON, useSDOT
	defer func() { useQuantAsm, useVNNI, useNEON, useSDOT = savedAsm, savedVNNI, savedNEON, savedSDOT }()
	type kind struct {
		name                  string
		asm, vnni, neon, sdot bool
	}
	kinds := []kind{{name: "go"}}
	if asmSupported && hasF16C {
		kinds = append(kinds, kind{name: "avx2", asm: true})
	}
	if asmSupported && hasF16C && hasVNNI {
		kinds = append(kinds, kind{name: "vnni", asm: true, vnni: true})
	}
	if hasNEON {
		kinds = append(kinds, kind{name: "neon", neon: true})
	}
	if hasNEON && hasSDOT {
		kinds = append(kinds, kind{name: "sdot", neon: true, sdot: true})
	}
	for _, k := range kinds {
		useQuantAsm, useVNNI, useNEON, useSDOT = k.asm, k.vnni, k.neon, k.sdot
		t.Run(k.name, f)
	}
}

// qmatrix is a quantized matrix as a checkpoint holds it, with its reference dot product.
type qmatrix struct {
	dtype   compute.DType
	out, in int
	data    []byte // as Upload takes it
	dot     func(r int, a *quant.Activation) float32
	row     func(r int) []float32 // row r dequantized
}

// quantized quantizes out×in random weights (one row in eight scaled up, so blocks differ in
// scale) into dtype: Q8_0, Q4_0 or affine.
func quantized(t testing.TB, dtype compute.DType, out, in int, seed uint64) qmatrix {
	t.Helper()
	w := computetest.Randn(seed, out*in)
	for r := 0; r < out; r += 8 {
		for i := range in {
			w[r*in+i] *= 40
		}
	}
	m := qmatrix{dtype: dtype, out: out, in: in}
	switch dtype {
	case compute.Q8_0, compute.Q4_0:
		quantize, dequantize, dot, rowBytes := quant.QuantizeQ8_0, quant.DequantizeQ8_0, quant.DotQ8_0, quant.RowBytesQ8_0(in)
		if dtype == compute.Q4_0 {
			quantize, dequantize, dot, rowBytes = quant.QuantizeQ4_0, quant.DequantizeQ4_0, quant.DotQ4_0, quant.RowBytesQ4_0(in)
		}
		m.data = make([]byte, out*rowBytes)
		for r := range out {
			quantize(m.data[r*rowBytes:(r+1)*rowBytes], w[r*in:(r+1)*in])
		}
		m.dot = func(r int, a *quant.Activation) float32 { return dot(m.data[r*rowBytes:(r+1)*rowBytes], a) }
		m.row = func(r int) []float32 {
			v := make([]float32, in)
			dequantize(v, m.data[r*rowBytes:(r+1)*rowBytes])
			return v
		}
	case compute.Q4_K, compute.Q6_K:
		quantize, dequantize, dot, rowBytes := quant.QuantizeQ4_K, quant.DequantizeQ4_K, quant.DotQ4_K, quant.RowBytesQ4_K(in)
		if dtype == compute.Q6_K {
			quantize, dequantize, dot, rowBytes = quant.QuantizeQ6_K, quant.DequantizeQ6_K, quant.DotQ6_K, quant.RowBytesQ6_K(in)
		}
		m.data = make([]byte, out*rowBytes)
		for r := range out {
			quantize(m.data[r*rowBytes:(r+1)*rowBytes], w[r*in:(r+1)*in])
		}
		m.dot = func(r int, a *quant.Activation) float32 { return dot(m.data[r*rowBytes:(r+1)*rowBytes], a) }
		m.row = func(r int) []float32 {
			v := make([]float32, in)
			dequantize(v, m.data[r*rowBytes:(r+1)*rowBytes])
			return v
		}
	default:
		f, scaleType, _ := dtype.AffineParams()
		rowBytes, groups := f.RowBytes(in), f.Groups(in)
		packed := make([]byte, out*rowBytes)
		scales, biases := make([]float32, out*groups), make([]float32, out*groups)
		for r := range out {
			quant.QuantizeAffine(f, packed[r*rowBytes:(r+1)*rowBytes], scales[r*groups:(r+1)*groups], biases[r*groups:(r+1)*groups], w[r*in:(r+1)*in])
		}
		// The checkpoint keeps scales and biases in the model's dtype, as MLX does.
		m.data = append(packed, computetest.Encode(scaleType, scales)...)
		m.data = append(m.data, computetest.Encode(scaleType, biases)...)
		m.dot = func(r int, a *quant.Activation) float32 {
			g := r * groups
			return quant.DotAffine(f, packed[r*rowBytes:(r+1)*rowBytes], scales[g:g+groups], biases[g:g+groups], a)
		}
		m.row = func(r int) []float32 {
			v := make([]float32, in)
			g := r * groups
			quant.DequantizeAffine(f, v, packed[r*rowBytes:(r+1)*rowBytes], scales[g:g+groups], biases[g:g+groups])
			return v
		}
	}
	return m
}

func (m qmatrix) upload(t testing.TB, b *backend) *tensor {
	t.Helper()
	w, err := b.Upload(m.dtype, []int{m.out, m.in}, m.data)
	if err != nil {
		t.Fatal(err)
	}
	return w.(*tensor)
}

// want returns the reference result of MatMul: each row of x quantized, each output quant's dot
// product plus the bias.
func (m qmatrix) want(x, bias []float32, rows int) []float32 {
	out := make([]float32, rows*m.out)
	var a quant.Activation
	for r := range rows {
		a.Quantize(x[r*m.in : (r+1)*m.in])
		for o := range m.out {
			v := m.dot(o, &a)
			if bias != nil {
				v += bias[o]
			}
			out[r*m.out+o] = v
		}
	}
	return out
}

func quantDTypes(t testing.TB) []compute.DType {
	dts := []compute.DType{compute.Q8_0, compute.Q4_0, compute.Q4_K, compute.Q6_K}
	for _, p := range []struct {
		bits, gs int
		sdt      compute.DType
	}{{4, 32, compute.BF16}, {4, 64, compute.F16}, {4, 128, compute.BF16}, {8, 32, compute.F16}, {8, 128, compute.BF16}, {6, 64, compute.BF16}, {3, 32, compute.F32}} {
		d, err := compute.Affine(p.bits, p.gs, p.sdt)
		if err != nil {
			t.Fatal(err)
		}
		dts = append(dts, d)
	}
	return dts
}

// TestQuantMatMulMatchesReference checks MatMul with quantized weights against package quant,
// bit for bit, with every kernel, for row counts that use the four-row, two-row and one-row
// kernels together and column counts that leave a partial group (of eight or four).
func TestQuantMatMulMatchesReference(t *testing.T) {
	forQuantKernels(t, func(t *testing.T) {
		for _, dt := range quantDTypes(t) {
			// 32 and 96: one and three blocks, an odd number (Q4_0 pairs blocks); 64, 128 and 160:
			// two, four and five, about the four blocks the four-row kernels compute scales ahead.
			for _, c := range []struct{ out, in, rows int }{{1, 128, 1}, {7, 128, 2}, {13, 384, 3}, {64, 256, 17}, {5, 1024, 1}, {6, 32, 3}, {9, 96, 2}, {9, 96, 6}, {11, 160, 4}, {3, 32, 7}, {6, 64, 4}, {5, 128, 8}} {
				if f, _, ok := dt.AffineParams(); ok && c.in%f.GroupSize != 0 {
					continue
				}
				if (dt == compute.Q4_K || dt == compute.Q6_K) && c.in%quant.SuperBlockSize != 0 {
					continue
				}
				t.Run(name(dt, c.out, c.in, c.rows), func(t *testing.T) {
					b := newTest(t)
					m := quantized(t, dt, c.out, c.in, uint64(c.out*c.in))
					w := m.upload(t, b)
					xs := computetest.Randn(7, c.rows*c.in)
					bias := computetest.Randn(8, c.out)
					dst := ften(t, b, nil, c.rows, c.out)
					b.MatMul(dst, ften(t, b, xs, c.rows, c.in), w, ften(t, b, bias, c.out), c.rows)
					computetest.SameBits(t, "MatMul", dst.f, m.want(xs, bias, c.rows))
					// Without a bias, whole groups of rows go straight to dst.
					b.MatMul(dst, ften(t, b, xs, c.rows, c.in), w, nil, c.rows)
					computetest.SameBits(t, "MatMul without a bias", dst.f, m.want(xs, nil, c.rows))
				})
			}
		}
	})
}

// TestQuantMatMulInvariance checks that a row's bits do not depend on the rows beside it or the
// number of goroutines, with every kernel.
func TestQuantMatMulInvariance(t *testing.T) {
	forQuantKernels(t, func(t *testing.T) {
		for _, dt := range []compute.DType{compute.Q8_0, compute.Q4_0, compute.Q4_K, compute.Q6_K, quantDTypes(t)[4]} {
			t.Run(dt.String(), func(t *testing.T) {
				b := newTest(t)
				const out, in = 301, 512
				w := quantized(t, dt, out, in, 3).upload(t, b)
				row := computetest.Randn(4, in)
				invariant(t, func(rows, at int) []float32 {
					x := ften(t, b, batchRows(5, rows, in, at, row), rows, in)
					dst := ften(t, b, nil, rows, out)
					b.MatMul(dst, x, w, nil, rows)
					return dst.f[at*out : (at+1)*out]
				})
			})
		}
	})
}

func TestQuantEmbed(t *testing.T) {
	for _, dt := range quantDTypes(t) {
		t.Run(dt.String(), func(t *testing.T) {
			b := newTest(t)
			m := quantized(t, dt, 9, 256, 11)
			table := m.upload(t, b)
			tokens := []int32{8, 0, 5, 5}
			x := ften(t, b, nil, len(tokens), m.in)
			b.Embed(x, table, iten(t, b, tokens, len(tokens)), len(tokens))
			for r, id := range tokens {
				computetest.SameBits(t, name("row", r), x.f[r*m.in:(r+1)*m.in], m.row(int(id)))
			}
		})
	}
}

func TestQuantUploadRefusesBadShapes(t *testing.T) {
	b := newTest(t)
	if _, err := b.Upload(compute.Q8_0, []int{2, 48}, make([]byte, 2*48)); err == nil {
		t.Error("Upload of Q8_0 rows of 48 elements succeeded")
	}
	if _, err := b.Upload(compute.Q4_0, []int{4, 32}, make([]byte, 4*quant.Q4_0BlockBytes-1)); err == nil {
		t.Error("Upload of a short Q4_0 tensor succeeded")
	}
}

// TestQuantNaN checks that a NaN activation makes its row's outputs NaN (the block's scale is
// NaN) rather than a finite number, with every kernel.
func TestQuantNaN(t *testing.T) {
	forQuantKernels(t, func(t *testing.T) {
		b := newTest(t)
		m := quantized(t, compute.Q8_0, 8, 64, 1)
		w := m.upload(t, b)
		xs := computetest.Randn(2, 2*64)
		xs[64+40] = float32(math.NaN())
		dst := ften(t, b, nil, 2, 8)
		b.MatMul(dst, ften(t, b, xs, 2, 64), w, nil, 2)
		for o := range 8 {
			if math.IsNaN(float64(dst.f[o])) || !math.IsNaN(float64(dst.f[8+o])) {
				t.Fatalf("outputs %v: want row 0 finite, row 1 NaN", dst.f)
			}
		}
	})
}

// TestQuantizeActs checks the assembly quantizer of activations against quantizeBlock's Go, field
// for field, on blocks that probe its edges: ties (which go to even), zeros, subnormals, the
// largest floats, an infinity and a NaN.
func TestQuantizeActs(t *testing.T) {
	if !asmSupported {
		t.Skip("no assembly kernels here")
	}
	blocks := [][]float32{computetest.Randn(1, 32), make([]float32, 32)}
	ties := make([]float32, 32)
	for j := range ties {
		ties[j] = float32(j) - 15.5 // with 127 below: d = 1, every value a tie
	}
	ties[31] = 127
	blocks = append(blocks, ties)
	for _, special := range []float32{float32(math.Inf(1)), float32(math.NaN()), 1e-44, math.MaxFloat32, float32(math.Copysign(0, -1))} {
		b := computetest.Randn(2, 32)
		b[7] = special
		blocks = append(blocks, b)
	}
	tiny := make([]float32, 32)
	tiny[3], tiny[9] = 1e-44, -3e-45
	blocks = append(blocks, tiny)
	var x []float32
	for _, b := range blocks {
		x = append(x, b...)
	}
	nb := len(blocks)
	got, want := make([]actBlock, nb), make([]actBlock, nb)
	quantizeActsAVX2(&got[0], &x[0], nb)
	for b := range want {
		quantizeBlock(&want[b], (*[32]float32)(x[32*b:]))
	}
	for b := range got {
		g, w := got[b], want[b]
		if g.q != w.q || g.m8 != w.m8 || g.m128 != w.m128 || math.Float32bits(g.d) != math.Float32bits(w.d) && !(g.d != g.d && w.d != w.d) {
			t.Errorf("block %d (%v…):\n got d %g q %v m8 %v\nwant d %g q %v m8 %v", b, x[32*b:32*b+4], g.d, g.q, g.m8, w.d, w.q, w.m8)
		}
	}
}

// TestQuantMatMulsMatchMatMul checks that MatMuls gives each matrix MatMul's bits, with every
// kernel: three quantized matrices of different widths (one with a bias, one absent in turn), and
// a set that mixes in an F32 matrix, which MatMuls runs one by one.
func TestQuantMatMulsMatchMatMul(t *testing.T) {
	forQuantKernels(t, func(t *testing.T) {
		for _, dt := range quantDTypes(t) {
			const in = 256
			outs := [3]int{37, 8, 130}
			b := newTest(t)
			var w [3]compute.Tensor
			for m, out := range outs {
				w[m] = quantized(t, dt, out, in, uint64(10+m)).upload(t, b)
			}
			f32w := computetest.UploadF32(t, b, computetest.Randn(20, outs[2]*in), outs[2], in)
			bias := [3]compute.Tensor{nil, ften(t, b, computetest.Randn(21, outs[1]), outs[1]), nil}
			for _, c := range []struct {
				name string
				w    [3]compute.Tensor
			}{
				{"all", w},
				{"no k", [3]compute.Tensor{w[0], nil, w[2]}},
				{"gate and up", [3]compute.Tensor{w[0], w[1], nil}},
				{"with F32", [3]compute.Tensor{w[0], w[1], f32w}},
			} {
				for _, rows := range []int{1, 5, 17} {
					t.Run(fmt.Sprintf("%v/%s/%d rows", dt, c.name, rows), func(t *testing.T) {
						x := ften(t, b, computetest.Randn(uint64(rows), rows*in), rows, in)
						var got, want [3]*tensor
						for m, out := range outs {
							got[m], want[m] = ften(t, b, nil, rows, out), ften(t, b, nil, rows, out)
						}
						b.MatMuls([3]compute.Tensor{got[0], got[1], got[2]}, x, c.w, bias, rows)
						for m := range outs {
							if c.w[m] == nil {
								continue
							}
							b.MatMul(want[m], x, c.w[m], bias[m], rows)
							computetest.SameBits(t, fmt.Sprintf("matrix %d", m), got[m].f, want[m].f)
						}
					})
				}
			}
		}
	})
}
