package engine

// The last layer of a forward feeds nothing but the logits head: its keys and values are written
// for every row (later tokens attend to them), but its attention output and feed-forward matter
// only for the rows whose logits or picks are wanted. A prompt's chunk wants one row, or none, so
// the last layer runs those rows alone (llama.cpp prunes the same way), which saves a layer's
// attention and feed-forward for the rest: the bundled model's 8-layer GGUF export (no MTP head)
// prefills 1.11 times as fast on the CPU (BenchmarkPrefillNoHead), the 8B's 36 layers about 1/36. Each op's rows keep
// their bits whatever rows share it, so the logits are the unpruned forward's, bit for bit
// (enginetest.CheckPrunedLastLayer).
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
func (m *Model) prunesLast(rows, wanted int) bool {
	return m.lastPlain && m.mtp == nil && wanted < rows
}

// plainLast reports whether the model's last layer is plain attention, which prunesLast may
// run for fewer rows than wrote their keys.
func (m *Model) plainLast() bool {
	last := len(m.w.layers) - 1
	if last < 0 {
		return false
	}
	l := &m.w.layers[last]
	_, inRing := m.rings.sliding(last)
	return l.delta == nil && l.qGate == nil && !inRing && m.cfg.Window(last) == 0
}

// lastLayerWanted enqueues the last layer l for a forward of rows rows, of which the wanted rows
// (a.wanted, their bases and positions staged in a.wantedBases and a.wantedPositions) go on past
// the keys' write, compacted, through the final norm to the logits head.
func (m *Model) lastLayerWanted(l *layerWeights, rows, wanted int) {
	b, c, a := m.backend, m.cfg, m.act
	_, _, full := m.queriesAndKeys(len(m.w.layers)-1, l, rows, a.positions)
	m.lastRows, m.lastDrafts = 0, 0
	if wanted == 0 {
		return
	}
	m.attendWanted(l, full, wanted)
	b.Add(a.final, a.final, a.out, wanted)
	b.RMSNorm(a.h, a.final, m.w.norm, wanted, c.NormEps)
	b.MatMul(a.logits, a.h, m.w.head, nil, wanted)
}

// prunesHead reports whether a call of the MTP head over rows rows, wanted of which ask for their
// logits, runs the head's layer for those rows alone.
func (m *Model) prunesHead(rows, wanted int) bool {
	return m.headPlain && wanted < rows
}

// plainHead reports whether the model has an MTP head whose layer is plain attention, and has
// none of the output norms that draftRows would not apply (Gemma's, whose family has no head).
func (m *Model) plainHead() bool {
	if m.mtp == nil {
		return false
	}
	l := &m.mtp.layer
	return l.delta == nil && l.qGate == nil && l.attnOutNorm == nil && l.mlpOutNorm == nil
}

// headLayerWanted enqueues the MTP head's layer l for rows rows whose residual a.x holds and whose
// normed input a.h holds, of which the wanted rows (staged as for lastLayerWanted) go on to the
// logits; a.h keeps their outputs before mtp.norm, for a chained call (draftRows).
func (m *Model) headLayerWanted(l *layerWeights, rows, wanted int) {
	b, c, a := m.backend, m.cfg, m.act
	_, _, full := m.queriesAndKeys(c.Layers, l, rows, a.ropePositions)
	m.lastRows, m.lastDrafts = 0, wanted // a.x no longer holds the backbone's hidden states
	if wanted == 0 {
		return
	}
	m.attendWanted(l, full, wanted)
	b.Add(a.h, a.final, a.out, wanted)
	b.RMSNorm(a.final, a.h, m.mtp.norm, wanted, c.NormEps)
	b.MatMul(a.logits, a.final, m.w.head, nil, wanted)
}

// attendWanted runs layer l for the wanted rows alone, once queriesAndKeys has written every
// row's keys and values to KV layer full: their attention, its output projection and the
// residual add, then the feed-forward. It leaves the wanted rows' residual after the attention's
// add in a.final, compacted, and the feed-forward's output in a.out.
func (m *Model) attendWanted(l *layerWeights, full, wanted int) {
	b, c, a := m.backend, m.cfg, m.act
	b.Gather(a.attn, a.q, a.wanted, wanted)
	b.Attention(a.q, a.attn, m.kv, full, a.wantedBases, a.wantedPositions, l.sinks, wanted, c.Heads, m.attnScale)
	b.MatMul(a.out, a.q, l.o, l.oBias, wanted)
	if l.attnOutNorm != nil {
		b.RMSNorm(a.out, a.out, l.attnOutNorm, wanted, c.NormEps)
	}
	b.Gather(a.final, a.x, a.wanted, wanted)
	b.AddRMSNorm(a.h, a.final, a.out, l.postNorm, wanted, c.NormEps)
	m.mlp(l, wanted)
	if l.mlpOutNorm != nil {
		b.RMSNorm(a.out, a.out, l.mlpOutNorm, wanted, c.NormEps)
	}
}

// stageWanted writes the bases and positions of the wanted rows (hostWanted's first n), in that
// order, for the last layer's attention over them; only where prunesLast will prune.
func (m *Model) stageWanted(n int) {
	a := m.act
	for i, r := range a.hostWanted[:n] {
		a.hostWantedBases[i] = a.hostBases[r]
		a.hostWantedPositions[i] = a.hostPositions[r]
	}
	m.backend.WriteInt32(a.wantedBases, a.hostWantedBases[:n])
	m.backend.WriteInt32(a.wantedPositions, a.hostWantedPositions[:n])
}
