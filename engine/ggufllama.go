package engine

import (
	"fmt"
	"strings"
)

// Llama in GGUF: llama.cpp's converter permutes the rows of each q and k head for its interleaved
// RoPE (conversion/llama.py, LlamaModel.permute); the loader and ExportGGUF move them between
// that order and the Hub's.

// ggufPermutedHeads returns the heads of a tensor whose rows llama.cpp's converter permutes for
// arch (llama's q and k projections, weights and biases), or 0.
func ggufPermutedHeads(arch string, c Config, hfName string) int {
	if arch != "llama" {
		return 0 // qwen2 and qwen3 run NeoX-style rotary embeddings in llama.cpp: rows as in HF
	}
	switch {
	case strings.HasSuffix(hfName, ".self_attn.q_proj.weight"), strings.HasSuffix(hfName, ".self_attn.q_proj.bias"):
		return c.Heads
	case strings.HasSuffix(hfName, ".self_attn.k_proj.weight"), strings.HasSuffix(hfName, ".self_attn.k_proj.bias"):
		return c.KVHeads
	}
	return 0
}

// ggufPermuteRows reorders the rows of each head between Hugging Face's order, which pairs row i
// with row i+half for rotate-half RoPE, and llama.cpp's, which pairs rows 2i and 2i+1 for its
// interleaved RoPE on llama: HF row j·half+i is GGUF row 2i+j. toGGUF picks the direction. Rows
// move whole, so any row encoding works. It returns a new slice.
func ggufPermuteRows(data []byte, rows, heads int, toGGUF bool) ([]byte, error) {
	if rows <= 0 || heads <= 0 || rows%heads != 0 || (rows/heads)%2 != 0 || len(data)%rows != 0 {
		return nil, fmt.Errorf("%d rows do not split into %d heads of an even number of rows", rows, heads)
	}
	rowBytes, perHead := len(data)/rows, rows/heads
	half := perHead / 2
	out := make([]byte, len(data))
	for h := range heads {
		for r := range perHead { // r is the HF row within the head
			hf, gg := h*perHead+r, h*perHead+2*(r%half)+r/half
			src, dst := gg, hf
			if toGGUF {
				src, dst = hf, gg
			}
			copy(out[dst*rowBytes:(dst+1)*rowBytes], data[src*rowBytes:(src+1)*rowBytes])
		}
	}
	return out, nil
}
