//go:build amd64 || arm64

package cuda

import "testing"

// BenchmarkStageCopy measures the CPU's share of ReadFloat32 of a 64-stream round's logits of the
// 8B (64 rows of 151,936 floats, 39 MB): the copy out of the pinned stage into the caller's
// buffer, timed here between two ordinary buffers (no GPU needed).
//
//	go test ./cuda -run '^$' -bench StageCopy -benchtime 50x -count 3
func BenchmarkStageCopy(b *testing.B) {
	src := make([]float32, 64*151936)
	dst := make([]float32, len(src))
	for i := range src {
		src[i] = float32(i)
	}
	b.SetBytes(int64(4 * len(src)))
	for b.Loop() {
		copy(dst, src)
	}
}
