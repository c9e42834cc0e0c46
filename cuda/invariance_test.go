package cuda

import (
	"testing"

	"tfd/compute/computetest"
)

// Batch invariance on the GPU, bit for bit: a row computed alone must equal the same row computed
// among 1, 7 and 33 others, at a random index (tfd/compute/computetest's checks).

func TestMatMulIsBatchInvariant(t *testing.T) { computetest.CheckMatMulBatchInvariance(t, openCUDA(t)) }
func TestNormsAreBatchInvariant(t *testing.T) { computetest.CheckNormBatchInvariance(t, openCUDA(t)) }
func TestAttentionIsBatchInvariant(t *testing.T) {
	computetest.CheckAttentionBatchInvariance(t, newPair(t))
}

// TestMatMulRowGroupsAgree: every row-group size of the matmul kernels gives the same bits.
func TestMatMulRowGroupsAgree(t *testing.T) { computetest.CheckMatMulRowGroups(t, openCUDA(t)) }

// TestExpertsAreBatchInvariant: a row through a mixture of experts' ops gives the same bits
// whatever rows share its experts.
func TestExpertsAreBatchInvariant(t *testing.T) {
	computetest.CheckExpertsBatchInvariance(t, openCUDA(t))
}

// TestMatMulsEqualMatMul: q, k and v (gate and up) in one launch give the bits of three.
func TestMatMulsEqualMatMul(t *testing.T) { computetest.CheckMultiMatMul(t, openCUDA(t)) }
