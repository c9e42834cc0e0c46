package engine

import (
	"fmt"
	"strings"

	"tfd/compute"
	"tfd/engine/safetensors"
)

// mlxParts are the scales and biases of a matrix quantized by MLX.
type mlxParts struct {
	scales, biases safetensors.Tensor
}

// mlxTensor returns the packed codes of a matrix quantized by MLX (mlx-lm's checkpoints,
// config.json's "quantization"): t is `<name>.weight`, U32 [out, in·bits/32], and
// `<name>.scales` and `<name>.biases` ([out, in/group_size], F16, BF16 or F32) lie beside it.
func (s safetensorsCheckpoint) mlxTensor(t safetensors.Tensor) (stored, bool, error) {
	base, ok := strings.CutSuffix(t.Name, ".weight")
	scales, ok1 := s.c.Tensor(base + ".scales")
	biases, ok2 := s.c.Tensor(base + ".biases")
	if !ok || !ok1 || !ok2 {
		return stored{}, true, fmt.Errorf("engine: tensor %s is U32 without %s.scales and %s.biases beside it: tfd reads U32 weights only as MLX's affine quantization", t.Name, base, base)
	}
	return stored{name: t.Name, shape: t.Shape, data: t.Data, mlx: &mlxParts{scales, biases}}, true, nil
}

// affine returns the dtype and the bytes Upload takes (see compute.Affine) of t, a matrix
// quantized by MLX, which config.json says is [out, in] (shape). The bits and the group size are
// read from the shapes, tensor by tensor, since mlx-lm may quantize some layers otherwise than
// config.json's "quantization" says.
func affine(t stored, shape []int) (compute.DType, []byte, error) {
	scales, biases := t.mlx.scales, t.mlx.biases
	if len(shape) != 2 || len(t.shape) != 2 || t.shape[0] != shape[0] {
		return 0, nil, fmt.Errorf("engine: tensor %s is U32 %v where config.json implies %v: not an MLX-quantized matrix tfd reads", t.name, t.shape, shape)
	}
	out, in, words := shape[0], shape[1], t.shape[1]
	if len(scales.Shape) != 2 || scales.Shape[0] != out || scales.Shape[1] == 0 ||
		biases.DType != scales.DType || len(biases.Shape) != 2 || biases.Shape[0] != out || biases.Shape[1] != scales.Shape[1] {
		return 0, nil, fmt.Errorf("engine: %s %v and %s %v: want both [%d, in/group_size] of one dtype", scales.Name, scales.Shape, biases.Name, biases.Shape, out)
	}
	if 32*words%in != 0 || in%scales.Shape[1] != 0 {
		return 0, nil, fmt.Errorf("engine: %s packs %d elements a row into %d words with %d groups: no whole number of bits or group size", t.name, in, words, scales.Shape[1])
	}
	sdt, ok := dtypes[scales.DType]
	if !ok {
		return 0, nil, fmt.Errorf("engine: %s has dtype %s; MLX's are F16, BF16 or F32", scales.Name, scales.DType)
	}
	dt, err := compute.Affine(32*words/in, in/scales.Shape[1], sdt)
	if err != nil {
		return 0, nil, fmt.Errorf("engine: tensor %s: %w", t.name, err)
	}
	data := make([]byte, 0, len(t.data)+len(scales.Data)+len(biases.Data))
	data = append(append(append(data, t.data...), scales.Data...), biases.Data...)
	return dt, data, nil
}
