package engine

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"

	"tfd/compute"
	"tfd/quant"
)

// Gemma 3's weights differ from the Llama/Qwen layout in two ways the forward would otherwise
// have to undo at every step: its RMSNorm weights w act as (1 + w), and its embeddings are scaled
// by √hidden on lookup. Both are folded in at load, in the arithmetic transformers uses, so the
// ops stay those of the other families.

// isGemmaNorm reports whether the tensor named hf is one of a Gemma model's RMSNorm weights.
func isGemmaNorm(hf string) bool {
	return strings.HasSuffix(hf, "norm.weight")
}

// plusOne returns t's values plus one, as F32: Gemma3RMSNorm multiplies by 1.0 + weight.float().
func plusOne(t stored) (stored, error) {
	w, err := storedFloats(t)
	if err != nil {
		return t, err
	}
	data := make([]byte, 4*len(w))
	for i, v := range w {
		binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(1+v))
	}
	return stored{name: t.name + " (1 + w)", dtype: compute.F32, shape: t.shape, data: data}, nil
}

// scaledEmbeddings returns the embedding table times √hidden in its own dtype, as
// Gemma3TextScaledWordEmbedding computes a looked-up row: the scale is float32(√hidden) rounded
// to the table's dtype, and each product is rounded to that dtype.
func scaledEmbeddings(t stored, hidden int) (stored, error) {
	scale := float32(math.Sqrt(float64(hidden)))
	out := stored{name: t.name + " (·√hidden)", dtype: t.dtype, shape: t.shape, data: make([]byte, len(t.data))}
	switch t.dtype {
	case compute.F32:
		for i := 0; i < len(t.data); i += 4 {
			v := math.Float32frombits(binary.LittleEndian.Uint32(t.data[i:]))
			binary.LittleEndian.PutUint32(out.data[i:], math.Float32bits(v*scale))
		}
	case compute.BF16:
		s := compute.BF16ToF32(quant.F32ToBF16(scale))
		for i := 0; i < len(t.data); i += 2 {
			v := compute.BF16ToF32(binary.LittleEndian.Uint16(t.data[i:]))
			binary.LittleEndian.PutUint16(out.data[i:], quant.F32ToBF16(v*s))
		}
	case compute.F16:
		s := compute.F16ToF32(quant.F32ToF16(scale))
		for i := 0; i < len(t.data); i += 2 {
			v := compute.F16ToF32(binary.LittleEndian.Uint16(t.data[i:]))
			binary.LittleEndian.PutUint16(out.data[i:], quant.F32ToF16(v*s))
		}
	default:
		return t, fmt.Errorf("engine: tensor %s is %v; tfd runs Gemma 3's embeddings in F32, F16 or BF16", t.name, t.dtype)
	}
	return out, nil
}

// storedFloats widens an F32, F16 or BF16 tensor to float32 values.
func storedFloats(t stored) ([]float32, error) {
	switch t.dtype {
	case compute.F32, compute.F16, compute.BF16:
	default:
		return nil, fmt.Errorf("engine: tensor %s is %v; tfd wants Gemma 3's norms in F32, F16 or BF16", t.name, t.dtype)
	}
	data := t.data
	if t.dtype != compute.F32 {
		data = compute.WidenToF32(t.dtype, t.data)
	}
	w := make([]float32, len(data)/4)
	for i := range w {
		w[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
	}
	return w, nil
}

// gemmaEmbeddings uploads the scaled embedding table the lookups read; the head, when tied,
// keeps the table as stored.
func gemmaEmbeddings(u *uploader, c Config) (compute.Tensor, error) {
	const name = "model.embed_tokens.weight"
	t, ok, err := u.ckpt.tensor(name)
	switch {
	case err != nil:
		return nil, err
	case !ok:
		return nil, fmt.Errorf("engine: the checkpoint has no tensor %s", u.ckpt.fileName(name))
	}
	if t.mlx != nil {
		return nil, fmt.Errorf("engine: tensor %s is quantized by MLX; tfd runs Gemma 3's embeddings in F32, F16 or BF16", t.name)
	}
	scaled, err := scaledEmbeddings(t, c.Hidden)
	if err != nil {
		return nil, err
	}
	return u.upload(name, scaled, []int{c.Vocab, c.Hidden})
}
