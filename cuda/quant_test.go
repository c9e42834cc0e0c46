package cuda

import (
	"testing"

	"tfd/compute"
	"tfd/compute/computetest"
)

// TestQuantRecordingAllocatesNothing checks that recording MatMuls with quantized weights (two
// launches each, an affine format's two extra arguments among them) allocates nothing in steady
// state, as TestRecordingAllocatesNothing does for 16-bit ones.
func TestQuantRecordingAllocatesNothing(t *testing.T) {
	b := openCUDA(t)
	const n = 256
	affine, err := compute.Affine(4, 64, compute.BF16)
	if err != nil {
		t.Fatal(err)
	}
	var ws []compute.Tensor
	for _, dt := range []compute.DType{compute.Q8_0, affine} {
		w, err := b.Upload(dt, []int{n, n}, computetest.QuantizedWeights(t, dt, n, n, 1))
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, w)
	}
	x := computetest.UploadF32(t, b, computetest.Randn(2, 4*n), 4, n)
	y, err := b.Alloc(compute.F32, 4, n)
	if err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(20, func() {
		for range 50 {
			for _, w := range ws {
				b.MatMul(y, x, w, nil, 4)
			}
		}
		if err := b.Sync(); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("100 quantized MatMuls and a Sync allocate %v times", allocs)
	}
}
