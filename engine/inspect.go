package engine

import (
	"fmt"
	"slices"

	"tfd/compute"
)

// WeightInfo describes a checkpoint's tensors from their headers alone.
type WeightInfo struct {
	// Params counts the elements of every tensor (for an MLX-quantized matrix, of its packed words,
	// scales and biases).
	Params int64
	// FileBytes is the tensors' size as stored in the files (their dtype).
	FileBytes int64
	// Bytes is the tensors' size as loaded: FileBytes, less what quantizing at load saves.
	Bytes int64
	// DTypes lists the dtypes the tensors use, sorted.
	DTypes []string
}

// Inspect reads a model's config and its tensors' headers (the files are mapped or, for an
// embedded model, read; no weight is placed anywhere): `tfd plan` sizes a model this way without
// loading it. Every tensor is counted, the MTP head's included, as it loads under q.
func Inspect(src Source, q Quantization) (Config, WeightInfo, error) {
	loc, err := src.locate()
	if err != nil {
		return Config{}, WeightInfo{}, err
	}
	var info WeightInfo
	// add counts a tensor; hf is its Hugging Face name, which says whether q quantizes it.
	add := func(hf string, dt compute.DType, shape []int, elements, bytes int64, dtype string) error {
		info.Params += elements
		info.FileBytes += bytes
		info.Bytes += bytes
		if qdt, ok := q.dtypeFor(hf, dt, shape); ok {
			size, err := qdt.Bytes(shape)
			if err != nil {
				return fmt.Errorf("engine: tensor %s: %w", hf, err)
			}
			info.Bytes += int64(size) - bytes
		}
		if !slices.Contains(info.DTypes, dtype) {
			info.DTypes = append(info.DTypes, dtype)
		}
		return nil
	}
	var cfg Config
	if loc.gguf != "" {
		g, err := openGGUF(loc.gguf)
		if err != nil {
			return Config{}, WeightInfo{}, err
		}
		defer g.close()
		cfg = g.cfg
		for _, t := range g.file.Tensors {
			dt, _ := ggufDType(t.Type)
			if err := add(ggufHFName(t.Name), dt, t.Shape(), t.Elements(), int64(len(t.Data)), t.Type.String()); err != nil {
				return Config{}, WeightInfo{}, err
			}
			if t.Name == "token_embd.weight" && cfg.Gemma.Enabled && cfg.TieEmbeddings {
				info.Bytes += int64(len(t.Data)) // the lookups' scaled copy, as below
			}
		}
	} else {
		if cfg, _, err = readConfig(loc.fsys, loc.where); err != nil {
			return Config{}, WeightInfo{}, err
		}
		c, err := openSafetensors(loc)
		if err != nil {
			return Config{}, WeightInfo{}, err
		}
		defer c.Close()
		for _, n := range c.Names() {
			t, _ := c.Tensor(n)
			if err := add(t.Name, dtypes[t.DType], t.Shape, int64(t.Elements()), int64(len(t.Data)), t.DType); err != nil {
				return Config{}, WeightInfo{}, err
			}
			if n == "model.embed_tokens.weight" && cfg.Gemma.Enabled && cfg.TieEmbeddings {
				// Gemma's lookups read a scaled copy beside the tied head's table (loadWeights).
				info.Bytes += int64(len(t.Data))
			}
		}
	}
	slices.Sort(info.DTypes)
	return cfg, info, nil
}
