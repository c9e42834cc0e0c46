package engine

import (
	"fmt"
	"slices"

	"tfd/batch"
	"tfd/compute"
)

// A hybrid model's sessions carry, besides the keys and values of their attention layers, the
// state of each gated DeltaNet layer: the convolution's last inputs and the recurrent matrices.
// Unlike keys and values, a state is not kept per position: the state after position p is the
// state after p−1 moved on by one token. So each session keeps a ring of the states after its
// newest Depth positions (state row session·Depth + p mod Depth), enough to feed a position
// again from any of them: a draft rejected after the newest verified position, or the last
// position of a kept prompt fed again. Rows of one session are computed in position order,
// whatever order a forward lists them in, so the state after N tokens is the same bits however
// the tokens were chunked or shared a forward with other sessions.
//
// Beside its ring, each session keeps snapshots of the states after its newest block boundaries
// (the second-to-last position of each prompt cache block: what a cached block carries, see
// blockstore.go), since a prompt chunk runs past a boundary by more than the ring holds: a
// forward routes such a position's state to its snapshot row and reads the next position from
// there, and copies a boundary state it left in the ring to its snapshot before the next forward.
//
// The engine learns sessions from the rows' bases: a base it has not seen takes a free block of
// Depth state rows, the least recently used session's when none is free. Which positions each
// session holds is kept on the host, so a row whose state is gone is refused rather than computed
// from another sequence's state.

// DefaultStateDepth is how many positions' states a session keeps when Options.StateDepth is 0:
// the newest, and enough behind it for a forward that verifies 32 drafts (drafts.mtp_max and
// drafts.ngram_max at their most) to resume after any of them.
const DefaultStateDepth = 33

// StateBlockTokens is the positions of a prompt cache block whose DeltaNet states the sessions
// snapshot (promptcache.BlockTokens): a block of a hybrid model carries the state after its
// second-to-last position, the one a restore feeds its last position from.
const StateBlockTokens = 64

// deltaStates is the DeltaNet states of every session of a hybrid model.
type deltaStates struct {
	dn        compute.DeltaNet
	conv, rec []compute.Tensor // per DeltaNet layer: [sessions·(depth+snaps), ConvState] and […, DeltaState]; the rings first
	depth     int
	snaps     int            // the boundary snapshots each session keeps, in rows after every session's ring
	sessions  []stateSession // the blocks of depth state rows, by index
	byBase    map[int]int    // a session's base → its block
	clock     int            // counts forwards, for least recently used
	undo      []undoBlock    // the blocks the forward being staged took, to give back if it is refused
	order     []int          // the forward's rows by session and position, reused
	ranges    []stagedRange  // the sessions' held positions after the forward, reused
	snapped   []snapshot     // the forward's boundary states, by where they went, reused
	pending   []snapshot     // boundary states left in the rings by the last forward, to copy out
}

// snapshot is the state after a block's boundary position pos (pos mod StateBlockTokens is
// StateBlockTokens−2) of the session in block.
type snapshot struct{ block, pos int }

// undoBlock is a block as it was before the forward being staged took it.
type undoBlock struct {
	block int
	was   stateSession
}

// stateSession is what the host knows of one block of state rows: whose they are and which
// positions' states they hold, lo … hi (none when hi < lo).
type stateSession struct {
	base     int // −1: free
	lo, hi   int
	lastUsed int
	snapPos  []int // the boundary position each snapshot row holds, −1 none
}

// holds reports whether the session's ring holds the state after position p.
func (s *stateSession) holds(p int) bool { return s.base >= 0 && s.lo <= p && p <= s.hi }

// newDeltaStates allocates the states of sessions sessions, depth positions each, for the
// model's DeltaNet layers.
func newDeltaStates(b compute.Backend, c Config, sessions, depth, maxRows int) (*deltaStates, error) {
	n := c.Next
	spec := compute.DeltaSpec{KHeads: n.KHeads, VHeads: n.VHeads, KDim: n.KDim, VDim: n.VDim}
	s := &deltaStates{depth: depth, snaps: snapshots(maxRows), byBase: map[int]int{}, sessions: make([]stateSession, sessions)}
	for i := range s.sessions {
		s.sessions[i] = s.fresh(-1)
	}
	rows := sessions * (depth + s.snaps)
	for range n.LinearLayers() {
		conv, err := b.Alloc(compute.F32, rows, compute.ConvState(n.ConvChannels(), n.ConvKernel))
		if err != nil {
			s.free(b)
			return nil, fmt.Errorf("engine: allocate DeltaNet states for %d sessions: %w", sessions, err)
		}
		s.conv = append(s.conv, conv)
		rec, err := b.Alloc(compute.F32, rows, spec.DeltaState())
		if err != nil {
			s.free(b)
			return nil, fmt.Errorf("engine: allocate DeltaNet states for %d sessions: %w", sessions, err)
		}
		s.rec = append(s.rec, rec)
	}
	return s, nil
}

func (s *deltaStates) free(b compute.Backend) {
	for _, t := range append(s.conv, s.rec...) {
		b.Free(t)
	}
	s.conv, s.rec = nil, nil
}

// snapshots returns how many boundary states a session keeps: the boundaries one forward of
// maxRows rows can cross, and the one before them, so that a stream offering its blocks after
// each forward finds every boundary state it fed.
func snapshots(maxRows int) int { return (maxRows+StateBlockTokens-1)/StateBlockTokens + 1 }

// fresh returns a block's record for the session at base, holding nothing.
func (s *deltaStates) fresh(base int) stateSession {
	ss := stateSession{base: base, hi: -1, snapPos: make([]int, s.snaps)}
	for i := range ss.snapPos {
		ss.snapPos[i] = -1
	}
	return ss
}

// snapRow returns the state row of block's snapshot of boundary position pos.
func (s *deltaStates) snapRow(block, pos int) int {
	return len(s.sessions)*s.depth + block*s.snaps + (pos/StateBlockTokens)%s.snaps
}

// boundary reports whether the state after position p is one a cache block carries.
func boundary(p int) bool { return p%StateBlockTokens == StateBlockTokens-2 }

// StateBytes returns the memory of one session's DeltaNet states at depth positions.
func (c Config) StateBytes(depth int) int64 {
	n := c.Next
	if !n.Enabled {
		return 0
	}
	perLayer := compute.ConvState(n.ConvChannels(), n.ConvKernel) + n.VHeads*n.KDim*n.VDim
	return int64(n.LinearLayers()) * int64(perLayer) * int64(depth) * 4
}

// block returns the block of the session at base, taking a free one, or the least recently used
// one not in use by this forward, for a base not seen before.
func (s *deltaStates) block(base int) int {
	if i, ok := s.byBase[base]; ok {
		return i
	}
	victim := -1
	for i := range s.sessions {
		si := &s.sessions[i]
		if si.base < 0 {
			victim = i
			break
		}
		if si.lastUsed == s.clock {
			continue // a session of this very forward
		}
		if victim < 0 || si.lastUsed < s.sessions[victim].lastUsed {
			victim = i
		}
	}
	if victim < 0 {
		return -1
	}
	s.undo = append(s.undo, undoBlock{victim, s.sessions[victim]})
	if old := s.sessions[victim].base; old >= 0 {
		delete(s.byBase, old)
	}
	s.sessions[victim] = s.fresh(base)
	s.byBase[base] = victim
	return victim
}

// stage checks the rows of one forward against the states held and writes its step list into
// steps (3 values a row, compute.DeltaNet's layout): each session's rows in position order, each
// reading the state after the position before it. Positions of one session must be consecutive.
// It returns the sessions' new ranges, which commit applies once the forward is enqueued.
func (s *deltaStates) stage(rows []batch.Row, steps []int32) (_ []stagedRange, err error) {
	s.flush()
	s.clock++
	s.undo = s.undo[:0]
	s.snapped = s.snapped[:0]
	defer func() {
		if err != nil {
			s.rollback()
		}
	}()
	order := s.order[:0]
	for i := range rows {
		order = append(order, i)
	}
	s.order = order
	slices.SortStableFunc(order, func(a, b int) int {
		if rows[a].Base != rows[b].Base {
			return rows[a].Base - rows[b].Base
		}
		return rows[a].Pos - rows[b].Pos
	})
	ranges := s.ranges[:0]
	defer func() { s.ranges = ranges[:0] }()
	for i := 0; i < len(order); {
		first := rows[order[i]]
		j := i + 1
		for j < len(order) && rows[order[j]].Base == first.Base {
			if p := rows[order[j]].Pos; p != rows[order[j-1]].Pos+1 {
				return nil, fmt.Errorf("engine: the rows of the session at slot %d are at positions %d and %d: a forward feeds a session's positions without gaps", first.Base, rows[order[j-1]].Pos, p)
			}
			j++
		}
		last := rows[order[j-1]].Pos
		blk := s.block(first.Base)
		if blk < 0 {
			return nil, fmt.Errorf("engine: a forward of rows from more than %d sessions: the DeltaNet states hold %d (Options.Sessions)", len(s.sessions), len(s.sessions))
		}
		ss := &s.sessions[blk]
		ss.lastUsed = s.clock
		if first.Pos > 0 && !ss.holds(first.Pos-1) {
			return nil, fmt.Errorf("engine: the session at slot %d has no DeltaNet state after position %d (it holds %s): feed it from position 0, or from a position it holds", first.Base, first.Pos-1, ss.held())
		}
		prev := -1 // the row the state after the position before went to
		if first.Pos > 0 {
			prev = blk*s.depth + (first.Pos-1)%s.depth
		}
		for k := i; k < j; k++ {
			r := order[k]
			p := rows[r].Pos
			to := blk*s.depth + p%s.depth
			if boundary(p) && last-p >= s.depth {
				// The ring's row is overwritten later in this forward: the boundary state goes to
				// its snapshot row, and the next position reads it there.
				to = s.snapRow(blk, p)
				s.snapped = append(s.snapped, snapshot{blk, p})
			}
			steps[3*k], steps[3*k+1], steps[3*k+2] = int32(r), int32(prev), int32(to)
			prev = to
		}
		lo := max(0, last-s.depth+1)
		if first.Pos > 0 {
			lo = max(lo, ss.lo)
		}
		ranges = append(ranges, stagedRange{block: blk, first: first.Pos, lo: lo, hi: last})
		i = j
	}
	return ranges, nil
}

// rollback gives back the blocks a refused forward took, as they were.
func (s *deltaStates) rollback() {
	for i := len(s.undo) - 1; i >= 0; i-- {
		u := s.undo[i]
		delete(s.byBase, s.sessions[u.block].base)
		s.sessions[u.block] = u.was
		if u.was.base >= 0 {
			s.byBase[u.was.base] = u.block
		}
	}
	s.undo = s.undo[:0]
}

// stagedRange is a session's held positions after a forward.
type stagedRange struct{ block, first, lo, hi int }

// commit records the positions the staged forward leaves held: its sessions forget the
// snapshots of positions it feeds again, take the ones it wrote to snapshot rows, and leave the
// boundary states it left in their rings to be copied out before the next forward (flush).
func (s *deltaStates) commit(ranges []stagedRange) {
	for _, r := range ranges {
		ss := &s.sessions[r.block]
		ss.lo, ss.hi = r.lo, r.hi
		ss.forget(r.first)
		for p := r.first + (StateBlockTokens-2-r.first%StateBlockTokens+StateBlockTokens)%StateBlockTokens; p <= r.hi; p += StateBlockTokens {
			if r.hi-p < s.depth {
				s.pending = append(s.pending, snapshot{r.block, p})
			}
		}
	}
	for _, sn := range s.snapped {
		s.sessions[sn.block].snapPos[(sn.pos/StateBlockTokens)%s.snaps] = sn.pos
	}
}

// forget drops the snapshots of positions from on: they are fed again, or belong to another
// sequence.
func (ss *stateSession) forget(from int) {
	for i, p := range ss.snapPos {
		if p >= from {
			ss.snapPos[i] = -1
		}
	}
}

// flush copies the boundary states the last forward left in the sessions' rings into their
// snapshot rows, while the rings still hold them; the copies run after that forward, before the
// next.
func (s *deltaStates) flush() {
	for _, sn := range s.pending {
		ss := &s.sessions[sn.block]
		if !ss.holds(sn.pos) {
			continue
		}
		for l := range s.conv {
			s.dn.CopyRows(s.conv[l], s.snapRow(sn.block, sn.pos), s.conv[l], sn.block*s.depth+sn.pos%s.depth, 1)
			s.dn.CopyRows(s.rec[l], s.snapRow(sn.block, sn.pos), s.rec[l], sn.block*s.depth+sn.pos%s.depth, 1)
		}
		ss.snapPos[(sn.pos/StateBlockTokens)%s.snaps] = sn.pos
	}
	s.pending = s.pending[:0]
}

// boundaryRow returns the state row that holds the state after boundary position pos of the
// session at base: its ring's row while the ring holds it, else its snapshot; false when neither
// does.
func (s *deltaStates) boundaryRow(base, pos int) (int, bool) {
	blk, ok := s.byBase[base]
	if !ok {
		return 0, false
	}
	ss := &s.sessions[blk]
	if ss.holds(pos) {
		return blk*s.depth + pos%s.depth, true
	}
	if ss.snapPos[(pos/StateBlockTokens)%s.snaps] == pos {
		return s.snapRow(blk, pos), true
	}
	return 0, false
}

// restore writes a cache block's state, the state after position pos, into the ring of the
// session at base (a free or least recently used block for a base not seen), as a forward
// feeding pos would; the session then holds pos alone, and can be fed from pos+1.
func (s *deltaStates) restore(base, pos int, conv, rec []compute.Tensor, row int) error {
	s.flush()
	s.clock++
	s.undo = s.undo[:0]
	blk := s.block(base)
	if blk < 0 {
		return fmt.Errorf("engine: restore DeltaNet states into the session at slot %d: every block of states is in use", base)
	}
	ss := &s.sessions[blk]
	ss.lastUsed = s.clock
	for l := range s.conv {
		s.dn.CopyRows(s.conv[l], blk*s.depth+pos%s.depth, conv[l], row, 1)
		s.dn.CopyRows(s.rec[l], blk*s.depth+pos%s.depth, rec[l], row, 1)
	}
	ss.forget(pos - StateBlockTokens + 2) // the block's positions are this sequence's now
	ss.lo, ss.hi = pos, pos
	return nil
}

// held describes the positions a session holds, for errors.
func (s *stateSession) held() string {
	if s.hi < s.lo {
		return "none"
	}
	return fmt.Sprintf("positions %d to %d", s.lo, s.hi)
}

// move copies the states of the session at base src, for its first n positions, to the session
// at base dst (a stream moving to a larger session): the bits move unchanged.
func (s *deltaStates) move(dn compute.DeltaNet, dst, src, n int) {
	from, ok := s.byBase[src]
	if !ok || dst == src {
		return
	}
	s.flush()
	s.clock++
	s.sessions[from].lastUsed = s.clock // not to be taken for dst
	to := s.block(dst)
	if to < 0 {
		return
	}
	fs := s.sessions[from]
	for l := range s.conv {
		dn.CopyRows(s.conv[l], to*s.depth, s.conv[l], from*s.depth, s.depth)
		dn.CopyRows(s.rec[l], to*s.depth, s.rec[l], from*s.depth, s.depth)
	}
	for l := range s.conv {
		dn.CopyRows(s.conv[l], s.snapRow(to, 0), s.conv[l], s.snapRow(from, 0), s.snaps)
		dn.CopyRows(s.rec[l], s.snapRow(to, 0), s.rec[l], s.snapRow(from, 0), s.snaps)
	}
	ts := &s.sessions[to]
	ts.lo, ts.hi = fs.lo, min(fs.hi, n-1)
	copy(ts.snapPos, fs.snapPos)
	ts.forget(n)
}

// resumable returns the largest position p ≤ want from which the session at base can be fed:
// 0, or one after a position whose state it holds.
func (s *deltaStates) resumable(base, want int) int {
	i, ok := s.byBase[base]
	if !ok {
		return 0
	}
	ss := &s.sessions[i]
	for p := want; p > 0; p-- {
		if ss.holds(p - 1) {
			return p
		}
		if p-1 < ss.lo {
			break
		}
	}
	return 0
}

// stateHolder is a hybrid model's batch.Stateful.
type stateHolder struct{ m *Model }

// Resumable implements batch.Stateful.
func (h stateHolder) Resumable(base, want int) int { return h.m.states.resumable(base, want) }

// StateDepth implements batch.Stateful.
func (h stateHolder) StateDepth() int { return h.m.states.depth }
