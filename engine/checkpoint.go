package engine

import (
	"fmt"

	"tfd/compute"
	"tfd/engine/safetensors"
)

// stored is one tensor as a checkpoint holds it, in the layout of a Hugging Face checkpoint
// whatever the file format: matrices [out, in] with each row contiguous.
type stored struct {
	name  string // as the file names it, for errors
	dtype compute.DType
	shape []int // outermost first
	data  []byte
	// mlx, for the packed codes of a matrix quantized by MLX (dtype 0, shape and data the
	// codes'), holds its scales and biases; the upload reads its bits and group size (affine).
	mlx *mlxParts
	// bytes marks a U8 tensor (dtype 0): GPT-OSS's MXFP4 blocks and scales, which only its
	// experts' loader reads.
	bytes bool
}

// checkpoint is what loading needs of a model's weights, whatever their file format. Tensors are
// asked for by their Hugging Face names ("model.layers.0.self_attn.q_proj.weight").
type checkpoint interface {
	// tensor returns the named tensor and whether the checkpoint has it; an error says that it
	// has it in a form tfd cannot run.
	tensor(name string) (stored, bool, error)
	// fileName returns the name the file holds a tensor under, for errors.
	fileName(name string) string
	// configName names where the model's sizes were read, for errors ("config.json").
	configName() string
	// count and each list every tensor of the file, in a fixed order, with its name, dtype as the
	// file spells it, shape and data as stored: what Identity hashes.
	count() int
	each(fn func(name, dtype string, shape []int, data []byte))
	// done is called once every tensor the model uses was taken; it refuses a checkpoint that
	// holds more, where its format calls for that.
	done() error
	// release tells the checkpoint that a tensor's data (bytes it returned) has been copied, so
	// that it may drop them from resident memory; they stay readable.
	release(data []byte)
	close() error
}

// safetensorsCheckpoint is a Hugging Face folder's weights.
type safetensorsCheckpoint struct{ c *safetensors.Checkpoint }

var dtypes = map[string]compute.DType{"F32": compute.F32, "F16": compute.F16, "BF16": compute.BF16}

func (s safetensorsCheckpoint) tensor(name string) (stored, bool, error) {
	t, ok := s.c.Tensor(name)
	if !ok {
		return stored{}, false, nil
	}
	switch t.DType {
	case "U32":
		return s.mlxTensor(t)
	case "U8":
		return stored{name: t.Name, shape: t.Shape, data: t.Data, bytes: true}, true, nil
	}
	dt, ok := dtypes[t.DType]
	if !ok {
		return stored{}, true, fmt.Errorf("engine: tensor %s has dtype %s; tfd reads F32, F16 and BF16, and U32 as MLX's quantized weights", t.Name, t.DType)
	}
	return stored{name: t.Name, dtype: dt, shape: t.Shape, data: t.Data}, true, nil
}

func (s safetensorsCheckpoint) count() int { return len(s.c.Names()) }

func (s safetensorsCheckpoint) each(fn func(name, dtype string, shape []int, data []byte)) {
	for _, name := range s.c.Names() {
		t, _ := s.c.Tensor(name)
		fn(t.Name, t.DType, t.Shape, t.Data)
	}
}

func (s safetensorsCheckpoint) fileName(name string) string { return name }
func (s safetensorsCheckpoint) configName() string          { return "config.json" }

// done accepts tensors nothing used: Hugging Face checkpoints carry ones that transformers
// skips too (an MTP head the family does not declare, rotary tables).
func (s safetensorsCheckpoint) done() error  { return nil }
func (s safetensorsCheckpoint) close() error { return s.c.Close() }

func (s safetensorsCheckpoint) release(data []byte) { s.c.Release(data) }
