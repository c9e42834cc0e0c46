package cuda

import (
	"testing"

	"tfd/engine/enginetest"
)

// TestSharedAndDraftedEqualSoloOnCUDA: on the GPU, replies run together in shared rounds with MTP
// and n-gram drafts equal the same requests run one at a time without drafts, token for token.
func TestSharedAndDraftedEqualSoloOnCUDA(t *testing.T) {
	enginetest.CheckSharedAndDrafted(t, openCUDA(t))
}

// BenchmarkLoneDraftsOnCUDA: one stream alone making 512 tokens of the bundled model on the GPU,
// drafts off (greedy chains on the device where greedy), n-gram copies, MTP chains of 1 to 3.
func BenchmarkLoneDraftsOnCUDA(b *testing.B) {
	enginetest.BenchLoneDrafts(b, openCUDA(b))
}
