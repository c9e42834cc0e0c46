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
