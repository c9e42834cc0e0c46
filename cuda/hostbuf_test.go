package cuda

import (
	"testing"

	"tfd/compute"
	"tfd/compute/computetest"
	"tfd/engine"
	"tfd/engine/enginetest"
)

// TestReadsIntoHostBuffers checks ReadFloat32 into the backend's page-locked memory (HostFloat32),
// which the GPU copies into directly, against a read into ordinary memory: the whole buffer, a
// window of it, and a read after others; FreeHost of memory it did not return panics, and Close
// frees what FreeHost has not.
func TestReadsIntoHostBuffers(t *testing.T) {
	b := openCUDA(t)
	hb, ok := b.(compute.HostBuffers)
	if !ok {
		t.Fatal("the cuda backend has no HostFloat32")
	}
	const n = 3000
	buf, err := hb.HostFloat32(n)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hb.HostFloat32(10); err != nil { // left for Close, which must free it
		t.Fatal(err)
	}
	src := computetest.Randn(41, n)
	x := computetest.UploadF32(t, b, src, n)
	if err := b.ReadFloat32(x, buf); err != nil {
		t.Fatal(err)
	}
	computetest.SameBits(t, "the whole buffer", buf, src)
	small := computetest.UploadF32(t, b, computetest.Randn(42, 200), 200)
	want := make([]float32, 200)
	if err := b.ReadFloat32(small, want); err != nil {
		t.Fatal(err)
	}
	if err := b.ReadFloat32(small, buf[100:300]); err != nil {
		t.Fatal(err)
	}
	computetest.SameBits(t, "a window, after a read into ordinary memory", buf[100:300], want)
	computetest.SameBits(t, "the rest of the buffer", buf[300:], src[300:])
	hb.FreeHost(buf)
	func() {
		defer func() {
			if recover() == nil {
				t.Error("FreeHost of ordinary memory did not panic")
			}
		}()
		hb.FreeHost(make([]float32, 4))
	}()
}

// TestHostBuffersKeepEngineBits runs TestGraphsKeepBits' script on the bundled model with its
// logits read into page-locked memory directly (the engine takes it from HostFloat32) and
// through the stage, and demands the same logits bit for bit.
func TestHostBuffersKeepEngineBits(t *testing.T) {
	b := openCUDA(t)
	defer setStagedReads(b, false)
	m := enginetest.Load(t, b, "models/gopher", engine.Options{MaxRows: 32, Slots: 512})
	scriptKeepsBits(t, m, func(direct bool) { setStagedReads(b, !direct) })
}
