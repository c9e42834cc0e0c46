package engine

import "tfd/compute"

// The last layer of a forward feeds nothing but the logits head: its keys and values are written
// for every row (later tokens attend to them), but its attention output and feed-forward matter
// only for the rows whose logits or picks are wanted. A prompt's chunk wants one row, or none, so
// the last layer runs those rows alone (llama.cpp prunes the same way), which saves a layer's
// attention and feed-forward for the rest: the bundled model's 8-layer GGUF export (no MTP head)
// prefills 1.11 times as fast on the CPU (BenchmarkPrefillNoHead), the 8B's 36 layers about
// 1/36. Each op's rows keep their bits whatever rows share it, so the logits are the unpruned
// forward's, bit for bit (enginetest.CheckPrunedLastLayer).
//
// Not pruned: a model with an MTP head, which reads every row's last hidden state, and a last
// layer that is not plain attention over the pool: a DeltaNet layer, a sliding window (whose rows
// attend from bases and positions of their own), Qwen3-Next's gated attention.
//
// The MTP head's own layer is pruned the same way (prunesHead): a call of the head feeds a
// stream's every confirmed position, a prompt's included, for the head's keys and values, and
// asks for the logits of its newest alone.

// prunesLast reports whether a forward of rows rows, wanted of which ask for their logits or
// picks, runs its last layer for those rows alone.
func (m *Model) prunesLast(rows, wanted int) bool { return m.lastPlain && wanted < rows }

// prunesHead reports the same of a call of the MTP head over rows rows and its layer.
func (m *Model) prunesHead(rows, wanted int) bool { return m.headPlain && wanted < rows }

// plainLast reports whether the model has no MTP head and a last layer of plain attention.
func (m *Model) plainLast() bool {
	last := len(m.w.layers) - 1
	if m.mtp != nil || last < 0 {
		return false
	}
	_, inRing := m.rings.sliding(last)
	return plainAttention(&m.w.layers[last]) && !inRing && m.cfg.Window(last) == 0
}

// plainHead reports whether the model has an MTP head whose layer is plain attention, and has
// none of the output norms that draftRows would not apply (Gemma's, whose family has no head).
func (m *Model) plainHead() bool {
	if m.mtp == nil {
		return false
	}
	l := &m.mtp.layer
	return plainAttention(l) && l.attnOutNorm == nil && l.mlpOutNorm == nil
}

// plainAttention reports whether l is an attention layer without Qwen3-Next's output gate.
func plainAttention(l *layerWeights) bool { return l.delta == nil && l.qGate == nil }

// layerWanted enqueues layer l (KV layer index layer, its keys turned by ropePositions) for rows
// rows whose residual a.x and normed input a.h hold, of which only the wanted rows (a.wanted,
// their bases and positions staged by stageWanted) go on past the keys' write, compacted: their
// attention and feed-forward, then norm and the logits head. It leaves their outputs before norm
// in a.h, as the unpruned paths leave them there (a chained call of the head reads them).
func (m *Model) layerWanted(layer int, l *layerWeights, rows, wanted int, ropePositions, norm compute.Tensor) {
	b, c, a := m.backend, m.cfg, m.act
	_, _, full := m.queriesAndKeys(layer, l, rows, ropePositions)
	if wanted == 0 {
		return
	}
	b.Gather(a.attn, a.q, a.wanted, wanted)
	b.Attention(a.q, a.attn, m.kv, full, a.wantedBases, a.wantedPositions, l.sinks, wanted, c.Heads, m.attnScale)
	b.MatMul(a.out, a.q, l.o, l.oBias, wanted)
	if l.attnOutNorm != nil {
		b.RMSNorm(a.out, a.out, l.attnOutNorm, wanted, c.NormEps)
	}
	// a.final holds the wanted rows' residual stream, compacted, until the last add.
	b.Gather(a.final, a.x, a.wanted, wanted)
	b.AddRMSNorm(a.h, a.final, a.out, l.postNorm, wanted, c.NormEps)
	m.mlp(l, wanted)
	if l.mlpOutNorm != nil {
		b.RMSNorm(a.out, a.out, l.mlpOutNorm, wanted, c.NormEps)
	}
	b.Add(a.h, a.final, a.out, wanted)
	b.RMSNorm(a.final, a.h, norm, wanted, c.NormEps)
	b.MatMul(a.logits, a.final, m.w.head, nil, wanted)
}

// stageWanted writes the bases and positions of the wanted rows (hostWanted's first n), in that
// order, for the attention of a layer run for them alone (layerWanted); only where prunesLast or
// prunesHead will prune.
func (m *Model) stageWanted(n int) {
	a := m.act
	for i, r := range a.hostWanted[:n] {
		a.hostWantedBases[i] = a.hostBases[r]
		a.hostWantedPositions[i] = a.hostPositions[r]
	}
	m.backend.WriteInt32(a.wantedBases, a.hostWantedBases[:n])
	m.backend.WriteInt32(a.wantedPositions, a.hostWantedPositions[:n])
}
