package cuda

import (
	"os"
	"testing"

	"tfd/scheduler/schedulertest"
)

// TestSharedAndDraftedEqualSoloOnCUDA: on the GPU, replies run together in shared rounds with MTP
// and n-gram drafts equal the same requests run one at a time without drafts, token for token.
func TestSharedAndDraftedEqualSoloOnCUDA(t *testing.T) {
	schedulertest.CheckSharedAndDrafted(t, openCUDA(t))
}

// TestLoneDraftedEqualsSoloOnCUDA: on the GPU, a reply alone on the lone driver with MTP chains
// of depth 1 to 4, with and without n-gram copies, greedy (on drafted chains on the device) and
// sampled, and handed to shared rounds mid-chain, equals the same request run without drafts;
// each depth is checked to have run drafted, its greedy chains on the device at that depth.
func TestLoneDraftedEqualsSoloOnCUDA(t *testing.T) {
	schedulertest.CheckLoneDrafted(t, openCUDA(t))
}

// TestSharedEqualsSoloOnMoECUDA: on the GPU, the tiny Qwen3-MoE checkpoint's replies run together
// in shared rounds with n-gram drafts equal the same requests run one at a time without drafts.
func TestSharedEqualsSoloOnMoECUDA(t *testing.T) {
	schedulertest.CheckSharedEqualsSolo(t, openCUDA(t), "engine/testdata/oracle/qwen3moe")
}

// TestWindowRingsOnCUDA: on the GPU, the Gemma 3 checkpoint's sliding layers in rings bounded by
// the window: replies moved between sessions, drafted, and resumed from the prompt cache equal
// each alone and undrafted (schedulertest.CheckWindowRings).
func TestWindowRingsOnCUDA(t *testing.T) {
	schedulertest.CheckWindowRings(t, openCUDA(t), "engine/testdata/oracle/gemma3")
}

// TestSharedEqualsSoloOnQwen3NextCUDA: on the GPU, the tiny Qwen3-Next checkpoint's replies run
// together in shared rounds with MTP and n-gram drafts, their DeltaNet states stepping through
// the device's step lists, equal the same requests run one at a time without drafts.
func TestSharedEqualsSoloOnQwen3NextCUDA(t *testing.T) {
	schedulertest.CheckSharedEqualsSolo(t, openCUDA(t), "engine/testdata/oracle/qwen3next")
}

// TestSharedEqualsSoloOnGptOssCUDA: on the GPU, the tiny GPT-OSS checkpoint's replies (sliding
// windows, sinks, experts with biases), unpacked and as MXFP4, run together in shared rounds with
// n-gram drafts equal the same requests run one at a time without drafts.
func TestSharedEqualsSoloOnGptOssCUDA(t *testing.T) {
	b := openCUDA(t)
	for _, dir := range []string{"engine/testdata/oracle/gptoss", "engine/testdata/oracle/gptoss-mxfp4"} {
		t.Run(dir, func(t *testing.T) { schedulertest.CheckSharedEqualsSolo(t, b, dir) })
	}
}

// TestPromptCacheOnCUDA: on the GPU, replies restored from the prompt cache's memory and, after a
// restart, from its spill folder equal the replies of a host without a cache.
func TestPromptCacheOnCUDA(t *testing.T) {
	schedulertest.CheckPromptCache(t, openCUDA(t))
}

// BenchmarkLoneDraftsOnCUDA: one stream alone making 512 tokens of the bundled model on the GPU,
// drafts off (greedy chains on the device where greedy), n-gram copies, MTP chains of 1 to 3.
func BenchmarkLoneDraftsOnCUDA(b *testing.B) {
	schedulertest.BenchLoneDrafts(b, openCUDA(b))
}

// BenchmarkLoneOnCUDA: issue 13's lone-stream benchmark (schedulertest.BenchLone) on the GPU, on
// the bundled model, or on the checkpoint in the folder TFD_BENCH_MODEL names (such as the
// 8B-shaped one tools/bench/make_8b.py writes):
//
//	./bin/cuda.test -test.run '^$' -test.bench 'LoneOnCUDA' -test.benchtime 2x
//	TFD_BENCH_MODEL=/tmp/q8b ./bin/cuda.test -test.run '^$' -test.bench 'LoneOnCUDA' -test.benchtime 1x
func BenchmarkLoneOnCUDA(b *testing.B) {
	dir := bundledDir
	if d := os.Getenv("TFD_BENCH_MODEL"); d != "" {
		dir = d
	}
	schedulertest.BenchLone(b, openCUDA(b), dir)
}
