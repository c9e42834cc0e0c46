package engine

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"tfd/compute"
)

// Qwen3-Next in GGUF, as llama.cpp's converter writes it (conversion/qwen.py, Qwen3NextModel, in
// the llama.cpp node-llama-cpp 3.21.1 ships) and its loader reads it (src/models/qwen3next.cpp,
// architecture "qwen3next"). The loader reads each tensor back into the Hub's layout, so that
// the family's own load (qwen3nextweights.go) rearranges it exactly as it rearranges a folder's:
//
//   - Every RMSNorm weight but the DeltaNet's gated one is stored as 1 + w, the converter's shift
//     (Qwen3-Next's norms multiply by 1 + w), so they load as they are. The converter adds the 1
//     in the checkpoint's dtype: from an F32 checkpoint that is the F32 sum the folder's load
//     uploads, bit for bit; a BF16 checkpoint's sum is rounded to BF16 before it is widened.
//   - in_proj_qkvz, whose rows interleave q, k, v and z by key-head group, is split into
//     attn_qkv (all queries, all keys, all values) and attn_gate (all z); they are put back in
//     the Hub's order, a permutation of whole rows. Older files hold it whole as ssm_in, in the
//     Hub's order.
//   - A_log is stored as ssm_a = −exp(A_log), exp taken by the converter (torch, F32). tfd's
//     DeltaNet op takes A_log and computes the exponential itself, so the loader gives it
//     log(−ssm_a), computed in F64 and rounded to F32, and checked to be a value whose exp,
//     rounded to F32, is −ssm_a again (a neighbour is taken where the rounding of the log
//     lands on one whose exp is not). That recovers a value the file's A is exactly the
//     exponential of, not necessarily the checkpoint's A_log: where exp maps several F32 values
//     to one (A_log below about 1) the file no longer says which, and torch's exp is not
//     always correctly rounded (on the fixture, 1 of its 12 values is 1 ulp off). The backend's
//     exp of the recovered value and of the checkpoint's can then differ in the last bit of A.
//   - dt_bias is ssm_dt.bias; conv1d is ssm_conv1d [channels, kernel] (the Hub's [channels, 1,
//     kernel] squeezed: the same bytes); in_proj_ba is ssm_ba, norm ssm_norm and out_proj
//     ssm_out, as the Hub has them; q_proj (each head's queries, then its gate) is attn_q as
//     it is, since llama.cpp turns qwen3next's heads as NeoX does.
//   - post_attention_layernorm is post_attention_norm; the shared expert is
//     ffn_{gate,up,down}_shexp and its gate ffn_gate_inp_shexp.
//   - The MTP head is block n_layer: blk.N.nextn.{eh_proj, enorm, hnorm, shared_head_norm} for
//     mtp.{fc, pre_fc_norm_embedding, pre_fc_norm_hidden, norm}, and its decoder layer under
//     block N's usual names; block_count counts it and nextn_predict_layers says how many blocks
//     are heads.
//   - The metadata: ssm.group_count key heads of ssm.state_size, ssm.time_step_rank value heads
//     of ssm.inner_size / ssm.time_step_rank, ssm.conv_kernel, full_attention_interval (4 when
//     absent: layer i is linear unless i+1 is a multiple) or attention.recurrent_layers, and
//     rope.dimension_count, the rotary part of each head. llama.cpp renormalises the experts'
//     weights for qwen3next whatever the checkpoint's norm_topk_prob said.

// ggufNextLayerNames are Qwen3-Next's tensors a layer, where they differ from ggufLayerNames.
// in_proj_qkvz is named by the first of its two tensors (nextQKVZ reads both).
var ggufNextLayerNames = map[string]string{
	"post_attention_layernorm.weight":    "post_attention_norm.weight",
	"linear_attn.in_proj_qkvz.weight":    "attn_qkv.weight",
	"linear_attn.in_proj_ba.weight":      "ssm_ba.weight",
	"linear_attn.conv1d.weight":          "ssm_conv1d.weight",
	"linear_attn.A_log":                  "ssm_a",
	"linear_attn.dt_bias":                "ssm_dt.bias",
	"linear_attn.norm.weight":            "ssm_norm.weight",
	"linear_attn.out_proj.weight":        "ssm_out.weight",
	"mlp.shared_expert.gate_proj.weight": "ffn_gate_shexp.weight",
	"mlp.shared_expert.up_proj.weight":   "ffn_up_shexp.weight",
	"mlp.shared_expert.down_proj.weight": "ffn_down_shexp.weight",
	"mlp.shared_expert_gate.weight":      "ffn_gate_inp_shexp.weight",
}

// ggufNextHeadNames maps the MTP head's own tensors to GGUF's, %d being the head's block (the
// backbone's layer count).
var ggufNextHeadNames = map[string]string{
	"mtp.fc.weight":                    "blk.%d.nextn.eh_proj.weight",
	"mtp.pre_fc_norm_embedding.weight": "blk.%d.nextn.enorm.weight",
	"mtp.pre_fc_norm_hidden.weight":    "blk.%d.nextn.hnorm.weight",
	"mtp.norm.weight":                  "blk.%d.nextn.shared_head_norm.weight",
}

// nextMTPLayerName renames the MTP head's decoder layer i ("mtp.layers.i.…") as the layer
// layers+i, as the converter does; other names are returned as they are.
func nextMTPLayerName(hf string, layers int) string {
	rest, ok := strings.CutPrefix(hf, "mtp.layers.")
	if !ok {
		return hf
	}
	i, suffix, ok := strings.Cut(rest, ".")
	n, err := strconv.Atoi(i)
	if !ok || err != nil || n < 0 {
		return hf
	}
	return fmt.Sprintf("model.layers.%d.%s", layers+n, suffix)
}

// readNext reads what Qwen3-Next adds to the config (c holds what readConfig read so far, its
// layer count still block_count, which counts the MTP head's blocks).
func (g *ggufCheckpoint) readNext(key func(string) string, c *Config) error {
	heads, _, err := g.intKey(key("nextn_predict_layers"))
	if err != nil {
		return err
	}
	if heads >= c.Layers {
		return g.errorf("%s is %d of %s %d: the file holds no model to draft for", key("nextn_predict_layers"), heads, key("block_count"), c.Layers)
	}
	if _, ok := g.file.Tensor("blk.0.attn_norm.weight"); !ok {
		return g.errorf("the file has no blk.0.attn_norm.weight: an MTP head alone (convert_hf_to_gguf.py --mtp) is no model to serve; serve the model's own file")
	}
	c.Layers -= heads
	c.MTPLayers = heads
	n := NextConfig{Enabled: true, Linear: make([]bool, c.Layers)}
	var inner int
	for _, k := range []struct {
		dst  *int
		name string
	}{
		{&n.ConvKernel, "ssm.conv_kernel"}, {&n.KDim, "ssm.state_size"}, {&n.KHeads, "ssm.group_count"},
		{&n.VHeads, "ssm.time_step_rank"}, {&inner, "ssm.inner_size"}, {&n.RotaryDim, "rope.dimension_count"},
	} {
		if *k.dst, err = g.requiredInt(key(k.name)); err != nil {
			return err
		}
	}
	if inner%n.VHeads != 0 {
		return g.errorf("%s %d is no multiple of %s %d", key("ssm.inner_size"), inner, key("ssm.time_step_rank"), n.VHeads)
	}
	n.VDim = inner / n.VHeads
	if n.VHeads%n.KHeads != 0 {
		return g.errorf("%s (%d value heads) is no multiple of %s (%d key heads)", key("ssm.time_step_rank"), n.VHeads, key("ssm.group_count"), n.KHeads)
	}
	if n.RotaryDim%2 != 0 || n.RotaryDim > c.HeadDim {
		return g.errorf("%s is %d; tfd wants an even number of rotary dimensions up to the head size %d", key("rope.dimension_count"), n.RotaryDim, c.HeadDim)
	}
	// llama.cpp's shared expert is as wide as the dense MLP where the file does not say.
	if n.SharedIntermediate, _, err = g.intKey(key("expert_shared_feed_forward_length")); err != nil {
		return err
	} else if n.SharedIntermediate == 0 {
		n.SharedIntermediate = c.Intermediate
	}
	if err := g.readNextLinear(key, c.Layers+heads, n.Linear); err != nil {
		return err
	}
	c.Next = n
	c.MoE, err = g.readExperts(key, c.Layers)
	return err
}

// readNextLinear marks the DeltaNet layers among the backbone's (linear), as llama.cpp does: from
// attention.recurrent_layers, one bool a block (the MTP head's false), or else from
// full_attention_interval.
func (g *ggufCheckpoint) readNextLinear(key func(string) string, blocks int, linear []bool) error {
	if v, ok := g.file.Lookup(key("attention.recurrent_layers")); ok {
		rec, isBools := v.Any().([]bool)
		if !isBools || len(rec) != blocks {
			return g.errorf("%s is %s; want %d bools, one a block", key("attention.recurrent_layers"), v.Describe(), blocks)
		}
		if slices.Contains(rec[len(linear):], true) {
			return g.errorf("%s marks an MTP block recurrent; tfd runs the head as an attention layer", key("attention.recurrent_layers"))
		}
		copy(linear, rec)
		return nil
	}
	interval, ok, err := g.intKey(key("full_attention_interval"))
	switch {
	case err != nil:
		return err
	case !ok:
		interval = 4 // llama.cpp's default, as Qwen3NextConfig's
	case interval == 0:
		return g.errorf("%s is 0", key("full_attention_interval"))
	}
	for i := range linear {
		linear[i] = (i+1)%interval != 0
	}
	return nil
}

// nextTensor returns the tensor of a Hugging Face name from a qwen3next file, in the Hub's
// layout (see the top of this file).
func (g *ggufCheckpoint) nextTensor(hf string) (stored, bool, error) {
	if n, ok := ggufNextHeadNames[hf]; ok {
		return g.named(fmt.Sprintf(n, g.cfg.Layers), hf)
	}
	hf = nextMTPLayerName(hf, g.cfg.Layers)
	var reshape func(stored) (stored, error)
	switch {
	case strings.HasSuffix(hf, ".linear_attn.in_proj_qkvz.weight"):
		return g.nextQKVZ(hf)
	case strings.HasSuffix(hf, ".linear_attn.A_log"):
		reshape = aLogFromSSMA
	case strings.HasSuffix(hf, ".linear_attn.conv1d.weight"):
		// [channels, kernel], the Hub's [channels, 1, kernel] squeezed: the same bytes.
		reshape = func(t stored) (stored, error) {
			if len(t.shape) == 2 {
				t.shape = []int{t.shape[0], 1, t.shape[1]}
			}
			return t, nil
		}
	case strings.HasSuffix(hf, ".mlp.shared_expert_gate.weight"):
		// The converter writes the Hub's [1, hidden]; llama.cpp reads [hidden] as well.
		reshape = func(t stored) (stored, error) {
			if len(t.shape) == 1 {
				t.shape = []int{1, t.shape[0]}
			}
			return t, nil
		}
	}
	t, ok, err := g.plainTensor(hf)
	if !ok || err != nil || reshape == nil {
		return t, ok, err
	}
	t, err = reshape(t)
	if err != nil {
		return t, true, g.errorf("tensor %s: %w", t.name, err)
	}
	return t, true, nil
}

// nextQKVZ returns a DeltaNet layer's in_proj_qkvz in the Hub's order, rows interleaved by key-head
// group (q, k, v, z of group 0, then of group 1 …), from the file's attn_qkv (all q, all k, all v)
// and attn_gate (all z), or from ssm_in, which older files hold in the Hub's order.
func (g *ggufCheckpoint) nextQKVZ(hf string) (stored, bool, error) {
	layer := strings.TrimSuffix(strings.TrimPrefix(hf, "model.layers."), ".linear_attn.in_proj_qkvz.weight")
	if t, ok := g.file.Tensor("blk." + layer + ".ssm_in.weight"); ok {
		return g.named(t.Name, hf)
	}
	qkv, ok, err := g.plainTensor(hf)
	if !ok || err != nil {
		return qkv, ok, err
	}
	gateName := "blk." + layer + ".attn_gate.weight"
	z, ok, err := g.named(gateName, hf)
	switch {
	case err != nil:
		return z, true, err
	case !ok:
		return stored{}, true, g.errorf("the file has %s but no %s: a DeltaNet layer needs both halves of in_proj_qkvz", qkv.name, gateName)
	}
	n := g.cfg.Next
	kh, vh, kd, vd := n.Delta()
	r := vh / kh
	qkvRows, zRows := 2*kh*kd+vh*vd, vh*vd
	switch {
	case qkv.mlx != nil || z.mlx != nil || qkv.dtype != z.dtype:
		return stored{}, true, g.errorf("%s is %v and %s %v; tfd wants both halves of in_proj_qkvz in one type", qkv.name, qkv.dtype, z.name, z.dtype)
	case len(qkv.shape) != 2 || len(z.shape) != 2 || qkv.shape[0] != qkvRows || z.shape[0] != zRows || qkv.shape[1] != z.shape[1]:
		return stored{}, true, g.errorf("%s is %v and %s %v; the metadata implies [%d, hidden] and [%d, hidden]", qkv.name, qkv.shape, z.name, z.shape, qkvRows, zRows)
	}
	rowBytes := len(qkv.data) / qkvRows // whole rows, whatever the row's encoding
	row := func(t stored, i int) []byte { return t.data[i*rowBytes : (i+1)*rowBytes] }
	data := make([]byte, 0, len(qkv.data)+len(z.data))
	for grp := range kh {
		for i := range kd {
			data = append(data, row(qkv, grp*kd+i)...) // q
		}
		for i := range kd {
			data = append(data, row(qkv, kh*kd+grp*kd+i)...) // k
		}
		for i := range r * vd {
			data = append(data, row(qkv, 2*kh*kd+grp*r*vd+i)...) // v
		}
		for i := range r * vd {
			data = append(data, row(z, grp*r*vd+i)...) // z
		}
	}
	name := qkv.name + " + " + z.name
	return stored{name: name, dtype: qkv.dtype, shape: []int{qkvRows + zRows, qkv.shape[1]}, data: data}, true, nil
}

// aLogFromSSMA returns A_log from ssm_a = −exp(A_log): for each value head the F32 x nearest
// log(−a) whose exp, rounded to F32, is −a, in F32 (see the top of this file).
func aLogFromSSMA(t stored) (stored, error) {
	a, err := storedFloats(t)
	if err != nil {
		return t, err
	}
	data := make([]byte, 4*len(a))
	for i, v := range a {
		if !(v < 0) || math.IsInf(float64(v), 0) {
			return t, fmt.Errorf("ssm_a[%d] is %g; −exp(A_log) is negative and finite", i, v)
		}
		binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(logOfExp(-v)))
	}
	return stored{name: t.name + " (A_log = log(−ssm_a))", dtype: compute.F32, shape: t.shape, data: data}, nil
}

// logOfExp returns an F32 x with float32(exp(x)) == y, the one nearest log(y) where several are;
// where none is (y is between the exponentials of two neighbouring F32 values), the rounded log.
func logOfExp(y float32) float32 {
	x := float32(math.Log(float64(y)))
	hits := func(x float32) bool { return float32(math.Exp(float64(x))) == y }
	if hits(x) {
		return x
	}
	up, down := x, x
	for range 4 {
		up, down = math.Nextafter32(up, float32(math.Inf(1))), math.Nextafter32(down, float32(math.Inf(-1)))
		if hits(up) {
			return up
		}
		if hits(down) {
			return down
		}
	}
	return x
}
