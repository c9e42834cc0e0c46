package engine

import (
	"context"
	"fmt"
	"math"

	"tfd/batch"
	"tfd/compute"
)

// activations are the forward's scratch tensors, allocated once for maxRows rows; the forward
// allocates nothing.
type activations struct {
	tokens, positions, bases, wanted compute.Tensor // I32 [maxRows]
	wantedBases, wantedPositions     compute.Tensor // I32 [logitRows]: the wanted rows' (prune.go)
	ropePositions, sources           compute.Tensor // I32 [maxRows], for the MTP forward
	// A sliding layer's view of the KV pool (Gemma): each row's first slot in its window and its
	// position within the window, so that Attention reads the window's keys alone.
	winBases, winPositions compute.Tensor // I32 [maxRows]
	// Where a sliding layer writes each row when sessions keep it in rings (window.go): the
	// ring's first slot, the same R slots on, and the position mod R.
	ringBases, ringMirrors, ringPositions compute.Tensor // I32 [maxRows]

	x      compute.Tensor // [maxRows, hidden]: the residual stream
	h      compute.Tensor // [maxRows, hidden]: the normed residual fed to each block
	q      compute.Tensor // [maxRows, heads·headDim]
	k, v   compute.Tensor // [maxRows, kvHeads·headDim]
	attn   compute.Tensor // [maxRows, heads·headDim]
	out    compute.Tensor // [maxRows, hidden]: a block's output before the residual add
	gate   compute.Tensor // [maxRows, inter]
	up     compute.Tensor // [maxRows, inter]
	final  compute.Tensor // [maxRows, hidden]: the rows whose logits are wanted, normed
	logits compute.Tensor // [logitRows, vocab]: the wanted rows' logits
	warm   compute.Tensor // [1, 4]: what Warm's kernel works on
	chain  compute.Tensor // [maxRows] I32: a greedy chain's step writes its token into the first
	picks  compute.Tensor // [maxRows] I32: the greedy picks of ForwardPicks (compute.Picker)
	// verdict is a drafted chain's step's verdict (compute.DraftVerifier), I32
	// [compute.VerdictLen(maxRows)].
	verdict compute.Tensor

	// A mixture of experts' scratch (nil in a dense model), k = experts a token: its pairs of a
	// row and an expert number maxRows·k.
	router        compute.Tensor // [maxRows, experts]: the router's scores
	expertIDs     compute.Tensor // I32 [maxRows·k]: each row's experts, best first
	expertWeights compute.Tensor // [maxRows·k]: their weights
	groups        compute.Tensor // I32 [experts+1+maxRows·k]: the pairs by expert (compute.Ops.GroupByExpert)
	expertGate    compute.Tensor // [maxRows·k, moeInter]
	expertUp      compute.Tensor // [maxRows·k, moeInter]
	expertOut     compute.Tensor // [maxRows·k, hidden]: each pair's expert output

	// A hybrid model's scratch (nil elsewhere, Qwen3-Next): a DeltaNet layer's projections and
	// the outputs of its convolution and recurrence, the rows' step list through the states,
	// the gated attention's gate, and the shared expert's.
	mixed, convOut       compute.Tensor // [maxRows, convChannels]
	z, core              compute.Tensor // [maxRows, vHeads·vDim]
	ba                   compute.Tensor // [maxRows, 2·vHeads]
	steps                compute.Tensor // I32 [3·maxRows] (compute.DeltaNet)
	attnGate             compute.Tensor // [maxRows, heads·headDim]
	sharedGate, sharedUp compute.Tensor // [maxRows, sharedInter]
	sharedOut            compute.Tensor // [maxRows, hidden]
	sharedScore          compute.Tensor // [maxRows, 1]

	// Host staging, reused every call.
	hostTokens, hostPositions, hostBases, hostWanted []int32
	hostWantedBases, hostWantedPositions             []int32
	hostPicks                                        []int32
	hostRopePositions, hostSources                   []int32
	hostWinBases, hostWinPositions                   []int32
	hostRingBases, hostRingMirrors, hostRingPos      []int32
	hostLogits                                       []float32
	hostSteps                                        []int32
	// pinnedLogits says hostLogits is the backend's own memory (compute.HostBuffers), which the
	// backend reads a round's logits into directly, and which free gives back.
	pinnedLogits bool
}

// newActivations allocates the scratch for forwards of maxRows rows of which at most logitRows ask
// for their logits or picks.
func newActivations(b compute.Backend, c Config, maxRows, logitRows int) (*activations, error) {
	a := &activations{
		hostTokens:          make([]int32, maxRows),
		hostPositions:       make([]int32, maxRows),
		hostBases:           make([]int32, maxRows),
		hostWanted:          make([]int32, maxRows),
		hostWantedBases:     make([]int32, logitRows),
		hostWantedPositions: make([]int32, logitRows),
		hostPicks:           make([]int32, maxRows),
		hostRopePositions:   make([]int32, maxRows),
		hostSources:         make([]int32, maxRows),
		hostWinBases:        make([]int32, maxRows),
		hostWinPositions:    make([]int32, maxRows),
		hostRingBases:       make([]int32, maxRows),
		hostRingMirrors:     make([]int32, maxRows),
		hostRingPos:         make([]int32, maxRows),
	}
	if hb, ok := b.(compute.HostBuffers); ok {
		// Where the backend cannot give it, the logits take ordinary memory: slower reads, the
		// same bits.
		if buf, err := hb.HostFloat32(logitRows * c.Vocab); err == nil {
			a.hostLogits, a.pinnedLogits = buf, true
		}
	}
	if a.hostLogits == nil {
		a.hostLogits = make([]float32, logitRows*c.Vocab)
	}
	q, kv := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	specs := []struct {
		dst   *compute.Tensor
		dtype compute.DType
		width int
	}{
		{&a.tokens, compute.I32, 1}, {&a.positions, compute.I32, 1},
		{&a.bases, compute.I32, 1}, {&a.wanted, compute.I32, 1},
		{&a.ropePositions, compute.I32, 1}, {&a.sources, compute.I32, 1},
		{&a.winBases, compute.I32, 1}, {&a.winPositions, compute.I32, 1},
		{&a.ringBases, compute.I32, 1}, {&a.ringMirrors, compute.I32, 1}, {&a.ringPositions, compute.I32, 1},
		{&a.x, compute.F32, c.Hidden}, {&a.h, compute.F32, c.Hidden},
		{&a.q, compute.F32, q}, {&a.k, compute.F32, kv}, {&a.v, compute.F32, kv},
		{&a.attn, compute.F32, q}, {&a.out, compute.F32, c.Hidden},
		{&a.gate, compute.F32, c.Intermediate}, {&a.up, compute.F32, c.Intermediate},
		{&a.final, compute.F32, c.Hidden},
		{&a.warm, compute.F32, 4}, {&a.chain, compute.I32, 1}, {&a.picks, compute.I32, 1},
	}
	for _, s := range specs {
		shape := []int{maxRows, s.width}
		if s.width == 1 {
			shape = shape[:1]
		}
		if err := a.alloc(b, s.dst, s.dtype, shape...); err != nil {
			return nil, err
		}
	}
	if err := a.alloc(b, &a.logits, compute.F32, logitRows, c.Vocab); err != nil {
		return nil, err
	}
	if err := a.alloc(b, &a.wantedBases, compute.I32, logitRows); err != nil {
		return nil, err
	}
	if err := a.alloc(b, &a.wantedPositions, compute.I32, logitRows); err != nil {
		return nil, err
	}
	if err := a.alloc(b, &a.verdict, compute.I32, compute.VerdictLen(maxRows)); err != nil {
		return nil, err
	}
	if moe := c.MoE; moe.Experts > 0 {
		pairs := maxRows * moe.PerToken
		for _, s := range []struct {
			dst   *compute.Tensor
			dtype compute.DType
			shape []int
		}{
			{&a.router, compute.F32, []int{maxRows, moe.Experts}},
			{&a.expertIDs, compute.I32, []int{pairs}}, {&a.expertWeights, compute.F32, []int{pairs}},
			{&a.groups, compute.I32, []int{moe.Experts + 1 + pairs}},
			{&a.expertGate, compute.F32, []int{pairs, moe.Intermediate}}, {&a.expertUp, compute.F32, []int{pairs, moe.Intermediate}},
			{&a.expertOut, compute.F32, []int{pairs, c.Hidden}},
		} {
			if err := a.alloc(b, s.dst, s.dtype, s.shape...); err != nil {
				return nil, err
			}
		}
	}
	if n := c.Next; n.Enabled {
		a.hostSteps = make([]int32, 3*maxRows)
		vd := n.VHeads * n.VDim
		specs := []struct {
			dst   *compute.Tensor
			dtype compute.DType
			shape []int
		}{
			{&a.mixed, compute.F32, []int{maxRows, n.ConvChannels()}}, {&a.convOut, compute.F32, []int{maxRows, n.ConvChannels()}},
			{&a.z, compute.F32, []int{maxRows, vd}}, {&a.core, compute.F32, []int{maxRows, vd}},
			{&a.ba, compute.F32, []int{maxRows, 2 * n.VHeads}}, {&a.steps, compute.I32, []int{3 * maxRows}},
			{&a.attnGate, compute.F32, []int{maxRows, q}},
		}
		if n.SharedIntermediate > 0 {
			specs = append(specs, []struct {
				dst   *compute.Tensor
				dtype compute.DType
				shape []int
			}{
				{&a.sharedGate, compute.F32, []int{maxRows, n.SharedIntermediate}}, {&a.sharedUp, compute.F32, []int{maxRows, n.SharedIntermediate}},
				{&a.sharedOut, compute.F32, []int{maxRows, c.Hidden}}, {&a.sharedScore, compute.F32, []int{maxRows, 1}},
			}...)
		}
		for _, s := range specs {
			if err := a.alloc(b, s.dst, s.dtype, s.shape...); err != nil {
				return nil, err
			}
		}
	}
	return a, nil
}

// alloc allocates one scratch tensor into dst, or frees what is allocated and says why not.
func (a *activations) alloc(b compute.Backend, dst *compute.Tensor, dtype compute.DType, shape ...int) error {
	t, err := b.Alloc(dtype, shape...)
	if err != nil {
		a.free(b)
		return fmt.Errorf("engine: allocate activations of %v: %w", shape, err)
	}
	*dst = t
	return nil
}

func (a *activations) free(b compute.Backend) {
	if a.pinnedLogits {
		b.(compute.HostBuffers).FreeHost(a.hostLogits)
		a.hostLogits, a.pinnedLogits = nil, false
	}
	for _, t := range []compute.Tensor{a.tokens, a.positions, a.bases, a.wanted, a.ropePositions, a.sources,
		a.winBases, a.winPositions, a.ringBases, a.ringMirrors, a.ringPositions, a.x, a.h, a.q,
		a.k, a.v, a.attn, a.out, a.gate, a.up, a.final, a.logits, a.wantedBases, a.wantedPositions, a.warm, a.chain, a.picks, a.verdict,
		a.router, a.expertIDs, a.expertWeights, a.groups, a.expertGate, a.expertUp, a.expertOut,
		a.mixed, a.convOut, a.z, a.core, a.ba, a.steps, a.attnGate, a.sharedGate, a.sharedUp, a.sharedOut, a.sharedScore} {
		if t != nil {
			b.Free(t)
		}
	}
}

// Forward runs one batched forward over rows of any sessions and returns the logits of the rows
// that asked for them, n×Vocab values in row order, valid until the next call. It implements
// scheduler.Model. Forward is not safe for concurrent use.
func (m *Model) Forward(ctx context.Context, rows []batch.Row) ([]float32, error) {
	logits, _, err := m.ForwardPicks(ctx, rows)
	return logits, err
}

// ForwardPicks is Forward that also returns the greedy picks of the rows that asked for them
// (batch.Row.Pick), in row order, valid until the next call: it implements batch.Picker. A
// backend that takes picks (compute.Picker) takes them where the logits are, and only the rows
// that asked for logits are read back; otherwise, and where the model caps its logits on the host
// (Gemma's final softcap), the picks are batch.Argmax of the rows read back. Either way a pick is
// the argmax of the logits Forward would return for the row.
func (m *Model) ForwardPicks(ctx context.Context, rows []batch.Row) ([]float32, []int32, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	n, p, err := m.stageRows(rows)
	if err != nil {
		return nil, nil, err
	}
	m.forwardRows(len(rows), n+p)
	a, vocab := m.act, m.cfg.Vocab
	picks := a.hostPicks[:p]
	if n+p == 0 {
		return a.hostLogits[:0], picks, m.backend.Sync()
	}
	read := n + p // the logits rows read back: the picked ones too where the host picks
	if pk, ok := m.backend.(compute.Picker); ok && p > 0 && m.cfg.Gemma.FinalSoftcap <= 0 {
		pk.ArgmaxRows(a.logits, a.picks, n, p, vocab)
		if err := m.backend.ReadInt32(a.picks, picks); err != nil {
			return nil, nil, fmt.Errorf("engine: forward of %d rows: %w", len(rows), err)
		}
		read = n
	}
	logits := a.hostLogits[:read*vocab]
	if read > 0 {
		if err := m.backend.ReadFloat32(a.logits, logits); err != nil {
			return nil, nil, fmt.Errorf("engine: forward of %d rows: %w", len(rows), err)
		}
	}
	softcap(logits, m.cfg.Gemma.FinalSoftcap)
	if read > n {
		for r := range picks {
			picks[r] = batch.Argmax(logits[(n+r)*vocab : (n+r+1)*vocab])
		}
	}
	return logits[:n*vocab], picks, nil
}

// softcap maps each logit z to cap·tanh(z/cap) in place, in float32 steps as transformers does
// (divide, tanh, multiply); a cap of 0 leaves them as they are. It runs on the host, over the
// rows read back: a few vocabularies' worth of tanh, against a forward's matmuls.
func softcap(logits []float32, limit float64) {
	if limit <= 0 {
		return
	}
	c := float32(limit)
	for i, z := range logits {
		logits[i] = float32(math.Tanh(float64(z/c))) * c
	}
}

// stageRows checks the rows and uploads their metadata; it returns how many want logits and how
// many their picks. The head's rows (wanted) are the first, then the second, each in row order.
func (m *Model) stageRows(rows []batch.Row) (logits, picks int, err error) {
	if len(rows) == 0 || len(rows) > m.maxRows {
		return 0, 0, fmt.Errorf("engine: a forward takes 1 to %d rows, got %d", m.maxRows, len(rows))
	}
	a := m.act
	for i, r := range rows {
		switch {
		case r.Logits && r.Pick:
			return 0, 0, fmt.Errorf("engine: row %d asks for its logits and its pick: ask for one", i)
		case r.Token < 0 || int(r.Token) >= m.cfg.Vocab:
			return 0, 0, fmt.Errorf("engine: row %d: token %d outside the vocabulary of %d", i, r.Token, m.cfg.Vocab)
		case r.Pos < 0 || r.Pos >= m.context:
			return 0, 0, fmt.Errorf("engine: row %d: position %d outside the context of %d", i, r.Pos, m.context)
		case r.Base < 0 || r.Base+r.Pos >= m.slots:
			return 0, 0, fmt.Errorf("engine: row %d: KV slot %d+%d outside the pool of %d", i, r.Base, r.Pos, m.slots)
		}
		a.hostTokens[i] = r.Token
		a.hostPositions[i] = int32(r.Pos)
		a.hostBases[i] = int32(r.Base)
		if r.Logits {
			a.hostWanted[logits] = int32(i)
			logits++
		}
	}
	for i, r := range rows {
		if r.Pick {
			a.hostWanted[logits+picks] = int32(i)
			picks++
		}
	}
	if logits+picks > m.logitRows {
		return 0, 0, fmt.Errorf("engine: %d of a forward's rows ask for their logits or picks; at most %d may (Options.LogitRows)", logits+picks, m.logitRows)
	}
	m.backend.WriteInt32(a.tokens, a.hostTokens[:len(rows)])
	m.backend.WriteInt32(a.positions, a.hostPositions[:len(rows)])
	m.backend.WriteInt32(a.bases, a.hostBases[:len(rows)])
	m.backend.WriteInt32(a.wanted, a.hostWanted[:logits+picks])
	if n := logits + picks; n > 0 && m.prunesLast(len(rows), n) {
		m.stageWanted(n)
	}
	if m.states != nil {
		ranges, err := m.states.stage(rows, a.hostSteps)
		if err != nil {
			return 0, 0, err
		}
		m.backend.WriteInt32(a.steps, a.hostSteps[:3*len(rows)])
		m.states.commit(ranges)
	}
	switch w, _ := m.cfg.windowed(); {
	case m.rings != nil:
		if err := m.rings.stage(rows, a.hostRingBases, a.hostRingMirrors, a.hostRingPos, a.hostWinBases, a.hostWinPositions); err != nil {
			return 0, 0, err
		}
		m.backend.WriteInt32(a.ringBases, a.hostRingBases[:len(rows)])
		m.backend.WriteInt32(a.ringMirrors, a.hostRingMirrors[:len(rows)])
		m.backend.WriteInt32(a.ringPositions, a.hostRingPos[:len(rows)])
		m.backend.WriteInt32(a.winBases, a.hostWinBases[:len(rows)])
		m.backend.WriteInt32(a.winPositions, a.hostWinPositions[:len(rows)])
	case w > 0:
		// Sessions keep every position: a row at position p of a session whose keys start at
		// slot b sees, in a sliding layer, the keys at positions max(0, p−w+1) … p: slots from
		// b + that first position on.
		for i, r := range rows {
			first := max(0, r.Pos-w+1)
			a.hostWinBases[i] = int32(r.Base + first)
			a.hostWinPositions[i] = int32(r.Pos - first)
		}
		m.backend.WriteInt32(a.winBases, a.hostWinBases[:len(rows)])
		m.backend.WriteInt32(a.winPositions, a.hostWinPositions[:len(rows)])
	}
	return logits, picks, nil
}

// forwardRows enqueues the whole forward: embed, the decoder layers, the final norm over the
// wanted rows, and the logits head.
func (m *Model) forwardRows(rows, wanted int) {
	b, c, w, a := m.backend, m.cfg, &m.w, m.act
	b.Embed(a.x, w.embed, a.tokens, rows)
	b.RMSNorm(a.h, a.x, w.layers[0].inputNorm, rows, c.NormEps)
	for i := range w.layers {
		l := &w.layers[i]
		if i == len(w.layers)-1 && m.prunesLast(rows, wanted) {
			m.layerWanted(i, l, rows, wanted, a.positions, w.norm)
			m.lastRows, m.lastDrafts = 0, 0
			return
		}
		if l.delta != nil {
			m.deltaNet(l.delta, rows)
		} else {
			m.attention(i, l, rows, a.positions)
		}
		if l.attnOutNorm != nil {
			// Gemma: the attention's output is normed before the residual add.
			b.RMSNorm(a.out, a.out, l.attnOutNorm, rows, c.NormEps)
		}
		// residual += attention; h = post_attention_layernorm(residual) (Gemma's pre_feedforward)
		b.AddRMSNorm(a.h, a.x, a.out, l.postNorm, rows, c.NormEps)
		m.mlp(l, rows)
		if l.mlpOutNorm != nil {
			b.RMSNorm(a.out, a.out, l.mlpOutNorm, rows, c.NormEps)
		}
		if i+1 < len(w.layers) {
			// residual += mlp; h = the next layer's input_layernorm(residual)
			b.AddRMSNorm(a.h, a.x, a.out, w.layers[i+1].inputNorm, rows, c.NormEps)
		}
	}
	m.lastRows, m.lastDrafts = 0, 0
	if wanted == 0 && m.mtp == nil {
		return
	}
	// residual += mlp: the hidden states the MTP head reads; then only the wanted rows go on,
	// through the final norm to the logits.
	b.Add(a.x, a.x, a.out, rows)
	m.lastRows = rows
	if wanted == 0 {
		return
	}
	b.Gather(a.h, a.x, a.wanted, wanted)
	b.RMSNorm(a.final, a.h, w.norm, wanted, c.NormEps)
	b.MatMul(a.logits, a.final, w.head, nil, wanted)
}

// attention runs one layer's self-attention on a.h into a.out. Keys and values go to KV layer
// `layer` at each row's position; RoPE turns them by ropePositions (the same positions for the
// backbone, one further for the MTP layer).
func (m *Model) attention(layer int, l *layerWeights, rows int, ropePositions compute.Tensor) {
	b, c, a := m.backend, m.cfg, m.act
	ring, inRing, full := m.queriesAndKeys(layer, l, rows, ropePositions)
	switch {
	case inRing:
		// The session's ring: each key at its position mod R, and again R slots on, so that
		// the window is one run of slots (window.go).
		b.KVWrite(m.rings.kv, ring, a.k, a.v, a.ringBases, a.ringPositions, rows)
		b.KVWrite(m.rings.kv, ring, a.k, a.v, a.ringMirrors, a.ringPositions, rows)
		b.Attention(a.attn, a.q, m.rings.kv, ring, a.winBases, a.winPositions, l.sinks, rows, c.Heads, m.attnScale)
	case c.Window(layer) > 0:
		// The window's keys among all the session's.
		b.Attention(a.attn, a.q, m.kv, full, a.winBases, a.winPositions, l.sinks, rows, c.Heads, m.attnScale)
	default:
		b.Attention(a.attn, a.q, m.kv, full, a.bases, a.positions, l.sinks, rows, c.Heads, m.attnScale)
	}
	if l.qGate != nil {
		m.deltaOps.SigmoidMul(a.attn, a.attn, a.attnGate, rows)
	}
	b.MatMul(a.out, a.attn, l.o, l.oBias, rows)
}

// queriesAndKeys runs a layer's q, k and v projections, their norms and RoPE, and writes its
// keys and values to the KV pool (full: its layer there), except for a sliding layer that keeps
// rings (inRing: ring is its ring), whose write attention makes.
func (m *Model) queriesAndKeys(layer int, l *layerWeights, rows int, ropePositions compute.Tensor) (ring int, inRing bool, full int) {
	b, c, a := m.backend, m.cfg, m.act
	// q, k, v projections: [rows, hidden] → heads of headDim.
	m.matMuls([3]compute.Tensor{a.q, a.k, a.v}, a.h, [3]compute.Tensor{l.q, l.k, l.v}, [3]compute.Tensor{l.qBias, l.kBias, l.vBias}, rows)
	freqs := m.invFreq
	if m.localInvFreq != nil && c.Window(layer) > 0 {
		freqs = m.localInvFreq // Gemma's sliding layers turn by their own rope
	}
	if l.qGate != nil {
		// Qwen3-Next: the second half of q_proj gates the attention's output.
		b.MatMul(a.attnGate, a.h, l.qGate, nil, rows)
	}
	ring, inRing = m.rings.sliding(layer)
	full = m.fullLayer(layer)
	// Every row's keys land before any row attends, so rows of one session in this forward see
	// each other causally through their positions.
	written := false
	if w, ok := b.(compute.QKRoPEWriter); ok && !inRing {
		// The norms (Qwen3: RMSNorm over each head's vector), RoPE and the keys' write in one.
		written = w.QKRoPEWrite(a.q, a.k, a.v, l.qNorm, l.kNorm, ropePositions, freqs, m.kv, full, a.bases, a.positions, rows, c.Heads, c.NormEps)
	}
	if !written {
		if l.qNorm != nil {
			b.RMSNorm(a.q, a.q, l.qNorm, rows*c.Heads, c.NormEps)
			b.RMSNorm(a.k, a.k, l.kNorm, rows*c.KVHeads, c.NormEps)
		}
		b.RoPE(a.q, ropePositions, freqs, rows, c.Heads)
		b.RoPE(a.k, ropePositions, freqs, rows, c.KVHeads)
		if !inRing {
			b.KVWrite(m.kv, full, a.k, a.v, a.bases, a.positions, rows)
		}
	}
	return ring, inRing, full
}

// mlp runs one layer's SwiGLU feed-forward, or its mixture of experts, on a.h into a.out.
func (m *Model) mlp(l *layerWeights, rows int) {
	if l.router != nil {
		m.experts(l, rows)
		return
	}
	b, a := m.backend, m.act
	m.matMuls([3]compute.Tensor{a.gate, a.up}, a.h, [3]compute.Tensor{l.gate, l.up}, [3]compute.Tensor{l.gateBias, l.upBias}, rows)
	switch f, fused := b.(compute.SiLUMulMatMuler); {
	case m.cfg.Gemma.Enabled:
		b.GELUTanhMul(a.gate, a.gate, a.up, rows)
	case fused && f.SiLUMulMatMul(a.out, a.gate, a.up, l.down, l.downBias, rows):
		return
	default:
		b.SiLUMul(a.gate, a.gate, a.up, rows)
	}
	b.MatMul(a.out, a.gate, l.down, l.downBias, rows)
}

// experts runs one layer's mixture of experts on a.h into a.out: each row goes through the k
// experts its router scores best, as pairs (row r's j-th expert is pair r·k+j), and their outputs
// are summed by rank, weighted. Pairs are grouped by expert on the device, and each is computed on
// its own in the ops' fixed orders, so a row's result never depends on which rows shared an expert.
func (m *Model) experts(l *layerWeights, rows int) {
	b, moe, a := m.backend, m.cfg.MoE, m.act
	k := moe.PerToken
	pairs := rows * k
	// router: [rows, hidden] → scores [rows, experts] → each row's k experts and weights
	b.MatMul(a.router, a.h, l.router, l.routerBias, rows)
	b.RouteTopK(a.expertIDs, a.expertWeights, a.router, rows, moe.Experts, k, moe.NormTopK)
	b.GroupByExpert(a.groups, a.expertIDs, pairs, moe.Experts)
	// each pair's SwiGLU: the row's h through its expert's gate and up, then down
	b.ExpertMatMul(a.expertGate, a.h, l.expertGate, l.expertGateBias, a.groups, pairs, k)
	b.ExpertMatMul(a.expertUp, a.h, l.expertUp, l.expertUpBias, a.groups, pairs, k)
	if limit := moe.SwiGLULimit; limit > 0 {
		b.ClampedSwiGLU(a.expertGate, a.expertGate, a.expertUp, pairs, SwiGLUAlpha, limit)
	} else {
		b.SiLUMul(a.expertGate, a.expertGate, a.expertUp, pairs)
	}
	b.ExpertMatMul(a.expertOut, a.expertGate, l.expertDown, l.expertDownBias, a.groups, pairs, 1)
	// out[r] = Σ_j weight[r·k+j]·expertOut[r·k+j], by rank
	b.CombineExperts(a.out, a.expertOut, a.expertWeights, rows, k)
	if l.sharedGate != nil {
		// Qwen3-Next: out += sigmoid(shared_expert_gate·h) · shared_expert(h)
		b.MatMul(a.sharedGate, a.h, l.sharedGate, nil, rows)
		b.MatMul(a.sharedUp, a.h, l.sharedUp, nil, rows)
		b.SiLUMul(a.sharedGate, a.sharedGate, a.sharedUp, rows)
		b.MatMul(a.sharedOut, a.sharedGate, l.sharedDown, nil, rows)
		b.MatMul(a.sharedScore, a.h, l.sharedExpertGate, nil, rows)
		m.deltaOps.AddSigmoidScaled(a.out, a.sharedOut, a.sharedScore, rows)
	}
}

// matMuls runs the MatMuls of one x (q, k and v; gate and up) in one call where the backend is a
// compute.MultiMatMul (one launch on a GPU), else one by one: the bits are the same.
func (m *Model) matMuls(dst [3]compute.Tensor, x compute.Tensor, w, bias [3]compute.Tensor, rows int) {
	if mm, ok := m.backend.(compute.MultiMatMul); ok {
		mm.MatMuls(dst, x, w, bias, rows)
		return
	}
	for i := range w {
		if w[i] != nil {
			m.backend.MatMul(dst[i], x, w[i], bias[i], rows)
		}
	}
}

// attentionScale is the softmax scale of the Llama/Qwen families, 1/√headDim, as float32.
func attentionScale(headDim int) float32 {
	return float32(1 / math.Sqrt(float64(headDim)))
}

// Warm keeps an idle device ready for the next request: it runs the backend's own Warm where the
// backend is a compute.Warmer, and otherwise one tiny kernel (16 bytes added to themselves) that it
// waits for, so that an idle GPU does real work and keeps its clocks and memory up. It implements
// batch.Warmer; like Forward it is not safe for concurrent use.
func (m *Model) Warm() error {
	if w, ok := m.backend.(compute.Warmer); ok {
		return w.Warm()
	}
	m.backend.Add(m.act.warm, m.act.warm, m.act.warm, 1)
	return m.backend.Sync()
}
