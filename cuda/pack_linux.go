//go:build amd64 || arm64

package cuda

import (
	"runtime"
	"sync"
	"unsafe"

	"tfd/kernels"
)

// The matrix unit's packed order (kernels.PackMMA) on the way in. A BF16 matrix for the tensor
// cores is packed on the host, a few bands of 16 rows at a time, into one of two pinned buffers
// while the other's copy to the device runs; a piece's bands are spread over the CPUs. Bands are
// independent, and a packed band takes the bytes its 16 rows took, so a piece goes to the device
// where its rows would have gone (the last band padded with zero rows).

// packStageBytes is the size of each of the two pinned buffers, kept from the first packed upload
// until Close: 32 MiB of pinned host memory in all.
const packStageBytes = 16 << 20

// uploadPacked copies the n×k row-major BF16 matrix data to p, which holds
// kernels.MMAPackedLen(n, k) elements, in the packed order; worker thread only. It returns once
// the copies are done.
func (b *backend) uploadPacked(p devPtr, data []byte, n, k int) error {
	bandBytes := 2 * kernels.MMABandRows * k
	perPiece := max(1, packStageBytes/bandBytes)
	for i := range b.packStage {
		if len(b.packStage[i]) >= perPiece*bandBytes {
			continue
		}
		if b.packStage[i] != nil {
			if err := check("cuMemFreeHost", cuMemFreeHost(sliceData(b.packStage[i]))); err != nil {
				return err
			}
			b.packStage[i] = nil
		}
		var err error
		if b.packStage[i], err = hostSlice(perPiece * bandBytes); err != nil {
			return err
		}
	}
	bands := ceilDiv(n, kernels.MMABandRows)
	for piece, b0 := 0, 0; b0 < bands; piece, b0 = piece+1, b0+perPiece {
		b1 := min(bands, b0+perPiece)
		buf := b.packStage[piece%2][:(b1-b0)*bandBytes]
		packBands(buf, data, n, k, b0, b1)
		// This buffer's last copy, two pieces back, was waited for before the one in between.
		if err := check("cuStreamSynchronize", cuStreamSynchronize(b.w.stream)); err != nil {
			return err
		}
		at := p + devPtr(b0)*devPtr(bandBytes)
		if err := check("cuMemcpyHtoDAsync", cuMemcpyHtoDAsync(at, unsafe.Pointer(&buf[0]), uintptr(len(buf)), b.w.stream)); err != nil {
			return err
		}
	}
	return check("cuStreamSynchronize", cuStreamSynchronize(b.w.stream))
}

// packBands packs bands b0 … b1−1 of the n×k row-major BF16 matrix src into dst, which holds
// exactly those bands, spread over the CPUs.
func packBands(dst, src []byte, n, k, b0, b1 int) {
	bandBytes := 2 * kernels.MMABandRows * k
	workers := min(runtime.GOMAXPROCS(0), b1-b0)
	var wg sync.WaitGroup
	for w := range workers {
		from, to := b0+(b1-b0)*w/workers, b0+(b1-b0)*(w+1)/workers
		if from == to {
			continue
		}
		wg.Go(func() {
			r0, r1 := from*kernels.MMABandRows, min(n, to*kernels.MMABandRows)
			kernels.PackMMA(dst[(from-b0)*bandBytes:(to-b0)*bandBytes], src[2*r0*k:2*r1*k], r1-r0, k)
		})
	}
	wg.Wait()
}
