package engine

import (
	"context"
	"errors"
	"fmt"

	"tfd/batch"
	"tfd/compute"
)

// DraftChains runs a greedy stream's drafted forwards as a chain on its device
// (batch.DraftChainer). A step is one forward of the newest token and the MTP head's depth drafts
// after it; the backend's VerifyDrafts (compute.DraftVerifier) takes each row's argmax, counts the
// drafts that landed and makes the rows the head's; the head runs over every row of the forward
// and drafts from the last accepted one, its chain depth calls long, each followed by DraftNext,
// whose last call stages the next step's rows. The host reads back only the verdict, a few ints.
// Every step records the same commands, which a GPU replays as one graph.
//
// The head's rows past the accepted ones write keys and values for tokens that did not stand, as
// the head's chained rows do; the rows a later step feeds once those positions are confirmed
// overwrite them, and attention never reads a slot past its own position. So the drafts are the
// ones the host's Draft calls would make, and the tokens are a Forward's greedy tokens.
//
// On a backend that runs behind the host (compute.AsyncReader), Step records the step and an
// async read of its verdict; elsewhere a step runs when its verdict is taken, as Chains' do. Like
// the model's Forward, DraftChains is not safe for concurrent use, nor for use concurrent with the
// model's.
type DraftChains struct {
	m      *Model
	ops    compute.DraftVerifier
	reader compute.AsyncReader // nil: a step runs when its verdict is taken

	rows    int // a step's forward rows: the newest token and its drafts
	base    int
	next    int                              // the position of the first row of the step after the last taken
	reads   [batch.ChainAhead]compute.Ticket // the untaken steps' reads (reader only), a ring
	first   int                              // the oldest untaken step's place in reads
	untaken int                              // steps enqueued whose verdicts are not taken
	verdict [compute.MaxAsyncRead]int32
}

// DraftChains returns the model's drafted chains, or nil when its backend runs none (it is no
// compute.DraftVerifier), the checkpoint has no MTP head, or the model needs the host between
// forwards (Gemma and hybrid models, as for Chains).
func (m *Model) DraftChains() batch.DraftChainer {
	ops, ok := m.backend.(compute.DraftVerifier)
	if !ok || m.mtp == nil || m.cfg.Gemma.Enabled || m.states != nil {
		// A hybrid model's steps through its DeltaNet states are staged per forward from the
		// rows' positions, which a chain on the device does not do.
		return nil
	}
	reader, _ := m.backend.(compute.AsyncReader)
	return &DraftChains{m: m, ops: ops, reader: reader}
}

// maxDraftRows is the most rows a drafted chain's step takes: its verdict must fit one async read.
const maxDraftRows = (compute.MaxAsyncRead - 1) / 2

// StartDraftChain stages row and its drafts as the first step's rows, all wanting logits, and
// drops the steps of an earlier chain not taken.
func (c *DraftChains) StartDraftChain(ctx context.Context, row batch.Row, drafts []int32) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.untaken, c.first = 0, 0
	rows := 1 + len(drafts)
	if len(drafts) == 0 || rows > min(c.m.logitRows, maxDraftRows) {
		return fmt.Errorf("engine: a drafted chain takes 1 to %d drafts, got %d", min(c.m.logitRows, maxDraftRows)-1, len(drafts))
	}
	staged := make([]batch.Row, 0, maxDraftRows)
	row.Logits = true
	staged = append(staged, row)
	for i, tok := range drafts {
		staged = append(staged, batch.Row{Base: row.Base, Pos: row.Pos + 1 + i, Token: tok, Logits: true})
	}
	if _, _, err := c.m.stageRows(staged); err != nil {
		return err
	}
	c.rows, c.base, c.next = rows, row.Base, row.Pos
	return nil
}

// Step enqueues the chain's next step: on an AsyncReader it records the step and its read now.
// The step's first row is at most rows positions a step past the last known one; its head's
// chained rows reach depth-1 positions past its last accepted row.
func (c *DraftChains) Step() error {
	m, depth := c.m, c.rows-1
	reach := c.next + c.untaken*c.rows + 2*depth // its head's last chained row at reach-1, turned by RoPE as reach
	switch {
	case c.rows == 0:
		return errors.New("engine: Step before StartDraftChain")
	case c.untaken == batch.ChainAhead:
		return fmt.Errorf("engine: a drafted chain holds %d steps whose verdicts are not taken; take one first", c.untaken)
	case reach >= m.context || c.base+reach >= m.slots:
		return fmt.Errorf("engine: a drafted chain step could reach position %d, past the context of %d or the pool of %d", reach, m.context, m.slots)
	}
	if c.reader != nil {
		c.run()
		c.reads[(c.first+c.untaken)%len(c.reads)] = c.reader.ReadInt32Async(m.act.verdict, compute.VerdictLen(c.rows))
	}
	c.untaken++
	return nil
}

// Verdict returns the oldest untaken step's accepted tokens and next drafts: awaited on an
// AsyncReader (with a Sync once no step is left), run and read elsewhere.
func (c *DraftChains) Verdict() (accepted, next []int32, err error) {
	if c.untaken == 0 {
		return nil, nil, errors.New("engine: Verdict with no drafted chain step enqueued")
	}
	c.untaken--
	v := c.verdict[:compute.VerdictLen(c.rows)]
	if c.reader != nil {
		t := c.reads[c.first]
		c.first = (c.first + 1) % len(c.reads)
		err = c.reader.AwaitInt32(t, v)
		if c.untaken == 0 {
			err = errors.Join(err, c.m.backend.Sync())
		}
	} else {
		c.run()
		err = c.m.backend.ReadInt32(c.m.act.verdict, v)
	}
	depth := c.rows - 1
	if j := int(v[0]); err == nil && (j < 0 || j > depth) {
		err = fmt.Errorf("%d drafts of %d landed", j, depth)
	}
	if err != nil {
		c.untaken = 0 // the chain is broken: the caller starts another
		return nil, nil, fmt.Errorf("engine: drafted chain step at position %d: %w", c.next, err)
	}
	j := int(v[0])
	c.next += j + 1
	return v[1 : 2+j], v[1+c.rows : 1+c.rows+depth], nil
}

// run records one step: the forward of the rows the device holds, their verification, and the
// MTP head's chain from the last accepted row, whose last call stages the next step's rows.
func (c *DraftChains) run() {
	m, a, vocab := c.m, c.m.act, c.m.cfg.Vocab
	m.forwardRows(c.rows, c.rows)
	c.ops.VerifyDrafts(a.logits, a.tokens, a.positions, a.ropePositions, a.sources, a.wanted, a.verdict, c.rows, vocab)
	for step := range c.rows - 1 {
		rows := 1
		if step == 0 {
			rows = c.rows // the head's entries for every position the forward fed
		}
		m.draftRows(rows, 1, step > 0, false)
		c.ops.DraftNext(a.logits, a.tokens, a.positions, a.ropePositions, a.sources, a.wanted, a.verdict, c.rows, vocab, step)
	}
	m.lastRows, m.lastDrafts = 0, 0 // the hidden states are a chain step's, which no caller knows
}
