package engine

import (
	"context"
	"fmt"

	"tfd/batch"
	"tfd/compute"
)

// mtpWeights is a multi-token-prediction module laid out as Qwen3-Next checkpoints lay theirs
// out: the draft for token t+2 is head(norm(layer(fc([norm_e(embed(x[t+1])), norm_h(h[t])])))),
// where h[t] is the backbone's hidden state at t before its final norm and the layer sits at
// position t+1. Its norms follow the family's (plain Qwen3 norms scale by w).
type mtpWeights struct {
	normEmbed, normHidden compute.Tensor // [hidden]
	// fcEmbed and fcHidden are the two halves of fc [hidden, 2·hidden], split at load so that
	// the join needs no op of its own: fc·[e; h] = fcEmbed·e + fcHidden·h.
	fcEmbed, fcHidden compute.Tensor // [hidden, hidden]
	layer             layerWeights
	norm              compute.Tensor // [hidden]
}

// loadMTP uploads the MTP module, or returns nil when the checkpoint declares none.
func loadMTP(u *uploader, c Config) (*mtpWeights, error) {
	if c.MTPLayers == 0 {
		return nil, nil
	}
	if c.MTPLayers != 1 {
		return nil, fmt.Errorf("engine: config.json: mtp_num_hidden_layers = %d; tfd runs one MTP layer", c.MTPLayers)
	}
	w := &mtpWeights{}
	var err error
	for _, s := range []struct {
		dst  *compute.Tensor
		name string
	}{{&w.normEmbed, "mtp.pre_fc_norm_embedding.weight"}, {&w.normHidden, "mtp.pre_fc_norm_hidden.weight"}, {&w.norm, "mtp.norm.weight"}} {
		if *s.dst, err = u.tensor(s.name, c.Hidden); err != nil {
			return nil, err
		}
	}
	fc, ok, err := u.ckpt.tensor("mtp.fc.weight")
	switch {
	case err != nil:
		return nil, err
	case !ok:
		return nil, fmt.Errorf("engine: config.json declares an MTP layer but the checkpoint has no mtp.fc.weight")
	}
	embedHalf, hiddenHalf, err := splitColumns(fc, c.Hidden)
	if err != nil {
		return nil, err
	}
	if w.fcEmbed, err = u.upload("mtp.fc.weight", embedHalf, []int{c.Hidden, c.Hidden}); err != nil {
		return nil, err
	}
	if w.fcHidden, err = u.upload("mtp.fc.weight", hiddenHalf, []int{c.Hidden, c.Hidden}); err != nil {
		return nil, err
	}
	if c.Next.Enabled {
		// A gated attention layer of the family, with its mixture of experts.
		return w, loadNextLayer(u, c, "mtp.layers.0.", false, c.MoE.Experts > 0, &w.layer)
	}
	return w, loadLayer(u, c, "mtp.layers.0.", false, &w.layer)
}

// splitColumns cuts a [rows, 2·half] matrix into its left and right [rows, half] halves.
// A row of GGUF's quantized types splits between whole blocks, which half columns must end on.
func splitColumns(t stored, half int) (left, right stored, err error) {
	if t.mlx != nil || t.bytes {
		return left, right, fmt.Errorf("engine: tensor %s is quantized by MLX; tfd splits an MTP fc in F32, F16, BF16 or GGUF's quantized types", t.name)
	}
	if len(t.shape) != 2 || t.shape[1] != 2*half {
		return left, right, fmt.Errorf("engine: tensor %s has shape %v, want [%d, %d]", t.name, t.shape, half, 2*half)
	}
	rows := t.shape[0]
	rowBytes, err := t.dtype.Bytes([]int{1, half})
	if err != nil {
		return left, right, fmt.Errorf("engine: tensor %s: its halves of %d columns are not whole %v blocks: %w", t.name, half, t.dtype, err)
	}
	if 2*rowBytes*rows != len(t.data) {
		return left, right, fmt.Errorf("engine: tensor %s holds %d bytes; %d rows of %v [%d] hold %d", t.name, len(t.data), rows, t.dtype, 2*half, 2*rowBytes*rows)
	}
	l, r := make([]byte, 0, rows*rowBytes), make([]byte, 0, rows*rowBytes)
	for i := range rows {
		row := t.data[2*i*rowBytes : 2*(i+1)*rowBytes]
		l, r = append(l, row[:rowBytes]...), append(r, row[rowBytes:]...)
	}
	shape := []int{rows, half}
	return stored{name: t.name + "[:, :hidden]", dtype: t.dtype, shape: shape, data: l},
		stored{name: t.name + "[:, hidden:]", dtype: t.dtype, shape: shape, data: r}, nil
}

// MTPHead is a model's MTP module as a drafter (scheduler.Drafter). Like the model's Forward, it
// is not safe for concurrent use, nor for use concurrent with the model's.
type MTPHead struct{ m *Model }

// StepShare returns what a step of the head reads against a forward of one row
// (batch.StepSharer): the MTP module's weights and the output head over the weights of every
// layer and the output head. Weights are counted by their elements, whatever their type.
func (h *MTPHead) StepShare() float64 { return h.m.mtpShare }

// stepShare returns the elements of the MTP module's tensors (mtp) and the output head over
// those a forward of one row reads: every tensor loaded for the body but the embeddings, of
// which it reads a row, and the output head where it is the embeddings.
func stepShare(w weights, body, mtp []compute.Tensor) float64 {
	count := func(ts ...compute.Tensor) float64 {
		n := 0.0
		for _, t := range ts {
			elems := 1.0
			for _, d := range t.Shape() {
				elems *= float64(d)
			}
			n += elems
		}
		return n
	}
	head, forward := count(w.head), count(body...)-count(w.embed)
	if w.head == w.embed {
		forward += head
	}
	return (count(mtp...) + head) / forward
}

// MTP returns the model's MTP head, or nil when the checkpoint has none.
func (m *Model) MTP() batch.Drafter {
	if m.mtp == nil {
		return nil
	}
	return &MTPHead{m}
}

// Draft runs the MTP module over rows that follow the last Forward: row r combines the hidden
// state of the last Forward's row rows[r].Source (h at position rows[r].Pos) with the token after
// it, rows[r].Token, writes the MTP layer's keys and values for that position, and, where asked,
// returns draft logits for the token two places after Pos. It must be called before the next
// Forward, which overwrites the hidden states. A call whose rows ask for no logits returns
// without waiting for the device.
//
// Chained rows (all of a call's or none) read instead the MTP layer's own output behind the last
// Draft call's logits row Source, before mtp.norm, as the first step reads the backbone's before
// its final norm: fed its own draft as Token one position further, the head drafts the token after
// that. The keys and values it writes there are speculative; the rows the caller feeds once those
// positions are confirmed overwrite them, and attention never reads a slot past its own position.
func (h *MTPHead) Draft(ctx context.Context, rows []batch.DraftRow) ([]float32, error) {
	m := h.m
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	n, err := m.stageDraftRows(rows)
	if err != nil {
		return nil, err
	}
	m.draftRows(len(rows), n, rows[0].Chained, true)
	logits := m.act.hostLogits[:n*m.cfg.Vocab]
	if n == 0 {
		// Rows that only feed the head's keys and values (a copying stream's, after each
		// forward) read nothing back, so nothing waits for them: on a GPU they run behind the
		// host, ahead of the next forward, and a failure shows at the next read or Sync.
		return logits, nil
	}
	if err := m.backend.ReadFloat32(m.act.logits, logits); err != nil {
		return nil, fmt.Errorf("engine: draft of %d rows: %w", len(rows), err)
	}
	return logits, nil
}

// stageDraftRows checks draft rows and uploads their metadata: the MTP entry for position t sits
// in KV slot base+t of the MTP layer and at RoPE position t+1.
func (m *Model) stageDraftRows(rows []batch.DraftRow) (int, error) {
	if len(rows) == 0 || len(rows) > m.maxRows {
		return 0, fmt.Errorf("engine: a draft takes 1 to %d rows, got %d", m.maxRows, len(rows))
	}
	a := m.act
	n := 0
	sources := m.lastRows // what a row's Source may index
	if rows[0].Chained {
		sources = m.lastDrafts
	}
	for i, r := range rows {
		switch {
		case r.Chained != rows[0].Chained:
			return 0, fmt.Errorf("engine: draft row %d: chained rows and rows after a forward go in separate calls", i)
		case r.Token < 0 || int(r.Token) >= m.cfg.Vocab:
			return 0, fmt.Errorf("engine: draft row %d: token %d outside the vocabulary of %d", i, r.Token, m.cfg.Vocab)
		case r.Pos < 0 || r.Pos+1 >= m.context:
			return 0, fmt.Errorf("engine: draft row %d: position %d outside the context of %d", i, r.Pos, m.context)
		case r.Base < 0 || r.Base+r.Pos >= m.slots:
			return 0, fmt.Errorf("engine: draft row %d: KV slot %d+%d outside the pool of %d", i, r.Base, r.Pos, m.slots)
		case (r.Source < 0 || r.Source >= sources) && r.Chained:
			return 0, fmt.Errorf("engine: chained draft row %d: source row %d, the last draft had %d logits rows", i, r.Source, sources)
		case r.Source < 0 || r.Source >= sources:
			return 0, fmt.Errorf("engine: draft row %d: source row %d, the last forward had %d", i, r.Source, sources)
		}
		a.hostTokens[i] = r.Token
		a.hostPositions[i] = int32(r.Pos)
		a.hostRopePositions[i] = int32(r.Pos + 1)
		a.hostBases[i] = int32(r.Base)
		a.hostSources[i] = int32(r.Source)
		if r.Logits {
			a.hostWanted[n] = int32(i)
			n++
		}
	}
	if n > m.logitRows {
		return 0, fmt.Errorf("engine: %d draft rows ask for their logits; at most %d may (Options.LogitRows)", n, m.logitRows)
	}
	if n > 0 && m.prunesHead(len(rows), n) {
		m.stageWanted(n)
	}
	b := m.backend
	b.WriteInt32(a.tokens, a.hostTokens[:len(rows)])
	b.WriteInt32(a.positions, a.hostPositions[:len(rows)])
	b.WriteInt32(a.ropePositions, a.hostRopePositions[:len(rows)])
	b.WriteInt32(a.bases, a.hostBases[:len(rows)])
	b.WriteInt32(a.sources, a.hostSources[:len(rows)])
	b.WriteInt32(a.wanted, a.hostWanted[:n])
	return n, nil
}

// draftRows enqueues the MTP forward. The residual stream a.x still holds the last Forward's
// hidden states; they are gathered out before a.x becomes the MTP layer's residual. Chained, a.h
// holds the last draft's outputs for its logits rows; they are gathered out before the embedding
// takes a.h.
//
// staged says the wanted rows' bases and positions were staged from the host (stageDraftRows),
// so that the MTP layer may run for those rows alone (prune.go); a drafted chain's steps, whose
// wanted row the device picks, run it for every row.
func (m *Model) draftRows(rows, wanted int, chained, staged bool) {
	b, c, w, a := m.backend, m.cfg, m.mtp, m.act
	if chained {
		b.Gather(a.final, a.h, a.sources, rows)
	} else {
		b.Gather(a.final, a.x, a.sources, rows)
	}
	b.RMSNorm(a.final, a.final, w.normHidden, rows, c.NormEps)
	b.Embed(a.h, m.w.embed, a.tokens, rows)
	b.RMSNorm(a.h, a.h, w.normEmbed, rows, c.NormEps)
	b.MatMul(a.x, a.h, w.fcEmbed, nil, rows)
	b.MatMul(a.out, a.final, w.fcHidden, nil, rows)
	b.Add(a.x, a.x, a.out, rows)

	l := &w.layer
	b.RMSNorm(a.h, a.x, l.inputNorm, rows, c.NormEps)
	if staged && m.prunesHead(rows, wanted) {
		m.layerWanted(c.Layers, l, rows, wanted, a.ropePositions, w.norm)
		m.lastRows, m.lastDrafts = 0, wanted // a.x no longer holds the backbone's hidden states
		return
	}
	m.attention(c.Layers, l, rows, a.ropePositions)
	b.AddRMSNorm(a.h, a.x, a.out, l.postNorm, rows, c.NormEps)
	m.mlp(l, rows)
	m.lastRows, m.lastDrafts = 0, wanted // a.x no longer holds the backbone's hidden states
	if wanted == 0 {
		return
	}
	b.Add(a.x, a.x, a.out, rows)
	// a.h keeps the wanted rows' outputs before mtp.norm for a chained call.
	b.Gather(a.h, a.x, a.wanted, wanted)
	b.RMSNorm(a.final, a.h, w.norm, wanted, c.NormEps)
	b.MatMul(a.logits, a.final, m.w.head, nil, wanted)
}
