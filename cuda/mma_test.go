package cuda

import (
	"testing"

	"tfd/compute/computetest"
	"tfd/engine/enginetest"
	"tfd/scheduler/schedulertest"
)

// The tensor-core matmuls (TFD_CUDA_MMA=1, off by default): the matmul checks, the engine against
// the oracle and shared rounds against solo replies, each with the backend opened under it.

// onTensorCores sets TFD_CUDA_MMA=1 for the rest of the test, so that the backends it opens run
// BF16 matmuls on the tensor cores.
func onTensorCores(t *testing.T) { t.Setenv("TFD_CUDA_MMA", "1") }

func TestMatMulMatchesCPUOnTensorCores(t *testing.T) {
	onTensorCores(t)
	computetest.CheckMatMul(t, newPair(t))
}

func TestMatMulIsBatchInvariantOnTensorCores(t *testing.T) {
	onTensorCores(t)
	computetest.CheckMatMulBatchInvariance(t, openCUDA(t))
}

func TestMatMulRowGroupsAgreeOnTensorCores(t *testing.T) {
	onTensorCores(t)
	computetest.CheckMatMulRowGroups(t, openCUDA(t))
}

func TestMatMulsEqualMatMulOnTensorCores(t *testing.T) {
	onTensorCores(t)
	computetest.CheckMultiMatMul(t, openCUDA(t))
}

func TestEngineMatchesOracleOnTensorCores(t *testing.T) {
	onTensorCores(t)
	enginetest.CheckBackend(t, openCUDA(t))
}

func TestSharedAndDraftedEqualSoloOnTensorCores(t *testing.T) {
	onTensorCores(t)
	schedulertest.CheckSharedAndDrafted(t, openCUDA(t))
}

// TestTensorCoresMoveBits checks the premise of the tests above: with TFD_CUDA_MMA=1 a BF16
// matmul runs another kernel, whose bits differ from the lanes' on random data.
func TestTensorCoresMoveBits(t *testing.T) {
	lanes := computetest.MatMulOnce(t, openCUDA(t))
	onTensorCores(t)
	mma := computetest.MatMulOnce(t, openCUDA(t))
	same := true
	for i := range lanes {
		same = same && lanes[i] == mma[i]
	}
	if same {
		t.Fatal("TFD_CUDA_MMA=1 gives the bits of the lanes' kernel: the tensor cores did not run")
	}
}
