package enginetest

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"tfd/compute"
	"tfd/compute/computetest"
	"tfd/engine/safetensors"
)

// GopherMoE writes the bundled model as a Qwen3-MoE checkpoint into a temporary folder and returns
// the folder: each layer's MLP becomes experts experts, expert e the MLP with its intermediate rows
// in an order of its own (gate's and up's rows and down's columns permuted alike: the same
// function in matrices of its own), and a router of small random weights picks 2 of them. The
// two weights are normalised, so the mixture is the MLP but for the rounding of its sums: a
// mixture with trained weights, whose logits show what quantizing its experts costs (the oracle's
// Qwen3-MoE, of random weights, moves as far as its logits' size at any rounding). The
// permutations move whole blocks (blockPerm), so each expert quantizes to the same values in
// GGUF's types, and a router that picks another expert on another backend changes only the
// rounding. The MTP head is left out (Qwen3-MoE has none).
func GopherMoE(t testing.TB, experts int) string {
	t.Helper()
	src := filepath.Join(RepoRoot(t), "models", "gopher")
	ckpt, err := safetensors.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer ckpt.Close()
	var config map[string]any
	raw, err := os.ReadFile(filepath.Join(src, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &config); err != nil {
		t.Fatal(err)
	}
	hidden, inter := int(config["hidden_size"].(float64)), int(config["intermediate_size"].(float64))
	if inter%256 != 0 {
		t.Fatalf("GopherMoE: the bundled model's intermediate size %d is no whole number of super-blocks", inter)
	}
	var out []safetensors.Tensor
	for _, name := range ckpt.Names() {
		w, _ := ckpt.Tensor(name)
		prefix, proj, isMLP := strings.Cut(name, ".mlp.")
		switch {
		case strings.HasPrefix(name, "mtp."):
		case !isMLP:
			out = append(out, w)
		default:
			if proj == "gate_proj.weight" {
				router := computetest.Randn(uint64(len(out)), experts*hidden)
				for i := range router {
					router[i] *= 0.05
				}
				out = append(out, safetensors.Tensor{Name: prefix + ".mlp.gate.weight", DType: "BF16", Shape: []int{experts, hidden},
					Data: computetest.Encode(compute.BF16, router)})
			}
			for e := range experts {
				out = append(out, safetensors.Tensor{Name: fmt.Sprintf("%s.mlp.experts.%d.%s", prefix, e, proj), DType: w.DType,
					Shape: w.Shape, Data: permuted(w, proj == "down_proj.weight", uint64(e), inter)})
			}
		}
	}
	dir := t.TempDir()
	WriteSafetensors(t, filepath.Join(dir, safetensors.SingleFile), out)
	config["architectures"] = []string{"Qwen3MoeForCausalLM"}
	config["model_type"] = "qwen3_moe"
	config["num_experts"], config["num_experts_per_tok"], config["moe_intermediate_size"] = experts, 2, inter
	config["norm_topk_prob"], config["decoder_sparse_step"], config["mlp_only_layers"] = true, 1, []int{}
	delete(config, "mtp_num_hidden_layers")
	if raw, err = json.Marshal(config); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"config.json": raw}
	for _, name := range []string{"tokenizer.json", "generation_config.json"} {
		if files[name], err = os.ReadFile(filepath.Join(src, name)); err != nil {
			t.Fatal(err)
		}
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// permuted returns the 16-bit matrix w with its n intermediate rows (or, for a down projection,
// its columns) in the order of a blockPerm drawn from seed; seed 0 keeps them as they are.
func permuted(w safetensors.Tensor, columns bool, seed uint64, n int) []byte {
	data := slices.Clone(w.Data)
	if seed == 0 {
		return data
	}
	perm := blockPerm(rand.New(rand.NewPCG(seed, 9)), n)
	rows, cols := w.Shape[0], w.Shape[1]
	for r := range rows {
		for c := range cols {
			from := perm[r]*cols + c
			if columns {
				from = r*cols + perm[c]
			}
			copy(data[2*(r*cols+c):2*(r*cols+c)+2], w.Data[2*from:2*from+2])
		}
	}
	return data
}

// blockPerm returns a permutation of n indices (a multiple of 256) that moves whole super-blocks
// of 256, whole blocks of 32 within a super-block and elements within each half block of 16: a
// row permuted by it holds, in every Q8_0 or Q4_0 block, Q4_K super-block and sub-block and Q6_K
// group of 16, the elements of one such unit of the row as it was, so it quantizes to the same
// values in another order.
func blockPerm(r *rand.Rand, n int) []int {
	perm := make([]int, 0, n)
	for _, sb := range r.Perm(n / 256) {
		for _, b := range r.Perm(8) {
			for h := range 2 {
				for _, j := range r.Perm(16) {
					perm = append(perm, sb*256+b*32+h*16+j)
				}
			}
		}
	}
	return perm
}

// WriteSafetensors writes tensors as one safetensors file: the header's length, the JSON header,
// the data back to back.
func WriteSafetensors(t testing.TB, path string, tensors []safetensors.Tensor) {
	t.Helper()
	header := map[string]any{}
	var data []byte
	for _, w := range tensors {
		header[w.Name] = map[string]any{"dtype": w.DType, "shape": w.Shape, "data_offsets": []int{len(data), len(data) + len(w.Data)}}
		data = append(data, w.Data...)
	}
	h, err := json.Marshal(header)
	if err != nil {
		t.Fatal(err)
	}
	file := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
	if err := os.WriteFile(path, append(append(file, h...), data...), 0o644); err != nil {
		t.Fatal(err)
	}
}
