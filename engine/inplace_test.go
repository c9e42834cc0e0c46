package engine_test

import (
	"context"
	"testing"

	"tfd/batch"
	"tfd/compute"
	"tfd/compute/computetest"
	"tfd/engine"
	"tfd/engine/enginetest"
)

// copyingBackend offers only compute.Backend's methods, hiding compute.InPlaceUploader, so that
// the engine copies every tensor into the backend as it does for a GPU.
type copyingBackend struct{ compute.Backend }

// copyingHybrid is copyingBackend keeping the backend's DeltaNet ops, for a hybrid model.
type copyingHybrid struct {
	compute.Backend
	compute.DeltaNet
}

// copying hides b's InPlaceUploader, keeping its DeltaNet ops.
func copying(b compute.Backend) compute.Backend {
	if dn, ok := b.(compute.DeltaNet); ok {
		return copyingHybrid{b, dn}
	}
	return copyingBackend{b}
}

// The cpu backend's weights used where the checkpoint maps them give the bits of weights copied
// into it, for every oracle checkpoint (F32 and BF16 safetensors, MoE and MTP heads included).
func TestInPlaceWeightsMatchCopied(t *testing.T) {
	if _, ok := openCPU(t).(compute.InPlaceUploader); !ok {
		t.Fatal("the cpu backend does not implement compute.InPlaceUploader")
	}
	for _, name := range enginetest.Models {
		t.Run(name, func(t *testing.T) {
			o := enginetest.Read(t, name)
			prompt := o.Cases[0].Prompt
			logits := func(b compute.Backend) []float32 {
				m := enginetest.Load(t, b, o.Model, engine.Options{Context: 64, MaxRows: len(prompt)})
				rows := make([]batch.Row, len(prompt))
				for i, tok := range prompt {
					rows[i] = batch.Row{Pos: i, Token: tok, Logits: true}
				}
				out, err := m.Forward(context.Background(), rows)
				if err != nil {
					t.Fatal(err)
				}
				return append([]float32(nil), out...)
			}
			computetest.SameBits(t, name, logits(openCPU(t)), logits(copying(openCPU(t))))
		})
	}
}
