// Package qwen3shape writes a checkpoint of Qwen3-0.6B's shapes with random weights, for the tools
// that measure memory and speed on a model of a real size (tools/loadrss, tools/llamacpp/speed)
// without downloading one.
package qwen3shape

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
)

// qwen3Config is Qwen3-0.6B's config.json, but for the tokenizer: the weights are random.
const qwen3Config = `{
  "architectures": ["Qwen3ForCausalLM"],
  "attention_bias": false,
  "eos_token_id": 2,
  "head_dim": 128,
  "hidden_act": "silu",
  "hidden_size": 1024,
  "intermediate_size": 3072,
  "max_position_embeddings": 40960,
  "model_type": "qwen3",
  "num_attention_heads": 16,
  "num_hidden_layers": 28,
  "num_key_value_heads": 8,
  "rms_norm_eps": 1e-06,
  "rope_theta": 1000000,
  "tie_word_embeddings": true,
  "torch_dtype": "bfloat16",
  "vocab_size": 151936
}
`

// Write writes a checkpoint of Qwen3-0.6B's shapes into dir, random BF16 weights (normal,
// standard deviation 0.02; norms 1) in one model.safetensors, with its config.json and the
// tokenizer files of the model folder tok (the bundled model's, models.FS(), in the tools). A dir
// that holds a config.json is left as it is.
func Write(dir string, tok fs.FS) error {
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err == nil {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	type tensor struct {
		name  string
		shape []int
	}
	const hidden, inter, layers, q, kv, headDim, vocab = 1024, 3072, 28, 16 * 128, 8 * 128, 128, 151936
	tensors := []tensor{{"model.embed_tokens.weight", []int{vocab, hidden}}, {"model.norm.weight", []int{hidden}}}
	for l := range layers {
		p := fmt.Sprintf("model.layers.%d.", l)
		tensors = append(tensors,
			tensor{p + "input_layernorm.weight", []int{hidden}},
			tensor{p + "post_attention_layernorm.weight", []int{hidden}},
			tensor{p + "self_attn.q_proj.weight", []int{q, hidden}},
			tensor{p + "self_attn.k_proj.weight", []int{kv, hidden}},
			tensor{p + "self_attn.v_proj.weight", []int{kv, hidden}},
			tensor{p + "self_attn.o_proj.weight", []int{hidden, q}},
			tensor{p + "self_attn.q_norm.weight", []int{headDim}},
			tensor{p + "self_attn.k_norm.weight", []int{headDim}},
			tensor{p + "mlp.gate_proj.weight", []int{inter, hidden}},
			tensor{p + "mlp.up_proj.weight", []int{inter, hidden}},
			tensor{p + "mlp.down_proj.weight", []int{hidden, inter}})
	}
	header := map[string]any{"__metadata__": map[string]string{"format": "pt"}}
	offset := 0
	for _, t := range tensors {
		n := 2
		for _, d := range t.shape {
			n *= d
		}
		header[t.name] = map[string]any{"dtype": "BF16", "shape": t.shape, "data_offsets": []int{offset, offset + n}}
		offset += n
	}
	raw, err := json.Marshal(header)
	if err != nil {
		return err
	}
	// Pad the header to 8 bytes, as safetensors' writer does, so the data start aligned.
	raw = append(raw, strings.Repeat(" ", (8-len(raw)%8)%8)...)
	f, err := os.Create(filepath.Join(dir, "model.safetensors"))
	if err != nil {
		return err
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	w.Write(binary.LittleEndian.AppendUint64(nil, uint64(len(raw))))
	w.Write(raw)
	rng := rand.New(rand.NewPCG(1, 2))
	var b [2]byte
	for _, t := range tensors {
		n := 1
		for _, d := range t.shape {
			n *= d
		}
		for range n {
			v := float32(1)
			if len(t.shape) > 1 {
				v = float32(rng.NormFloat64() * 0.02)
			}
			binary.LittleEndian.PutUint16(b[:], uint16(math.Float32bits(v)>>16))
			w.Write(b[:])
		}
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("writing %s: %w", f.Name(), err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	for _, name := range []string{"tokenizer.json", "tokenizer_config.json", "generation_config.json"} {
		data, err := fs.ReadFile(tok, name)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(dir, "config.json"), []byte(qwen3Config), 0o644)
}
