//go:build darwin && arm64

package metal

import (
	"testing"

	"tfd/compute/computetest"
)

// Each op on the GPU against the CPU backend, the KV moves bit for bit, and the error word: the
// checks of tfd/compute/computetest that tfd/cuda runs too, at the same tolerances. Metal has no F64, so its
// cos, sin and rsqrt are precise F32 functions where the CPU rounds an F64 result, and its exp is
// precise::exp where the CPU's is Cephes': the tolerances cover the last bit either way.

func TestMatMulMatchesCPU(t *testing.T)      { computetest.CheckMatMul(t, newPair(t)) }
func TestEmbedGatherMatchCPU(t *testing.T)   { computetest.CheckEmbedGather(t, newPair(t)) }
func TestRMSNormMatchesCPU(t *testing.T)     { computetest.CheckRMSNorm(t, newPair(t)) }
func TestRoPEMatchesCPU(t *testing.T)        { computetest.CheckRoPE(t, newPair(t)) }
func TestSiLUMulAddMatchCPU(t *testing.T)    { computetest.CheckSiLUMulAdd(t, newPair(t)) }
func TestGELUTanhMulMatchCPU(t *testing.T)   { computetest.CheckGELUTanhMul(t, newPair(t)) }
func TestClampedSwiGLUMatchCPU(t *testing.T) { computetest.CheckClampedSwiGLU(t, newPair(t)) }
func TestAttentionMatchesCPU(t *testing.T)   { computetest.CheckAttention(t, newPair(t)) }
func TestCopyKVKeepsBits(t *testing.T)       { computetest.CheckCopyKV(t, openMetal(t)) }
func TestKVReadWrite(t *testing.T)           { computetest.CheckKVReadWrite(t, openMetal(t)) }
func TestKVLayout(t *testing.T)              { computetest.CheckKVLayout(t, openMetal(t)) }
func TestHalfKV(t *testing.T)                { computetest.CheckHalfKV(t, openMetal(t)) }
func TestExpertsMatchCPU(t *testing.T)       { computetest.CheckExperts(t, newPair(t)) }
func TestDeltaNetMatchesCPU(t *testing.T)    { computetest.CheckDeltaNet(t, newPair(t)) }
func TestDataErrors(t *testing.T)            { computetest.CheckDataErrors(t, openMetal(t)) }
func TestQuantMatMulMatchesCPU(t *testing.T) { computetest.CheckQuantMatMul(t, newPair(t)) }
func TestQuantEmbedMatchesCPU(t *testing.T)  { computetest.CheckQuantEmbed(t, newPair(t)) }
func TestQuantExpertsMatchCPU(t *testing.T)  { computetest.CheckQuantExpertMatMul(t, newPair(t)) }
func TestQKRoPEWriteEqualsOps(t *testing.T)  { computetest.CheckQKRoPEWrite(t, openMetal(t)) }
