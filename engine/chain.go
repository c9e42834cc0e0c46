package engine

import (
	"context"
	"errors"
	"fmt"

	"tfd/batch"
	"tfd/compute"
)

// Chains runs a model's greedy chains on its device (batch.Chainer). A step is one forward of
// one row, after which the backend's ArgmaxNext (compute.Chainer) writes the argmax of its logits
// into the forward's token for the next step and moves its position one on, so the host never
// chooses a token. Every step records the same commands, which a GPU replays as one graph.
//
// On a backend that runs behind the host (compute.AsyncReader), Step records the forward and an
// async read of its token and sets them going; Token waits for that read alone, so while the host
// takes one step's token and enqueues the next, the device runs the step between. On any other
// backend a step runs when its token is taken: enqueueing it early would gain nothing there, and
// a step never run costs nothing when the caller stops. Like the model's Forward, Chains is not
// safe for concurrent use, nor for use concurrent with the model's.
type Chains struct {
	m       *Model
	chainer compute.Chainer
	reader  compute.AsyncReader // nil: a step runs when its token is taken

	base, pos int                              // the chain's session and the position of its next step
	reads     [batch.ChainAhead]compute.Ticket // the untaken steps' reads (reader only), a ring
	first     int                              // the oldest untaken step's place in reads
	untaken   int                              // steps enqueued whose tokens are not taken
	token     [1]int32
}

// Chains returns the model's greedy chains, or nil when its backend runs none (it is no
// compute.Chainer) or the model needs the host between steps: sliding windows (Gemma 3, GPT-OSS)
// are staged per forward from the rows' positions, Gemma's soft-capped logits are capped on the
// host, which ArgmaxNext's steps on the device would skip, and a hybrid model's steps through its
// DeltaNet states are staged per forward from the rows' positions too.
func (m *Model) Chains() batch.Chainer {
	chainer, ok := m.backend.(compute.Chainer)
	if !ok || m.cfg.Gemma.Enabled || m.cfg.Sliding != nil || m.states != nil {
		return nil
	}
	reader, _ := m.backend.(compute.AsyncReader)
	return &Chains{m: m, chainer: chainer, reader: reader}
}

// StartChain stages row (its Logits is taken as set) as the first step's input and drops the
// steps of an earlier chain not taken.
func (c *Chains) StartChain(ctx context.Context, row batch.Row) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.untaken, c.first = 0, 0
	row.Logits = true
	if _, _, err := c.m.stageRows([]batch.Row{row}); err != nil {
		return err
	}
	c.base, c.pos = row.Base, row.Pos
	return nil
}

// Step enqueues the chain's next forward: on an AsyncReader it records the step and its read now.
func (c *Chains) Step() error {
	m := c.m
	switch {
	case c.untaken == batch.ChainAhead:
		return fmt.Errorf("engine: a chain holds %d steps whose tokens are not taken; take one first", c.untaken)
	case c.pos >= m.context || c.base+c.pos >= m.slots:
		return fmt.Errorf("engine: a chain step at position %d passes the context of %d or the pool of %d", c.pos, m.context, m.slots)
	}
	if c.reader != nil {
		c.run()
		c.reads[(c.first+c.untaken)%len(c.reads)] = c.reader.ReadInt32Async(m.act.chain, 1)
	}
	c.untaken++
	c.pos++
	return nil
}

// Token returns the oldest untaken step's token: awaited on an AsyncReader (with a Sync once no
// step is left, so that what only a Sync reports is not lost), run and read elsewhere.
func (c *Chains) Token() (int32, error) {
	if c.untaken == 0 {
		return 0, errors.New("engine: Token with no chain step enqueued")
	}
	pos := c.pos - c.untaken
	c.untaken--
	var err error
	if c.reader != nil {
		t := c.reads[c.first]
		c.first = (c.first + 1) % len(c.reads)
		err = c.reader.AwaitInt32(t, c.token[:])
		if c.untaken == 0 {
			err = errors.Join(err, c.m.backend.Sync())
		}
	} else {
		c.run()
		err = c.m.backend.ReadInt32(c.m.act.chain, c.token[:])
	}
	if err != nil {
		c.untaken = 0 // the chain is broken: the caller starts another
		return 0, fmt.Errorf("engine: greedy chain step at position %d: %w", pos, err)
	}
	return c.token[0], nil
}

// run records one step: the forward of the row the device holds, then the argmax that makes its
// token the next step's input, one position further.
func (c *Chains) run() {
	m, a := c.m, c.m.act
	m.forwardRows(1, 1)
	c.chainer.ArgmaxNext(a.logits, a.tokens, a.positions, a.chain, m.cfg.Vocab, 0)
	m.lastRows, m.lastDrafts = 0, 0 // the hidden states are a chain step's, which no caller knows
}
