package engine

import (
	"fmt"
	"strings"

	"tfd/compute"
)

// Qwen3-Next's weights, read in the Hub's layout and rearranged at load so that the forward runs
// the ops every family shares. Each rearrangement moves whole rows of a matrix (or elements of a
// vector), so every output element is the dot product it was, bit for bit:
//
//   - in_proj_qkvz interleaves its outputs by key-head group (q, k, v, z of group 0, then of
//     group 1 …; transformers' fix_query_key_value_ordering undoes it at every step): its rows
//     are regrouped into one matrix of all queries, keys and values (the convolution's channels)
//     and one of all z; in_proj_ba's into all b then all a.
//   - q_proj holds each head's query and then its gate: split into two matrices.
//   - Partial rotary: RoPE pairs dimension j with j + headDim/2 of a head; Qwen3-Next turns only
//     the first RotaryDim dimensions, pairing j with j + RotaryDim/2. The query and key rows (and
//     the q/k norms' weights) are permuted so that the turned pairs sit at j and j + headDim/2
//     and the rest fill the other places, where an inverse frequency of 0 leaves them as they are
//     (cos 0 = 1, sin 0 = 0, exactly). Values are not permuted: attention's output, and the gate
//     on it, are in the order transformers has. Scores sum the same products in another order.

// deltaWeights is one gated DeltaNet layer.
type deltaWeights struct {
	qkv    compute.Tensor // [convChannels, hidden]: all queries, keys and values
	z      compute.Tensor // [vHeads·vDim, hidden]: the output gate
	ba     compute.Tensor // [2·vHeads, hidden]: all b, then all a
	conv   compute.Tensor // F32 [convChannels, kernel]
	aLog   compute.Tensor // [vHeads]
	dtBias compute.Tensor // [vHeads]
	norm   compute.Tensor // [vDim]: RMSNormGated's weight, as stored (not 1 + w)
	out    compute.Tensor // [hidden, vHeads·vDim]

	// state is the layer's index among the DeltaNet layers, which picks its state tensors.
	state int
}

// isNextNorm reports whether the tensor named hf is one of Qwen3-Next's zero-centred RMSNorm
// weights, which act as (1 + w): every norm but the DeltaNet's gated one, the MTP head's two
// before its fc among them (Qwen3NextRMSNorm in vLLM's head; llama.cpp's converter adds their 1
// as it does the others').
func isNextNorm(hf string) bool {
	switch hf {
	case "mtp.pre_fc_norm_embedding.weight", "mtp.pre_fc_norm_hidden.weight":
		return true
	}
	return strings.HasSuffix(hf, "norm.weight") && !strings.HasSuffix(hf, "linear_attn.norm.weight")
}

// loadNextLayer uploads one Qwen3-Next decoder layer: its norms, its token mixer (a gated
// DeltaNet or gated attention), and its MLP (a mixture with a shared expert, or dense).
func loadNextLayer(u *uploader, c Config, prefix string, linear, sparse bool, l *layerWeights) error {
	var err error
	if l.inputNorm, err = u.tensor(prefix+"input_layernorm.weight", c.Hidden); err != nil {
		return err
	}
	if l.postNorm, err = u.tensor(prefix+"post_attention_layernorm.weight", c.Hidden); err != nil {
		return err
	}
	if linear {
		l.delta = &deltaWeights{}
		err = loadDelta(u, c, prefix+"linear_attn.", l.delta)
	} else {
		err = loadGatedAttention(u, c, prefix+"self_attn.", l)
	}
	if err != nil {
		return err
	}
	if !sparse {
		return loadSteps(u, c, prefix, []step{
			{&l.gate, "mlp.gate_proj.weight", true, []int{c.Intermediate, c.Hidden}},
			{&l.up, "mlp.up_proj.weight", true, []int{c.Intermediate, c.Hidden}},
			{&l.down, "mlp.down_proj.weight", true, []int{c.Hidden, c.Intermediate}},
		})
	}
	if l.router, err = u.tensor(prefix+"mlp.gate.weight", c.MoE.Experts, c.Hidden); err != nil {
		return err
	}
	if err := loadExperts(u, c, prefix, l); err != nil {
		return err
	}
	if s := c.Next.SharedIntermediate; s > 0 {
		return loadSteps(u, c, prefix, []step{
			{&l.sharedGate, "mlp.shared_expert.gate_proj.weight", true, []int{s, c.Hidden}},
			{&l.sharedUp, "mlp.shared_expert.up_proj.weight", true, []int{s, c.Hidden}},
			{&l.sharedDown, "mlp.shared_expert.down_proj.weight", true, []int{c.Hidden, s}},
			{&l.sharedExpertGate, "mlp.shared_expert_gate.weight", true, []int{1, c.Hidden}},
		})
	}
	return nil
}

// loadSteps uploads the steps' tensors, all of which the family has.
func loadSteps(u *uploader, c Config, prefix string, steps []step) error {
	for _, s := range steps {
		t, err := u.tensor(prefix+s.name, s.shape...)
		if err != nil {
			return err
		}
		*s.dst = t
	}
	return nil
}

// loadDelta uploads a gated DeltaNet layer, its projections regrouped head by head.
func loadDelta(u *uploader, c Config, prefix string, d *deltaWeights) error {
	n := c.Next
	kh, vh, kd, vd := n.Delta()
	r := vh / kh // value heads per key head
	keyDim, valueDim := kh*kd, vh*vd
	qkvz, err := u.stored(prefix+"in_proj_qkvz.weight", 2*keyDim+2*valueDim, c.Hidden)
	if err != nil {
		return err
	}
	// Group g's rows: q (kd), k (kd), v (r·vd), z (r·vd).
	group := 2*kd + 2*r*vd
	var qkvRows, zRows []int
	for part, width := range []int{kd, kd, r * vd} {
		off := []int{0, kd, 2 * kd}[part]
		for g := range kh {
			for i := range width {
				qkvRows = append(qkvRows, g*group+off+i)
			}
		}
	}
	for g := range kh {
		for i := range r * vd {
			zRows = append(zRows, g*group+2*kd+r*vd+i)
		}
	}
	if d.qkv, err = u.upload(prefix+"in_proj_qkvz.weight", pickRows(qkvz, qkvRows, "[q k v]"), []int{len(qkvRows), c.Hidden}); err != nil {
		return err
	}
	if d.z, err = u.upload(prefix+"in_proj_qkvz.weight", pickRows(qkvz, zRows, "[z]"), []int{valueDim, c.Hidden}); err != nil {
		return err
	}
	ba, err := u.stored(prefix+"in_proj_ba.weight", 2*vh, c.Hidden)
	if err != nil {
		return err
	}
	// Group g's rows: b (r), a (r).
	var baRows []int
	for part := range 2 {
		for g := range kh {
			for i := range r {
				baRows = append(baRows, g*2*r+part*r+i)
			}
		}
	}
	if d.ba, err = u.upload(prefix+"in_proj_ba.weight", pickRows(ba, baRows, "[b a]"), []int{2 * vh, c.Hidden}); err != nil {
		return err
	}
	conv, err := u.stored(prefix+"conv1d.weight", n.ConvChannels(), 1, n.ConvKernel)
	if err != nil {
		return err
	}
	w, err := storedFloats(conv)
	if err != nil {
		return err
	}
	conv = stored{name: conv.name, dtype: compute.F32, shape: []int{n.ConvChannels(), n.ConvKernel}, data: float32Bytes(w)}
	if d.conv, err = u.upload(prefix+"conv1d.weight (F32)", conv, conv.shape); err != nil {
		return err
	}
	return loadSteps(u, c, prefix, []step{
		{&d.aLog, "A_log", true, []int{vh}},
		{&d.dtBias, "dt_bias", true, []int{vh}},
		{&d.norm, "norm.weight", true, []int{vd}},
		{&d.out, "out_proj.weight", true, []int{c.Hidden, valueDim}},
	})
}

// loadGatedAttention uploads a gated attention layer: q_proj split into queries and their gate,
// the queries, keys and q/k norms permuted for partial rotary.
func loadGatedAttention(u *uploader, c Config, prefix string, l *layerWeights) error {
	hd := c.HeadDim
	q, kv := c.Heads*hd, c.KVHeads*hd
	perm := rotaryPermutation(hd, c.Next.RotaryDim)
	qp, err := u.stored(prefix+"q_proj.weight", 2*q, c.Hidden)
	if err != nil {
		return err
	}
	var qRows, gateRows []int
	for h := range c.Heads {
		for j := range hd {
			qRows = append(qRows, h*2*hd+perm[j])
			gateRows = append(gateRows, h*2*hd+hd+j)
		}
	}
	if l.q, err = u.upload(prefix+"q_proj.weight", pickRows(qp, qRows, "[queries]"), []int{q, c.Hidden}); err != nil {
		return err
	}
	if l.qGate, err = u.upload(prefix+"q_proj.weight", pickRows(qp, gateRows, "[gates]"), []int{q, c.Hidden}); err != nil {
		return err
	}
	kp, err := u.stored(prefix+"k_proj.weight", kv, c.Hidden)
	if err != nil {
		return err
	}
	if l.k, err = u.upload(prefix+"k_proj.weight", pickRows(kp, headRows(c.KVHeads, perm), "[permuted]"), []int{kv, c.Hidden}); err != nil {
		return err
	}
	for _, s := range []struct {
		dst  *compute.Tensor
		name string
	}{{&l.qNorm, "q_norm.weight"}, {&l.kNorm, "k_norm.weight"}} {
		t, err := u.stored(prefix+s.name, hd)
		if err != nil {
			return err
		}
		if *s.dst, err = u.upload(prefix+s.name, pickRows(t, perm, "[permuted]"), []int{hd}); err != nil {
			return err
		}
	}
	return loadSteps(u, c, prefix, []step{
		{&l.v, "v_proj.weight", true, []int{kv, c.Hidden}},
		{&l.o, "o_proj.weight", true, []int{c.Hidden, q}},
	})
}

// rotaryPermutation returns, for each place j of a head of headDim, the dimension of
// transformers' head that goes there, so that RoPE's pairs (j, j + headDim/2) are partial
// rotary's (i, i + rotary/2) for j = i < rotary/2, and the dimensions rotary … headDim−1, which
// it leaves alone, fill the places left in order.
func rotaryPermutation(headDim, rotary int) []int {
	half, rhalf := headDim/2, rotary/2
	perm := make([]int, headDim)
	pass := rotary
	for j := range half {
		if j < rhalf {
			perm[j], perm[half+j] = j, rhalf+j
		}
	}
	for _, j := range []int{0, half} {
		for i := rhalf; i < half; i++ {
			perm[j+i] = pass
			pass++
		}
	}
	return perm
}

// headRows returns the rows of heads heads of len(perm) rows each, each head's permuted.
func headRows(heads int, perm []int) []int {
	rows := make([]int, 0, heads*len(perm))
	for h := range heads {
		for _, j := range perm {
			rows = append(rows, h*len(perm)+j)
		}
	}
	return rows
}

// stored returns the named tensor as the checkpoint holds it, checked against shape. Its rows
// can be moved one by one in a float type and in GGUF's quantized ones, whose rows are whole
// blocks; a tensor quantized by MLX is refused, since its scales and biases lie apart.
func (u *uploader) stored(name string, shape ...int) (stored, error) {
	t, ok, err := u.ckpt.tensor(name)
	switch {
	case err != nil:
		return t, err
	case !ok:
		return t, fmt.Errorf("engine: the checkpoint has no tensor %s", u.ckpt.fileName(name))
	case t.mlx != nil || t.bytes:
		return t, fmt.Errorf("engine: tensor %s is quantized by MLX; tfd rearranges Qwen3-Next's projections in F32, F16, BF16 or GGUF's quantized types", t.name)
	}
	if n, err := t.dtype.Bytes(shape); err != nil || n != len(t.data) || !sameDims(t.shape, shape) {
		return t, fmt.Errorf("engine: tensor %s has shape %v, %s implies %v", t.name, t.shape, u.ckpt.configName(), shape)
	}
	return t, nil
}

func sameDims(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// pickRows returns the rows of t (a matrix, or a vector's elements) in the order rows lists them.
// A row is its share of the bytes, whatever their encoding (GGUF's quantized rows are whole blocks).
func pickRows(t stored, rows []int, what string) stored {
	rowBytes := len(t.data) / t.shape[0]
	data := make([]byte, 0, len(rows)*rowBytes)
	for _, r := range rows {
		data = append(data, t.data[r*rowBytes:(r+1)*rowBytes]...)
	}
	shape := append([]int{len(rows)}, t.shape[1:]...)
	return stored{name: t.name + " " + what, dtype: t.dtype, shape: shape, data: data}
}

// deltaNet runs one gated DeltaNet layer on a.h into a.out: the projections, the causal
// convolution and the gated delta rule over each session's positions in order (through the
// states stageRows listed in a.steps), the gated RMSNorm, and the output projection.
func (m *Model) deltaNet(d *deltaWeights, rows int) {
	b, dn, a, n := m.backend, m.deltaOps, m.act, m.cfg.Next
	s := m.states
	// [rows, hidden] → queries, keys and values (the convolution's channels); z; b and a
	b.MatMul(a.mixed, a.h, d.qkv, nil, rows)
	b.MatMul(a.z, a.h, d.z, nil, rows)
	b.MatMul(a.ba, a.h, d.ba, nil, rows)
	dn.CausalConvSiLU(a.convOut, a.mixed, d.conv, s.conv[d.state], a.steps, rows)
	spec := compute.DeltaSpec{KHeads: n.KHeads, VHeads: n.VHeads, KDim: n.KDim, VDim: n.VDim}
	dn.GatedDeltaRule(a.core, a.convOut, a.ba, d.aLog, d.dtBias, s.rec[d.state], a.steps, rows, spec)
	// RMSNormGated: each value head normed, times w, times silu(z)
	b.RMSNorm(a.core, a.core, d.norm, rows*n.VHeads, m.cfg.NormEps)
	b.SiLUMul(a.z, a.z, a.core, rows)
	b.MatMul(a.out, a.z, d.out, nil, rows)
}
