package engine_test

import (
	"context"
	"fmt"
	"testing"

	"tfd/batch"
	"tfd/compute/computetest"
	"tfd/engine"
	"tfd/engine/enginetest"
)

// TestGptOssMXFP4IsItsUnpackedForm: GPT-OSS's experts read as MXFP4 (gptoss-mxfp4) give the
// bits of the same weights in transformers' unpacked form (gptoss), logits of every position
// alike: MXFP4's weights are exact in F32, and ExpertMatMul computes with them as they are.
func TestGptOssMXFP4IsItsUnpackedForm(t *testing.T) {
	b := openCPU(t)
	o := enginetest.Read(t, "gptoss")
	packed := enginetest.Load(t, b, "engine/testdata/oracle/gptoss-mxfp4", engine.Options{MaxRows: 64})
	unpacked := enginetest.Load(t, b, o.Model, engine.Options{MaxRows: 64})
	for ci, c := range o.Cases {
		rows := make([]batch.Row, len(c.Prompt))
		for i, tok := range c.Prompt {
			rows[i] = batch.Row{Pos: i, Token: tok, Logits: true}
		}
		var logits [2][]float32
		for i, m := range []*engine.Model{packed, unpacked} {
			got, err := m.Forward(context.Background(), rows)
			if err != nil {
				t.Fatal(err)
			}
			logits[i] = append([]float32(nil), got...)
		}
		computetest.SameBits(t, fmt.Sprintf("case %d logits", ci), logits[0], logits[1])
	}
}
