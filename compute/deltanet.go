package compute

// DeltaNet is an optional interface of a Backend: the ops of a hybrid model's gated DeltaNet
// layers (Qwen3-Next's linear attention) and of the sigmoid gates that family puts on its
// attention and its shared expert. A backend implements it only where it has the kernels; the
// engine refuses such a model on a backend without them.
//
// A DeltaNet layer carries a state per sequence from one position to the next: the last
// ConvKernel−1 inputs of its causal convolution, and a recurrent matrix per value head. The
// states live in plain F32 tensors the caller allocates, one state a row (see ConvState and
// DeltaState for their layouts), and the two recurrent ops walk a step list: an I32 tensor of
// 3·rows values, step i being (row, from, to): the op computes row `row` from the state in row
// `from` of the state tensor (−1: a zero state, a sequence's first position), and leaves the
// state after it in row `to` (which may be `from`). Steps run in list order, each head or
// channel on its own, so a caller that lists each sequence's rows in position order gets the
// state after N tokens in the same bits however the rows were split into forwards or shared
// with other sequences: the recurrence is never reordered or split across positions.
type DeltaNet interface {
	// SigmoidMul writes dst[r] = x[r] ⊙ sigmoid(gate[r]) for r < rows (rows of dst's row
	// length), with sigmoid(g) = 1/(1 + exp(−g)) in F32: Qwen3-Next's gated attention output.
	// dst may be x.
	SigmoidMul(dst, x, gate Tensor, rows int)
	// AddSigmoidScaled adds sigmoid(gate[r]) · x[r] into dst[r] for r < rows (rows of dst's row
	// length; gate is [*, 1]), each product rounded before it is added: a shared expert's output
	// scaled by its gate.
	AddSigmoidScaled(dst, x, gate Tensor, rows int)
	// CausalConvSiLU runs a depthwise causal convolution and SiLU over the steps' rows: with C
	// channels (x's and dst's row length) and kernel K (w is [C, K]), for each step (r, from, to)
	// and channel c, y = Σ_{j<K} w[c][j]·in_j, in j order, each product rounded before it is
	// added, where in_0 … in_{K−2} are the state's inputs (oldest first) and in_{K−1} = x[r][c];
	// dst[r][c] = y/(1 + exp(−y)). The state then holds in_1 … in_{K−1}. state is
	// [*, (K−1)·C] (ConvState).
	CausalConvSiLU(dst, x, w, state, steps Tensor, rows int)
	// GatedDeltaRule runs the gated delta rule over the steps' rows. qkv is [*, 2·KHeads·KDim +
	// VHeads·VDim]: each row's queries, keys and values, head after head; ba is [*, 2·VHeads]:
	// each row's b then a, one per value head; aLog and dtBias are [VHeads]. Value head h reads
	// key head h/(VHeads/KHeads). For each step (r, from, to) and value head h, in F32:
	//
	//	q ← q·rsqrt(Σq² + 1e−6) · (1/√KDim);  k ← k·rsqrt(Σk² + 1e−6)   (the sums in dot order)
	//	β = sigmoid(b);  g = −exp(aLog)·softplus(a + dtBias);  d = exp(g)
	//	S ← S·d;  u_v = Σ_k S[k][v]·k_k;  δ_v = (v_v − u_v)·β;  S[k][v] ← S[k][v] + k_k·δ_v
	//	dst[r][h·VDim + v] = Σ_k S[k][v]·q_k
	//
	// with the sums over k in ascending order, each product rounded before it is added, and
	// softplus(x) = x above 20, else log(1 + exp(x)). S is the head's [KDim, VDim] matrix in
	// state (DeltaState).
	GatedDeltaRule(dst, qkv, ba, aLog, dtBias, state, steps Tensor, rows int, spec DeltaSpec)
	// CopyRows copies n whole rows of src from row srcRow to dst from row dstRow, bits
	// unchanged (a sequence's states moving with it). dst and src must have the same row
	// length; they may be the same tensor, and then the ranges may overlap.
	CopyRows(dst Tensor, dstRow int, src Tensor, srcRow, n int)
}

// DeltaSpec is the shape of a gated DeltaNet layer's heads.
type DeltaSpec struct {
	KHeads, VHeads int // VHeads is a multiple of KHeads
	KDim, VDim     int
}

// ConvState returns the row length of a DeltaNet layer's convolution state: the last kernel−1
// inputs of each of its channels, input after input (each one channels long, oldest first).
func ConvState(channels, kernel int) int { return (kernel - 1) * channels }

// DeltaState returns the row length of a DeltaNet layer's recurrent state: a [KDim, VDim]
// matrix per value head, head after head, row-major.
func (s DeltaSpec) DeltaState() int { return s.VHeads * s.KDim * s.VDim }
