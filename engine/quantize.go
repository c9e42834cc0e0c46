package engine

import (
	"fmt"
	"runtime"
	"strings"
	"sync"

	"tfd/compute"
	"tfd/quant"
)

// Quantization is model.quantize: whether the weight matrices of a 16- or 32-bit checkpoint are
// quantized as they load. Norms and biases never are. The embedding table is, since with tied
// embeddings (as in most small models) it is the logits head, the largest matrix a decode step
// reads, and otherwise it saves memory at the cost of dequantizing one row a token. With q4 the
// table and the head take Q8_0, as llama.cpp keeps its output head wider than 4 bits: the logits
// are the most sensitive product. A checkpoint that is quantized already (MLX affine) loads its
// packed weights as they are, whatever this says.
type Quantization string

// The quantizations model.quantize names.
const (
	NoQuantization Quantization = ""
	QuantizeQ8     Quantization = "q8" // Q8_0: 8.5 bits a weight
	QuantizeQ4     Quantization = "q4" // Q4_0, Q8_0 for the embedding table and the head: 4.5 bits a weight
)

// ParseQuantization reads a model.quantize value.
func ParseQuantization(s string) (Quantization, error) {
	switch q := Quantization(s); q {
	case NoQuantization, QuantizeQ8, QuantizeQ4:
		return q, nil
	}
	return "", fmt.Errorf(`engine: model.quantize %q: want "" (the checkpoint's dtypes), "q8" or "q4"`, s)
}

// dtypeFor returns the dtype a checkpoint tensor, by its Hugging Face name (or a GGUF file's), is
// quantized to at load, or false when it loads as it is: under q, every F32, F16 or BF16 weight
// matrix ("….weight", rows a multiple of 32 elements) but a mixture's router. A matrix has two
// dimensions, or three for a stack of a mixture's experts ([experts, out, in]: a GGUF file's
// stacks, and a folder's experts, one by one as stored and stacked at load), which ExpertMatMul
// runs quantized as MatMul runs a matrix. The router is small and decides which experts run, as
// llama.cpp keeps its ffn_gate_inp unquantized.
func (q Quantization) dtypeFor(name string, dtype compute.DType, shape []int) (compute.DType, bool) {
	if q == NoQuantization || len(shape) != 2 && len(shape) != 3 || shape[len(shape)-1]%quant.BlockSize != 0 ||
		!isWeight(name) || strings.HasSuffix(name, ".mlp.gate.weight") || strings.HasSuffix(name, ".mlp.router.weight") ||
		strings.HasSuffix(name, ".ffn_gate_inp.weight") {
		return 0, false
	}
	if dtype != compute.F32 && dtype != compute.F16 && dtype != compute.BF16 {
		return 0, false
	}
	if q == QuantizeQ4 && name != "model.embed_tokens.weight" && name != "lm_head.weight" {
		return compute.Q4_0, true
	}
	return compute.Q8_0, true
}

// isWeight reports whether name is a weight tensor's (the halves of the MTP head's fc are named
// after it with their columns appended).
func isWeight(name string) bool {
	return strings.HasSuffix(name, ".weight") || strings.Contains(name, ".weight[")
}

// quantizeTensor returns the rows of t, an F32, F16 or BF16 matrix or stack of experts' matrices
// (every dimension but the last is rows), quantized to dtype (Q8_0, Q4_0, or for ExportGGUF Q4_K
// and Q6_K) as Upload takes them, the rows spread over the machine's cores.
func quantizeTensor(t stored, dtype compute.DType) []byte {
	in := t.shape[len(t.shape)-1]
	rows := 1
	for _, d := range t.shape[:len(t.shape)-1] {
		rows *= d
	}
	rowBytes := quant.RowBytesQ8_0(in)
	quantize := quant.QuantizeQ8_0
	switch dtype {
	case compute.Q4_0:
		rowBytes, quantize = quant.RowBytesQ4_0(in), quant.QuantizeQ4_0
	case compute.Q4_K:
		rowBytes, quantize = quant.RowBytesQ4_K(in), quant.QuantizeQ4_K
	case compute.Q6_K:
		rowBytes, quantize = quant.RowBytesQ6_K(in), quant.QuantizeQ6_K
	}
	size := t.dtype.Size()
	out := make([]byte, rows*rowBytes)
	workers := min(runtime.GOMAXPROCS(0), max(1, rows/64))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			row := make([]float32, in)
			for r := w * rows / workers; r < (w+1)*rows/workers; r++ {
				src := t.data[r*in*size : (r+1)*in*size]
				switch t.dtype {
				case compute.BF16:
					quant.WidenBF16(row, src)
				case compute.F16:
					quant.WidenF16(row, src)
				default:
					quant.WidenF32(row, src)
				}
				quantize(out[r*rowBytes:(r+1)*rowBytes], row)
			}
		})
	}
	wg.Wait()
	return out
}

// ggufHFName returns the Hugging Face name of the GGUF tensor name where dtypeFor's policy needs
// it (the embedding table and the head); other names come back as they are, which the policy
// treats the same (every GGUF weight matrix's name ends in ".weight" too).
func ggufHFName(name string) string {
	for hf, g := range ggufGlobalNames {
		if g == name {
			return hf
		}
	}
	return name
}
