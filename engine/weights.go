package engine

import (
	"errors"
	"fmt"
	"slices"

	"tfd/compute"
)

// layerWeights holds one decoder layer. Matrices are [out, in] as checkpoints store them; biases
// and the q/k norms are nil where the family has none.
type layerWeights struct {
	inputNorm compute.Tensor // [hidden]
	postNorm  compute.Tensor // [hidden]: before the MLP (Gemma's pre_feedforward_layernorm)
	// Gemma's norms of the attention's and the MLP's outputs, before each residual add.
	attnOutNorm, mlpOutNorm compute.Tensor // [hidden]

	q, k, v, o                 compute.Tensor // [heads·headDim, hidden], [kvHeads·headDim, hidden] ×2, [hidden, heads·headDim]
	qBias, kBias, vBias, oBias compute.Tensor
	qNorm, kNorm               compute.Tensor // [headDim] (Qwen3)
	sinks                      compute.Tensor // [heads] F32: GPT-OSS's attention sinks

	gate, up, down             compute.Tensor // [inter, hidden] ×2, [hidden, inter]
	gateBias, upBias, downBias compute.Tensor

	// A sparse layer of a mixture of experts has these instead of gate, up and down: its router
	// and every expert's matrices, stacked (checkpoints store them one by one).
	router                           compute.Tensor // [experts, hidden]
	expertGate, expertUp, expertDown compute.Tensor // [experts, moeInter, hidden] ×2, [experts, hidden, moeInter]
	// GPT-OSS's router and experts have biases: [experts], [experts, moeInter] ×2, [experts, hidden].
	routerBias                                   compute.Tensor
	expertGateBias, expertUpBias, expertDownBias compute.Tensor

	// Qwen3-Next: a gated DeltaNet layer has delta instead of q, k, v and o; an attention layer
	// gates its output by sigmoid(qGate·h); a sparse layer adds a shared expert, scaled by
	// sigmoid(sharedExpertGate·h).
	delta                            *deltaWeights
	qGate                            compute.Tensor // [heads·headDim, hidden]
	sharedGate, sharedUp, sharedDown compute.Tensor // [sharedInter, hidden] ×2, [hidden, sharedInter]
	sharedExpertGate                 compute.Tensor // [1, hidden]
}

// weights is a whole model on the backend.
type weights struct {
	embed  compute.Tensor // [vocab, hidden]
	layers []layerWeights
	norm   compute.Tensor // [hidden]
	head   compute.Tensor // [vocab, hidden]: lm_head, or embed when the embeddings are tied
}

// uploader moves checkpoint tensors onto a backend, checking each one's shape, and remembers what
// it uploaded so a failed load can free it. Where the backend uses host memory (inPlace is set),
// it hands over the checkpoint's bytes to be used where they lie, and the checkpoint must stay
// open until the tensors are freed.
type uploader struct {
	ckpt     checkpoint
	backend  compute.Backend
	inPlace  compute.InPlaceUploader // the backend, when it implements it; nil otherwise
	quantize Quantization
	uploaded []compute.Tensor
	// normPlusOne, when set, names the RMSNorm weights w uploaded as 1 + w in F32 (Gemma's,
	// Qwen3-Next's).
	normPlusOne func(hf string) bool
}

// newUploader returns an uploader of ckpt's tensors onto backend.
func newUploader(ckpt checkpoint, backend compute.Backend, q Quantization) *uploader {
	u := &uploader{ckpt: ckpt, backend: backend, quantize: q}
	u.inPlace, _ = backend.(compute.InPlaceUploader)
	return u
}

// tensor uploads the named tensor, which must have the given shape.
func (u *uploader) tensor(name string, shape ...int) (compute.Tensor, error) {
	return u.optional(name, true, shape...)
}

// optional uploads the named tensor if the checkpoint has it; want says whether the family
// expects it, so a missing expected tensor is still an error.
func (u *uploader) optional(name string, want bool, shape ...int) (compute.Tensor, error) {
	t, ok, err := u.ckpt.tensor(name)
	switch {
	case err != nil:
		return nil, err
	case !ok && want:
		return nil, fmt.Errorf("engine: the checkpoint has no tensor %s", u.ckpt.fileName(name))
	case !ok:
		return nil, nil
	}
	return u.upload(name, t, shape)
}

// upload places t, the tensor named hf (its Hugging Face name), which must have the given shape:
// as it is, quantized (u.quantize), or, for the packed codes of an MLX-quantized matrix, with its
// scales and biases.
func (u *uploader) upload(hf string, t stored, shape []int) (compute.Tensor, error) {
	if u.normPlusOne != nil && u.normPlusOne(hf) && t.mlx == nil {
		var err error
		if t, err = plusOne(t); err != nil {
			return nil, err
		}
	}
	dt, data := t.dtype, t.data
	switch {
	case t.bytes:
		return nil, fmt.Errorf("engine: tensor %s is U8; tfd reads U8 tensors only as GPT-OSS's MXFP4 experts", t.name)
	case t.mlx != nil:
		var err error
		if dt, data, err = affine(t, shape); err != nil {
			return nil, err
		}
	case !slices.Equal(t.shape, shape):
		return nil, fmt.Errorf("engine: tensor %s has shape %v, %s implies %v", t.name, t.shape, u.ckpt.configName(), shape)
	}
	atLoad := false
	if q, ok := u.quantize.dtypeFor(hf, t.dtype, shape); ok {
		dt, data, atLoad = q, quantizeTensor(t, q), true
	}
	var ct compute.Tensor
	var err error
	if u.inPlace != nil {
		ct, err = u.inPlace.UploadInPlace(dt, shape, data)
	} else {
		ct, err = u.backend.Upload(dt, shape, data)
	}
	switch {
	case errors.Is(err, compute.ErrNoQuantizedKernels) && atLoad:
		return nil, fmt.Errorf("engine: upload %s: %w: serve it with model.backend = \"cpu\", or leave model.quantize empty", t.name, err)
	case errors.Is(err, compute.ErrNoQuantizedKernels):
		// The checkpoint itself is quantized (a Q8_0 GGUF file, an MLX checkpoint).
		return nil, fmt.Errorf("engine: upload %s: %w: serve this quantized checkpoint with model.backend = \"cpu\", or serve a 16-bit one on this backend", t.name, err)
	}
	if err != nil {
		return nil, fmt.Errorf("engine: upload %s: %w", t.name, err)
	}
	u.uploaded = append(u.uploaded, ct)
	if u.inPlace == nil || dt.Quantized() {
		// The backend copied the tensor (an in-place backend copies quantized matrices, which it
		// rearranges): the checkpoint's pages of it need not stay resident beside the copy, so a
		// load's peak is the copies plus one tensor, not plus the whole file.
		u.ckpt.release(t.data)
	}
	return ct, nil
}

// stacked uploads the n tensors named name(0) … name(n-1), each of the given shape and all of one
// dtype, as one tensor of [n, shape…]: a mixture's experts, which checkpoints store one by one. A
// GGUF file's quantized experts stack as they are (a quantized row is whole blocks of its own
// elements), in the layout compute.Q8_0 gives a stack.
func (u *uploader) stacked(n int, name func(i int) string, shape ...int) (compute.Tensor, error) {
	var all stored
	for i := range n {
		t, ok, err := u.ckpt.tensor(name(i))
		switch {
		case err != nil:
			return nil, err
		case !ok:
			return nil, fmt.Errorf("engine: the checkpoint has no tensor %s", u.ckpt.fileName(name(i)))
		case t.mlx != nil:
			// mlx-lm stacks a mixture's experts in switch_mlp tensors, which tfd does not read;
			// an expert quantized alone is no checkpoint it writes.
			return nil, fmt.Errorf("engine: tensor %s is quantized by MLX; tfd runs a mixture's experts in F32, F16 or BF16 from a folder, quantized from a GGUF file (Q8_0, Q4_0, Q4_K, Q6_K)", t.name)
		case !slices.Equal(t.shape, shape):
			return nil, fmt.Errorf("engine: tensor %s has shape %v, %s implies %v", t.name, t.shape, u.ckpt.configName(), shape)
		case i == 0:
			all = stored{name: t.name + " …", dtype: t.dtype, shape: append([]int{n}, shape...), data: make([]byte, 0, n*len(t.data))}
		case t.dtype != all.dtype:
			return nil, fmt.Errorf("engine: tensor %s is %v and %s is %v; tfd wants one dtype for all of a layer's experts", t.name, t.dtype, u.ckpt.fileName(name(0)), all.dtype)
		}
		all.data = append(all.data, t.data...)
	}
	return u.upload(name(0), all, all.shape)
}

// loadWeights uploads every tensor of the model described by c. progress, if not nil, is called
// after each layer with the layers done and the total.
func loadWeights(u *uploader, c Config, progress func(done, total int)) (weights, error) {
	var w weights
	var err error
	if c.Gemma.Enabled {
		w.embed, err = gemmaEmbeddings(u, c)
	} else {
		w.embed, err = u.tensor("model.embed_tokens.weight", c.Vocab, c.Hidden)
	}
	if err != nil {
		return w, err
	}
	w.layers = make([]layerWeights, c.Layers)
	linear := 0
	for i := range w.layers {
		l, prefix := &w.layers[i], fmt.Sprintf("model.layers.%d.", i)
		var err error
		if c.Next.Enabled {
			err = loadNextLayer(u, c, prefix, c.Next.Linear[i], c.MoE.Sparse(i), l)
		} else {
			err = loadLayer(u, c, prefix, c.MoE.Sparse(i), l)
		}
		if err != nil {
			return w, err
		}
		if l.delta != nil {
			l.delta.state = linear // its index among the DeltaNet layers picks its states
			linear++
		}
		if progress != nil {
			progress(i+1, c.Layers)
		}
	}
	if w.norm, err = u.tensor("model.norm.weight", c.Hidden); err != nil {
		return w, err
	}
	// Tie when the checkpoint says so or stores no head (save_pretrained omits a tied lm_head).
	if w.head, err = u.optional("lm_head.weight", false, c.Vocab, c.Hidden); err != nil {
		return w, err
	}
	switch {
	case (w.head == nil || c.TieEmbeddings) && c.Gemma.Enabled:
		// The lookups read a scaled copy; the head is the table as stored.
		w.head, err = u.tensor("model.embed_tokens.weight", c.Vocab, c.Hidden)
	case w.head == nil || c.TieEmbeddings:
		w.head = w.embed
	}
	if err != nil {
		return w, err
	}
	return w, nil
}

// step is one tensor of a layer: where it goes, its name after the layer's prefix, whether the
// family has it, and its shape.
type step struct {
	dst   *compute.Tensor
	name  string
	want  bool
	shape []int
}

// loadLayer uploads one decoder layer; sparse says whether its MLP is a mixture of experts.
func loadLayer(u *uploader, c Config, prefix string, sparse bool, l *layerWeights) error {
	q, kv := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	steps := []step{
		{&l.inputNorm, "input_layernorm.weight", true, []int{c.Hidden}},
	}
	if c.Gemma.Enabled {
		steps = append(steps,
			step{&l.attnOutNorm, "post_attention_layernorm.weight", true, []int{c.Hidden}},
			step{&l.postNorm, "pre_feedforward_layernorm.weight", true, []int{c.Hidden}},
			step{&l.mlpOutNorm, "post_feedforward_layernorm.weight", true, []int{c.Hidden}})
	} else {
		steps = append(steps, step{&l.postNorm, "post_attention_layernorm.weight", true, []int{c.Hidden}})
	}
	steps = append(steps, []step{
		{&l.q, "self_attn.q_proj.weight", true, []int{q, c.Hidden}},
		{&l.k, "self_attn.k_proj.weight", true, []int{kv, c.Hidden}},
		{&l.v, "self_attn.v_proj.weight", true, []int{kv, c.Hidden}},
		{&l.o, "self_attn.o_proj.weight", true, []int{c.Hidden, q}},
		{&l.qBias, "self_attn.q_proj.bias", c.AttentionBias, []int{q}},
		{&l.kBias, "self_attn.k_proj.bias", c.AttentionBias, []int{kv}},
		{&l.vBias, "self_attn.v_proj.bias", c.AttentionBias, []int{kv}},
		{&l.oBias, "self_attn.o_proj.bias", c.OutputBias, []int{c.Hidden}},
		{&l.qNorm, "self_attn.q_norm.weight", c.QKNorm, []int{c.HeadDim}},
		{&l.kNorm, "self_attn.k_norm.weight", c.QKNorm, []int{c.HeadDim}},
		{&l.sinks, "self_attn.sinks", c.AttentionSinks, []int{c.Heads}},
	}...)
	switch {
	case sparse && c.MoE.Biases:
		// GPT-OSS names its router mlp.router and gives it a bias.
		steps = append(steps,
			step{&l.router, "mlp.router.weight", true, []int{c.MoE.Experts, c.Hidden}},
			step{&l.routerBias, "mlp.router.bias", true, []int{c.MoE.Experts}})
	case sparse:
		steps = append(steps, step{&l.router, "mlp.gate.weight", true, []int{c.MoE.Experts, c.Hidden}})
	default:
		steps = append(steps,
			step{&l.gate, "mlp.gate_proj.weight", true, []int{c.Intermediate, c.Hidden}},
			step{&l.up, "mlp.up_proj.weight", true, []int{c.Intermediate, c.Hidden}},
			step{&l.down, "mlp.down_proj.weight", true, []int{c.Hidden, c.Intermediate}},
			step{&l.gateBias, "mlp.gate_proj.bias", c.MLPBias, []int{c.Intermediate}},
			step{&l.upBias, "mlp.up_proj.bias", c.MLPBias, []int{c.Intermediate}},
			step{&l.downBias, "mlp.down_proj.bias", c.MLPBias, []int{c.Hidden}})
	}
	for _, s := range steps {
		t, err := u.optional(prefix+s.name, s.want, s.shape...)
		if err != nil {
			return err
		}
		if t == nil {
			continue
		}
		if !s.want {
			// A tensor the family does not use would silently change nothing: refuse rather than
			// serve a model that differs from its checkpoint.
			return fmt.Errorf("engine: the checkpoint has %s, which %s does not use; check %s's attention_bias/mlp_bias",
				u.ckpt.fileName(prefix+s.name), c.Architecture, u.ckpt.configName())
		}
		*s.dst = t
	}
	switch {
	case sparse && c.MoE.Biases:
		return loadGptOssExperts(u, c, prefix, l)
	case sparse:
		return loadExperts(u, c, prefix, l)
	}
	return nil
}

// loadExperts uploads a sparse layer's experts, each projection of all of them as one tensor.
func loadExperts(u *uploader, c Config, prefix string, l *layerWeights) error {
	e, inter := c.MoE.Experts, c.MoE.Intermediate
	for _, s := range []struct {
		dst   *compute.Tensor
		proj  string
		shape []int
	}{
		{&l.expertGate, "gate_proj", []int{inter, c.Hidden}},
		{&l.expertUp, "up_proj", []int{inter, c.Hidden}},
		{&l.expertDown, "down_proj", []int{c.Hidden, inter}},
	} {
		name := func(i int) string { return fmt.Sprintf("%smlp.experts.%d.%s.weight", prefix, i, s.proj) }
		t, err := u.stacked(e, name, s.shape...)
		if err != nil {
			return err
		}
		*s.dst = t
	}
	return nil
}
