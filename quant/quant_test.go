package quant

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

func TestF32ToF16(t *testing.T) {
	cases := []struct {
		f    float32
		want uint16
	}{
		{0, 0}, {float32(math.Copysign(0, -1)), 0x8000},
		{1, 0x3c00}, {-2, 0xc000}, {0.5, 0x3800},
		{1.0 / 127, 0x2008},                 // 2⁻⁷·1.00787…: fraction 8.06/1024 rounds down
		{65504, 0x7bff}, {65519.99, 0x7bff}, // the largest half, and just below the tie with 2¹⁶
		{65520, 0x7c00}, {1e6, 0x7c00}, // the tie rounds to even: infinity
		{0x1p-24, 0x0001}, {0x1p-25, 0}, // the smallest subnormal; half of it ties to even (0)
		{0x1.8p-25, 0x0001}, {0x1.8p-24, 0x0002}, // 0.75 ulp up; 1.5 ulp ties to even
		{0x1.ff8p-15, 0x03ff}, {0x1.ffcp-15, 0x0400}, // the largest subnormal; the tie above it rounds up into the normals
		{1 + 0x1p-11, 0x3c00}, {1 + 0x1.8p-10, 0x3c02}, // ties to even among normals
		{float32(math.Inf(-1)), 0xfc00}, {float32(math.NaN()), 0x7e00},
	}
	for _, c := range cases {
		if got := F32ToF16(c.f); got != c.want {
			t.Errorf("F32ToF16(%g) = %#04x, want %#04x", c.f, got, c.want)
		}
	}
	for h := range 1 << 16 {
		f := F16ToF32(uint16(h))
		if f != f {
			continue
		}
		if got := F32ToF16(f); got != uint16(h) {
			t.Fatalf("F32ToF16(F16ToF32(%#04x) = %g) = %#04x", h, f, got)
		}
	}
}

// TestF32ToF16Nearest checks, over a sweep of F32 values, that the result is the nearest half
// (ties to even) by comparing it with its neighbours.
func TestF32ToF16Nearest(t *testing.T) {
	for bits := uint32(0x33000000); bits < 0x47800000; bits += 0x1235 {
		f := math.Float32frombits(bits)
		if f >= 65520 {
			break // rounds to infinity, checked above
		}
		h := F32ToF16(f)
		got := float64(F16ToF32(h))
		for _, n := range []uint16{h - 1, h + 1} {
			if n&0x7c00 == 0x7c00 {
				continue
			}
			other := float64(F16ToF32(n))
			dg, do := math.Abs(float64(f)-got), math.Abs(float64(f)-other)
			if do < dg || do == dg && h&1 == 1 {
				t.Fatalf("F32ToF16(%g) = %#04x (%g), but %#04x (%g) is nearer or the even tie", f, h, got, n, other)
			}
		}
	}
}

func TestFMA32(t *testing.T) {
	exact := func(a, b, c float32) float32 {
		x := new(big.Float).SetPrec(0).SetFloat64(float64(a))
		x.SetPrec(200).Mul(x, big.NewFloat(float64(b)))
		x.Add(x, big.NewFloat(float64(c)))
		f, _ := x.Float32()
		return f
	}
	cases := [][3]float32{
		{1, 1, 0x1p-60},               // a tie-breaker far below the product's last bit
		{1 + 0x1p-23, 1 + 0x1p-23, 0}, // the product needs more than 24 bits
		{1 + 0x1p-12, 1 + 0x1p-12, -1},
		// (1+2⁻¹²)² = 1 + 2⁻¹¹ + 2⁻²⁴ lies on a float32 tie; c = ±2⁻⁸⁰ decides it, but is lost
		// when the sum is first rounded to float64 (double rounding).
		{1 + 0x1p-12, 1 + 0x1p-12, 0x1p-80},
		{-1 - 0x1p-12, 1 + 0x1p-12, -0x1p-80},
		{1 + 0x1p-12, 1 + 0x1p-12, -0x1p-80},
		{0x1p-100, 0x1p-60, 0x1p-149}, // into the subnormals
		{3, 0x1.555556p-2, -1},
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		a := math.Float32frombits(r.Uint32() & 0xbfffffff)
		b := math.Float32frombits(r.Uint32() & 0xbfffffff)
		// c near the product, where cancellation and ties live
		c := -a * b * (1 + float32(r.IntN(5)-2)*0x1p-23)
		if r.IntN(2) == 0 {
			c = math.Float32frombits(r.Uint32())
		}
		cases = append(cases, [3]float32{a, b, c})
	}
	for _, c := range cases {
		if math.IsInf(float64(c[0]*c[1]), 0) || c[2] != c[2] || c[0] != c[0] || c[1] != c[1] || math.IsInf(float64(c[2]), 0) {
			continue
		}
		want := exact(c[0], c[1], c[2])
		if got := FMA32(c[0], c[1], c[2]); math.Float32bits(got) != math.Float32bits(want) && !(got == 0 && want == 0) {
			t.Fatalf("FMA32(%g, %g, %g) = %g, want %g", c[0], c[1], c[2], got, want)
		}
	}
}

func TestQuantizeQ8_0(t *testing.T) {
	var src [3 * BlockSize]float32
	// Block 0: amax 127, so d = 1 and the quants are the values rounded half away from zero.
	copy(src[:], []float32{-127, 0.5, -0.5, 1.5, 2.5, -2.5, 126.4, 3.49})
	// Block 1: amax 1: d = 1/127 (F16 0x2008), 1/d rounds to 127 in F32.
	for j := range BlockSize {
		src[BlockSize+j] = 1
	}
	src[BlockSize+1] = -1
	src[BlockSize+2] = 0.25 // 31.75 → 32
	// Block 2: zeros: d = 0, every quant 0.
	dst := make([]byte, RowBytesQ8_0(len(src)))
	QuantizeQ8_0(dst, src[:])

	want := make([]byte, len(dst))
	copy(want, []byte{0x00, 0x3c, 0x81, 1, 0xff, 2, 3, 0xfd, 126, 3})
	b1 := want[Q8_0BlockBytes:]
	b1[0], b1[1] = 0x08, 0x20
	for j := range BlockSize {
		b1[2+j] = 127
	}
	b1[3], b1[4] = 0x81, 32
	if string(dst) != string(want) {
		t.Fatalf("Q8_0 blocks\n got % x\nwant % x", dst, want)
	}

	back := make([]float32, len(src))
	DequantizeQ8_0(back, dst)
	if back[0] != -127 || back[1] != 1 || back[6] != 126 {
		t.Errorf("dequantized block 0 starts %v", back[:8])
	}
	if d := float32(0x1.02p-7); back[BlockSize] != 127*d || back[BlockSize+1] != -127*d || back[BlockSize+2] != 32*d {
		t.Errorf("dequantized block 1 starts %v, want 127·d, −127·d, 32·d with d = %g", back[BlockSize:BlockSize+3], d)
	}
}

func TestQuantizeQ4_0(t *testing.T) {
	var src [2 * BlockSize]float32
	// Block 0: the largest magnitude is −8, so d = 1 and nibble = trunc(x + 8.5), at most 15.
	copy(src[:], []float32{-8, 7, 7.9, -0.6, 0.4})
	src[16], src[17] = -7.5, 3
	// Block 1: 4 and −4 tie: the first wins, d = 4/−8 = −0.5, 1/d = −2.
	src[BlockSize], src[BlockSize+1] = 4, -4
	dst := make([]byte, RowBytesQ4_0(len(src)))
	QuantizeQ4_0(dst, src[:])

	want := make([]byte, len(dst))
	for i := range want {
		want[i] = 0x88 // zeros: trunc(8.5) = 8 in both nibbles
	}
	// lo nibble: element j, hi nibble: element j+16.
	copy(want, []byte{0x00, 0x3c, 0x10, 0xbf, 0x8f, 0x87, 0x88})
	copy(want[Q4_0BlockBytes:], []byte{0x00, 0xb8, 0x80, 0x8f}) // 4·−2+8.5 = 0.5 → 0; −4·−2+8.5 = 16.5 → 15
	if string(dst) != string(want) {
		t.Fatalf("Q4_0 blocks\n got % x\nwant % x", dst, want)
	}
	back := make([]float32, len(src))
	DequantizeQ4_0(back, dst)
	for j, w := range map[int]float32{0: -8, 1: 7, 2: 7, 3: -1, 4: 0, 16: -7, 17: 3, BlockSize: 4, BlockSize + 1: -3.5} {
		if back[j] != w {
			t.Errorf("dequantized element %d = %g, want %g", j, back[j], w)
		}
	}
}

func TestActivation(t *testing.T) {
	x := make([]float32, 2*BlockSize)
	copy(x, []float32{127, -63.5, 0.5, -0.51, 2.5}) // d = 1: ties go to even
	x[BlockSize+3] = float32(math.NaN())
	var a Activation
	a.Quantize(x)
	if a.D[0] != 1 || a.Q[0] != 127 || a.Q[1] != -64 || a.Q[2] != 0 || a.Q[3] != -1 || a.Q[4] != 2 {
		t.Errorf("block 0: d %g, q %v; want 1, [127 −64 0 −1 2]", a.D[0], a.Q[:5])
	}
	if a.D[1] == a.D[1] {
		t.Errorf("a block with a NaN has scale %g, want NaN", a.D[1])
	}
	if got := a.Lanes(0); got != [8]int32{127 - 64 + 0 - 1, 2} {
		t.Errorf("lanes of block 0 = %v", got)
	}
}

func TestDots(t *testing.T) {
	// Weights: block 0 with d = 0.5, quants j−16; block 1 with d = 2, quants j%5 − 2.
	w := make([]byte, RowBytesQ8_0(2*BlockSize))
	w[0], w[1] = 0x00, 0x38
	w[Q8_0BlockBytes], w[Q8_0BlockBytes+1] = 0x00, 0x40
	for j := range BlockSize {
		w[2+j] = byte(int8(j - 16))
		w[Q8_0BlockBytes+2+j] = byte(int8(j%5 - 2))
	}
	// Activations: block 0 with d = 1, quants 1; block 1 with d = 0.25, quants j.
	a := &Activation{Q: make([]int8, 2*BlockSize), D: []float32{1, 0.25}}
	for j := range BlockSize {
		a.Q[j], a.Q[BlockSize+j] = 1, int8(j)
	}
	// 0.5·Σ(j−16) + 2·0.25·Σ(j%5−2)·j = −8 − 15.5, every step exact.
	if got := DotQ8_0(w, a); got != -23.5 {
		t.Errorf("DotQ8_0 = %g, want −23.5", got)
	}

	// Q4_0: d = 1, nibbles j%16 in both halves: quants (j%16) − 8; activations as above.
	w4 := make([]byte, RowBytesQ4_0(2*BlockSize))
	for b := range 2 {
		blk := w4[b*Q4_0BlockBytes:]
		blk[0], blk[1] = 0x00, 0x3c
		for j := range BlockSize / 2 {
			blk[2+j] = byte(j) | byte(j)<<4
		}
	}
	// Block 0: Σ over two halves of (j−8) = 2·(120−128) = −16. Block 1: 0.25·Σ_j j·((j%16)−8)
	// = 0.25·(Σ_{j<16} j(j−8) + Σ_{j<16} (j+16)(j−8)) = 0.25·(280 + 152) = 108.
	if got := DotQ4_0(w4, a); got != 92 {
		t.Errorf("DotQ4_0 = %g, want 92", got)
	}

	// Affine, 4 bits, groups of 32: codes 15 − j%16 with scale −1 and bias 15 are the weights
	// j%16; with every activation 1 the dot product is 2·Σ_{j<16} j = 240.
	f := Affine{Bits: 4, GroupSize: 32}
	packed := make([]byte, f.RowBytes(BlockSize))
	for j := range BlockSize {
		PutCode(packed, j, 4, uint8(15-j%16))
	}
	one := &Activation{Q: make([]int8, BlockSize), D: []float32{1}}
	for j := range one.Q {
		one.Q[j] = 1
	}
	if got := DotAffine(f, packed, []float32{-1}, []float32{15}, one); got != 240 {
		t.Errorf("DotAffine = %g, want 240", got)
	}
}

// TestDotsClose checks the reference dot products of random rows against the float64 dot
// product of the dequantized weights and activations they stand for.
func TestDotsClose(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const n = 8 * BlockSize
	x, w := make([]float32, n), make([]float32, n)
	for i := range x {
		x[i], w[i] = float32(r.NormFloat64()), float32(r.NormFloat64()*0.05)
	}
	var a Activation
	a.Quantize(x)
	xq := make([]float32, n)
	for i := range xq {
		xq[i] = float32(a.Q[i]) * a.D[i/BlockSize]
	}
	want := func(wq []float32) float64 {
		var s float64
		for i := range wq {
			s += float64(wq[i]) * float64(xq[i])
		}
		return s
	}
	check := func(name string, got float32, wq []float32) {
		t.Helper()
		if d := math.Abs(float64(got) - want(wq)); d > 1e-5 {
			t.Errorf("%s = %g, dequantized dot %g: off by %g", name, got, want(wq), d)
		}
	}
	wq := make([]float32, n)
	q8 := make([]byte, RowBytesQ8_0(n))
	QuantizeQ8_0(q8, w)
	DequantizeQ8_0(wq, q8)
	check("DotQ8_0", DotQ8_0(q8, &a), wq)
	q4 := make([]byte, RowBytesQ4_0(n))
	QuantizeQ4_0(q4, w)
	DequantizeQ4_0(wq, q4)
	check("DotQ4_0", DotQ4_0(q4, &a), wq)
	for _, bits := range []int{2, 3, 4, 5, 6, 8} {
		for _, gs := range []int{32, 64, 128} {
			f := Affine{Bits: bits, GroupSize: gs}
			packed := make([]byte, f.RowBytes(n))
			scales, biases := make([]float32, f.Groups(n)), make([]float32, f.Groups(n))
			QuantizeAffine(f, packed, scales, biases, w)
			DequantizeAffine(f, wq, packed, scales, biases)
			check("DotAffine", DotAffine(f, packed, scales, biases, &a), wq)
		}
	}
}

func TestAffinePacking(t *testing.T) {
	// 6 bits: four codes in three bytes, lowest bits first (MLX's extract_bits reads them so).
	packed := make([]byte, 3)
	for i, q := range []uint8{0x3f, 0x01, 0x2a, 0x15} {
		PutCode(packed, i, 6, q)
	}
	if want := []byte{0x7f, 0xa0, 0x56}; string(packed) != string(want) {
		t.Errorf("6-bit codes packed as % x, want % x", packed, want)
	}
	r := rand.New(rand.NewPCG(5, 6))
	for _, bits := range []int{2, 3, 4, 5, 6, 8} {
		codes := make([]uint8, 128)
		packed := make([]byte, 128*bits/8)
		for i := range codes {
			codes[i] = uint8(r.IntN(1 << bits))
			PutCode(packed, i, bits, codes[i])
		}
		for i, q := range codes {
			if got := Code(packed, i, bits); got != q {
				t.Fatalf("%d bits: code %d = %d, want %d", bits, i, got, q)
			}
		}
	}
}

func TestQuantizeAffine(t *testing.T) {
	f := Affine{Bits: 4, GroupSize: 32}
	src := make([]float32, 64)
	for j := range BlockSize {
		src[j] = float32(j % 16)     // |min| ≤ |max|: the scale is negative, the bias the max
		src[32+j] = -float32(j % 16) // |min| > |max|: the scale is positive, the bias the min
	}
	packed := make([]byte, f.RowBytes(64))
	scales, biases := make([]float32, 2), make([]float32, 2)
	QuantizeAffine(f, packed, scales, biases, src)
	if scales[0] != -1 || biases[0] != 15 || scales[1] != 1 || biases[1] != -15 {
		t.Errorf("scales %v, biases %v; want [−1 1], [15 −15]", scales, biases)
	}
	// Codes 15 − j%16 in both groups, eight to a little-endian word.
	words := []uint32{0x89abcdef, 0x01234567}
	for i := range 8 {
		w := uint32(packed[4*i]) | uint32(packed[4*i+1])<<8 | uint32(packed[4*i+2])<<16 | uint32(packed[4*i+3])<<24
		if w != words[i%2] {
			t.Errorf("word %d = %#08x, want %#08x", i, w, words[i%2])
		}
	}
	back := make([]float32, 64)
	DequantizeAffine(f, back, packed, scales, biases)
	for i := range back {
		if back[i] != src[i] {
			t.Fatalf("dequantized element %d = %g, want %g", i, back[i], src[i])
		}
	}
}
