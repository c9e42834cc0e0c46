package quant

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"testing"
)

// kquantCase is one K-quant format with the functions under test.
type kquantCase struct {
	name       string
	rowBytes   func(int) int
	quantize   func([]byte, []float32)
	dequantize func([]float32, []byte)
	dot        func([]byte, *Activation) float32
}

var kquantCases = []kquantCase{
	{"q4_k", RowBytesQ4_K, QuantizeQ4_K, DequantizeQ4_K, DotQ4_K},
	{"q6_k", RowBytesQ6_K, QuantizeQ6_K, DequantizeQ6_K, DotQ6_K},
}

// readF32 reads a little-endian F32 file of testdata.
func readF32(t *testing.T, name string) []float32 {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	v := make([]float32, len(b)/4)
	WidenF32(v, b)
	return v
}

// TestKQuantsAgainstGGML checks the quantizers against the blocks ggml's quantize_row_q4_K_ref and
// quantize_row_q6_K_ref made from the same rows, and the dequantizers against gguf-py's
// arithmetic on those blocks, bit for bit (testdata/kquants.py made the files).
func TestKQuantsAgainstGGML(t *testing.T) {
	x := readF32(t, "kquants-x.f32")
	const rows = 8
	n := len(x) / rows
	for _, c := range kquantCases {
		t.Run(c.name, func(t *testing.T) {
			want, err := os.ReadFile("testdata/" + c.name + ".bin")
			if err != nil {
				t.Fatal(err)
			}
			wantDeq := readF32(t, c.name+"-dequant.f32")
			rb := c.rowBytes(n)
			got := make([]byte, rb)
			deq := make([]float32, n)
			for r := range rows {
				c.quantize(got, x[r*n:(r+1)*n])
				if blk := want[r*rb : (r+1)*rb]; !bytes.Equal(got, blk) {
					i := 0
					for got[i] == blk[i] {
						i++
					}
					t.Errorf("row %d: byte %d is %#x, ggml's %#x", r, i, got[i], blk[i])
				}
				c.dequantize(deq, want[r*rb:(r+1)*rb])
				for i, v := range deq {
					if w := wantDeq[r*n+i]; math.Float32bits(v) != math.Float32bits(w) {
						t.Errorf("row %d element %d dequantizes to %g, gguf-py's %g", r, i, v, w)
						break
					}
				}
			}
		})
	}
}

// TestKQuantLayouts checks each field of the layouts on hand-made blocks: a scale, a min and a
// quant set at a known place dequantize to the value the layout gives them.
func TestKQuantLayouts(t *testing.T) {
	// Q4_K: d = 1, dmin = 0.5; sub-block 5 with sc = 37 (low nibble 5 in byte 9, top bits 2 in
	// byte 1) and m = 44 (high nibble 12 in byte 9, top bits 2 in byte 5); its element 7 is in
	// run 2 (sub-blocks 4, 5), the high nibble of byte 7, set to 9: 37·9 − 0.5·44 = 311.
	q4 := make([]byte, Q4_KBlockBytes)
	binary.LittleEndian.PutUint16(q4, 0x3c00)
	binary.LittleEndian.PutUint16(q4[2:], 0x3800)
	q4[4+9] = 5 | 12<<4
	q4[4+1] = 2 << 6
	q4[4+5] = 2 << 6
	q4[16+64+7] = 9 << 4
	v := make([]float32, SuperBlockSize)
	DequantizeQ4_K(v, q4)
	if v[5*32+7] != 311 {
		t.Errorf("Q4_K element 167 = %g, want 311", v[5*32+7])
	}
	if sc, m := Q4_KScaleMin(q4[4:16], 1); sc != 0 || m != 0 {
		t.Errorf("Q4_K sub-block 1: scale %d, min %d; the top bits of bytes 1 and 5 belong to sub-block 5", sc, m)
	}

	// Q6_K: d = 0.25, scale 13 = −3 at element 200 (half 1, element 72: the high nibble of
	// ql[64+8], bits 4…5 of qh[32+8]); q = 0b10_0110 = 38: 0.25·(−3)·(38 − 32) = −4.5.
	q6 := make([]byte, Q6_KBlockBytes)
	binary.LittleEndian.PutUint16(q6[208:], 0x3400)
	q6[192+200/16] = byte(0xfd)
	q6[64+8] = 6 << 4
	q6[128+32+8] = 2 << 4
	DequantizeQ6_K(v, q6)
	if v[200] != -4.5 {
		t.Errorf("Q6_K element 200 = %g, want −4.5", v[200])
	}
	// Element 201 shares the scale, its bits are 0 (q − 32 = −32); element 191 has scale 0.
	if v[201] != 24 || v[191] != 0 {
		t.Errorf("Q6_K elements 201 and 191 = %g, %g: want 24 and 0", v[201], v[191])
	}
}

// TestKQuantDotsClose checks the dot products against the dequantized weights times the
// quantized activations in float64: they differ only by the rounding of the scales' products
// and of the lanes' sums.
func TestKQuantDotsClose(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	const n = 2 * SuperBlockSize
	x, w := make([]float32, n), make([]float32, n)
	for i := range x {
		x[i], w[i] = float32(r.NormFloat64()), float32(r.NormFloat64()*0.05)
	}
	w[3] = 1 // a large weight in a sub-block of otherwise small ones
	var a Activation
	a.Quantize(x)
	wq := make([]float32, n)
	for _, c := range kquantCases {
		q := make([]byte, c.rowBytes(n))
		c.quantize(q, w)
		c.dequantize(wq, q)
		var want, mag float64
		for i := range wq {
			p := float64(wq[i]) * float64(a.Q[i]) * float64(a.D[i/BlockSize])
			want, mag = want+p, mag+math.Abs(p)
		}
		if got := c.dot(q, &a); math.Abs(float64(got)-want) > 1e-6*mag {
			t.Errorf("%s: dot %g, dequantized dot %g: off by %g (sum of magnitudes %g)", c.name, got, want, float64(got)-want, mag)
		}
	}
}
