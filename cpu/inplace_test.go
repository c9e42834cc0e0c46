package cpu

import (
	"reflect"
	"testing"
	"unsafe"

	"tfd/compute"
	"tfd/compute/computetest"
)

// UploadInPlace references aligned F32 tensors and F16/BF16 matrices and copies everything else
// (unaligned data, 16-bit vectors, I32, quantized matrices); either way the tensor holds what
// Upload would, bit for bit, and a MatMul on it gives Upload's bits.
func TestUploadInPlace(t *testing.T) {
	b := newTest(t)
	const out, in = 8, 64
	random := computetest.Encode(compute.F32, computetest.Randn(7, out*in)) // 4·out·in bytes of random bits
	buf := make([]byte, len(random)+8)                                      // 8-aligned, as Go's allocator gives
	q := quantized(t, compute.Q8_0, out, in, 3)
	for _, c := range []struct {
		name    string
		dtype   compute.DType
		shape   []int
		offset  int // into buf: 0 is aligned, 1 is not
		inPlace bool
	}{
		{"f32 matrix", compute.F32, []int{out, in}, 0, true},
		{"f32 vector", compute.F32, []int{in}, 0, true},
		{"bf16 matrix", compute.BF16, []int{out, in}, 0, true},
		{"f16 matrix", compute.F16, []int{out, in}, 0, true},
		{"f32 matrix at offset 2", compute.F32, []int{out, in}, 2, false},
		{"bf16 matrix at offset 1", compute.BF16, []int{out, in}, 1, false},
		{"bf16 vector", compute.BF16, []int{in}, 0, false},
		{"i32", compute.I32, []int{in}, 0, false},
		{"q8_0 matrix", compute.Q8_0, []int{out, in}, 0, false},
	} {
		data := buf[c.offset:]
		copy(data, random)
		if c.dtype == compute.Q8_0 {
			copy(data, q.data)
			data = data[:len(q.data)]
		} else {
			n, _ := compute.Elements(c.shape)
			data = data[:n*c.dtype.Size()]
		}
		got, err := b.UploadInPlace(c.dtype, c.shape, data)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		want, err := b.Upload(c.dtype, c.shape, data)
		if err != nil {
			t.Fatalf("%s: Upload: %v", c.name, err)
		}
		g, w := got.(*tensor), want.(*tensor)
		if g.dtype != w.dtype || !reflect.DeepEqual(g.shape, w.shape) {
			t.Errorf("%s: %v %v, Upload gives %v %v", c.name, g.dtype, g.shape, w.dtype, w.shape)
		}
		computetest.SameBits(t, c.name+" f", g.f, w.f)
		if !reflect.DeepEqual(g.h, w.h) || !reflect.DeepEqual(g.i, w.i) || !reflect.DeepEqual(g.q, w.q) {
			t.Errorf("%s: elements differ from Upload's", c.name)
		}
		first := unsafe.Pointer(unsafe.SliceData(data))
		referenced := unsafe.Pointer(unsafe.SliceData(g.f)) == first || unsafe.Pointer(unsafe.SliceData(g.h)) == first
		if referenced != c.inPlace {
			t.Errorf("%s: references the data: %v, want %v", c.name, referenced, c.inPlace)
		}
		if len(c.shape) == 2 && c.dtype != compute.I32 {
			x := ften(t, b, computetest.Randn(11, 2*in), 2, in)
			dg, dw := ften(t, b, nil, 2, out), ften(t, b, nil, 2, out)
			b.MatMul(dg, x, got, nil, 2)
			b.MatMul(dw, x, want, nil, 2)
			computetest.SameBits(t, c.name+" matmul", dg.f, dw.f)
		}
	}
}
