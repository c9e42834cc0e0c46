package cuda

import (
	"testing"

	"tfd/compute"
	"tfd/compute/computetest"
)

// Each op on the GPU against the CPU backend, the KV moves bit for bit, and the error word: the
// checks of tfd/compute/computetest that every GPU backend runs, with their tolerances.

func TestMatMulMatchesCPU(t *testing.T)      { computetest.CheckMatMul(t, newPair(t)) }
func TestEmbedGatherMatchCPU(t *testing.T)   { computetest.CheckEmbedGather(t, newPair(t)) }
func TestRMSNormMatchesCPU(t *testing.T)     { computetest.CheckRMSNorm(t, newPair(t)) }
func TestRoPEMatchesCPU(t *testing.T)        { computetest.CheckRoPE(t, newPair(t)) }
func TestSiLUMulAddMatchCPU(t *testing.T)    { computetest.CheckSiLUMulAdd(t, newPair(t)) }
func TestGELUTanhMulMatchCPU(t *testing.T)   { computetest.CheckGELUTanhMul(t, newPair(t)) }
func TestClampedSwiGLUMatchCPU(t *testing.T) { computetest.CheckClampedSwiGLU(t, newPair(t)) }
func TestAttentionMatchesCPU(t *testing.T)   { computetest.CheckAttention(t, newPair(t)) }
func TestCopyKVKeepsBits(t *testing.T)       { computetest.CheckCopyKV(t, openCUDA(t)) }
func TestKVReadWrite(t *testing.T)           { computetest.CheckKVReadWrite(t, openCUDA(t)) }
func TestKVLayout(t *testing.T)              { computetest.CheckKVLayout(t, openCUDA(t)) }
func TestHalfKV(t *testing.T)                { computetest.CheckHalfKV(t, openCUDA(t)) }
func TestExpertsMatchCPU(t *testing.T)       { computetest.CheckExperts(t, newPair(t)) }
func TestDeltaNetMatchesCPU(t *testing.T)    { computetest.CheckDeltaNet(t, newPair(t)) }
func TestDataErrors(t *testing.T)            { computetest.CheckDataErrors(t, openCUDA(t)) }
func TestQuantMatMulMatchesCPU(t *testing.T) { computetest.CheckQuantMatMul(t, newPair(t)) }
func TestQuantEmbedMatchesCPU(t *testing.T)  { computetest.CheckQuantEmbed(t, newPair(t)) }
func TestQuantExpertsMatchCPU(t *testing.T)  { computetest.CheckQuantExpertMatMul(t, newPair(t)) }

// TestRecordingAllocatesNothing checks that recording ops allocates nothing in steady state.
func TestRecordingAllocatesNothing(t *testing.T) {
	b := openCUDA(t)
	const n = 256
	x := computetest.UploadF32(t, b, computetest.Randn(1, n*n), n, n)
	w, err := b.Upload(compute.BF16, []int{n, n}, computetest.Encode(compute.BF16, computetest.Randn(2, n*n)))
	if err != nil {
		t.Fatal(err)
	}
	y, _ := b.Alloc(compute.F32, n, n)
	ids := computetest.UploadI32(t, b, make([]int32, 4))
	host := []int32{1, 2, 3, 4}
	allocs := testing.AllocsPerRun(100, func() {
		for range 100 { // several batches' worth
			b.MatMul(y, x, w, nil, 4)
			b.Add(y, y, x, 4)
		}
		b.WriteInt32(ids, host)
		if err := b.Sync(); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("200 ops, a write and a Sync allocate %v times", allocs)
	}
}
