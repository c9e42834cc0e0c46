package engine

import (
	"fmt"

	"tfd/batch"
	"tfd/compute"
)

// A sliding layer's query at position p sees the keys of positions p−W+1 … p alone (W its
// window), so a session need not keep that layer's keys and values for every position: it keeps
// them in a ring of R slots, position p at slot p mod R, and its memory for those layers is
// bounded by the window instead of growing with the context.
//
// How long a ring must be. Every row of a forward writes its keys before any row attends, so the
// rows a session feeds in one forward, positions s … e, must not overwrite what the first of them
// reads: e − R < s − W + 1, that is R ≥ W + (e − s). A session feeds at most MaxRows rows a
// forward (a prompt chunk, or its newest token and the drafts verified after it), so
// R = W + MaxRows − 1 always holds what a forward reads. The same bound covers rejected drafts: a
// forward that verified drafts up to e and accepted fewer overwrote only positions ≤ e − R, and
// the next forward starts after the accepted ones, at s′ > s, reading from s′ − W + 1 > e − R.
//
// How the ring is read. Attention reads a contiguous run of slots, so each ring is stored twice
// over: a session's span is 2R slots, and position p is written at slot p mod R and again at
// R + (p mod R). A window of at most W ≤ R positions starting at position f is then the
// contiguous run from slot f mod R, and every backend runs it with its own KVWrite and Attention,
// unchanged: the same keys in the same order, so the same bits as a session that keeps every
// position. The price is 2R slots a session rather than R (a kernel that wraps its index would
// save the second copy).
//
// Which ring is whose. The engine knows sessions only by the rows' bases, so it learns them as
// the state of a hybrid model does: a base it has not seen takes a free ring, or the least
// recently used one that this forward does not use. For each ring the host keeps which positions
// it holds, lo … hi, and a forward whose rows need a position the ring no longer holds is
// refused rather than computed from another sequence's keys. batch.Stateful tells the scheduler
// from which position a kept session can be fed again.

// Window returns how many keys a query of layer sees, itself included: a sliding layer's window,
// or 0 for a layer that sees every key before it (the MTP layer's included).
func (c Config) Window(layer int) int {
	if layer < len(c.Sliding) && c.Sliding[layer] {
		return c.SlidingWindow
	}
	return 0
}

// windowed returns the largest window of any layer, and how many layers have one. The rings and
// the rows' views take that one window for every sliding layer: the families with sliding layers
// (Gemma 3, GPT-OSS) give them all one sliding_window.
func (c Config) windowed() (window, layers int) {
	for i := range c.Layers {
		if w := c.Window(i); w > 0 {
			window, layers = max(window, w), layers+1
		}
	}
	return window, layers
}

// RingLength returns R, the positions a session's ring keeps for each sliding layer of a model
// run with the given context and rows a forward (see above), or 0 when its sessions keep every
// position of every layer: a model without sliding layers, or one whose rings (two copies of R
// slots) would not be smaller than the context.
func (c Config) RingLength(context, maxRows int) int {
	w, _ := c.windowed()
	if w == 0 {
		return 0
	}
	r := w + maxRows - 1
	if 2*r >= context {
		return 0
	}
	return r
}

// RingBytes returns the memory of one session's rings: 2R slots of every sliding layer, keys and
// values stored as kvCache (compute.KVSpec.DType).
func (c Config) RingBytes(context, maxRows int, kvCache compute.DType) int64 {
	r := c.RingLength(context, maxRows)
	_, layers := c.windowed()
	if r == 0 {
		return 0
	}
	return compute.KVSpec{Layers: layers, KVHeads: c.KVHeads, HeadDim: c.HeadDim, Slots: 2 * r, DType: kvCache}.Bytes()
}

// windowRings is the sliding layers' keys and values of every session: a KV pool of their own,
// rings·2R slots, and what the host knows of each ring.
type windowRings struct {
	kv     compute.KV
	spec   compute.KVSpec
	window int   // W: the sliding layers' window
	length int   // R: the positions a ring holds
	index  []int // a model layer's index in kv, −1 for a layer that keeps every position
	rings  []ring
	byBase map[int]int // a session's base → its ring
	clock  int         // counts forwards, for least recently used

	groups []sessionRows // the forward being staged: its sessions' rows, reused
}

// ring is what the host knows of one ring: whose it is and which positions it holds, lo … hi
// (none when hi < lo).
type ring struct {
	base     int // −1: free
	lo, hi   int
	lastUsed int
}

// sessionRows is one session's rows in the forward being staged: positions first … last.
type sessionRows struct {
	base, first, last, rows, ring int
}

// newWindowRings allocates rings for sessions sessions, each of length positions, for c's
// sliding layers, keys and values stored as kvCache.
func newWindowRings(b compute.Backend, c Config, sessions, length int, kvCache compute.DType) (*windowRings, error) {
	w, layers := c.windowed()
	spec := compute.KVSpec{Layers: layers, KVHeads: c.KVHeads, HeadDim: c.HeadDim, Slots: sessions * 2 * length, DType: kvCache}
	kv, err := b.NewKV(spec)
	if err != nil {
		return nil, fmt.Errorf("engine: allocate the sliding layers' rings for %d sessions of %d positions (%s): %w",
			sessions, length, FormatBytes(spec.Bytes()), err)
	}
	r := &windowRings{kv: kv, spec: spec, window: w, length: length, rings: make([]ring, sessions), byBase: map[int]int{}}
	for i := range r.rings {
		r.rings[i] = ring{base: -1, hi: -1}
	}
	n := 0
	for i := range c.Layers {
		r.index = append(r.index, -1)
		if c.Window(i) > 0 {
			r.index[i] = n
			n++
		}
	}
	return r, nil
}

// span returns the slots one ring takes: its positions, twice over.
func (r *windowRings) span() int { return 2 * r.length }

// sliding reports whether layer keeps its keys and values in the rings, and its index there.
func (r *windowRings) sliding(layer int) (int, bool) {
	if r == nil || layer >= len(r.index) || r.index[layer] < 0 {
		return 0, false
	}
	return r.index[layer], true
}

// holdsBefore reports whether ring g holds every position a forward feeding from position s
// reads before s: s − W + 1 … s − 1.
func (r *windowRings) holdsBefore(g *ring, s int) bool {
	if s == 0 {
		return true
	}
	return g.base >= 0 && s-1 <= g.hi && (g.lo == 0 || s-r.window+1 >= g.lo)
}

// stage checks the rows of one forward against what the rings hold, takes rings for sessions
// not seen before, and fills the rows' ring slots: write (the ring's first slot, for KVWrite with
// the position mod R in ringPos), mirror (the same, R further on), and the window each row
// attends (its first slot and how many keys after it). A session's rows in one forward must be
// consecutive positions. Nothing changes when it returns an error.
func (r *windowRings) stage(rows []batch.Row, write, mirror, ringPos, winBases, winPositions []int32) error {
	r.clock++
	groups := r.groups[:0]
	for _, row := range rows {
		i := 0
		for i < len(groups) && groups[i].base != row.Base {
			i++
		}
		if i == len(groups) {
			groups = append(groups, sessionRows{base: row.Base, first: row.Pos, last: row.Pos, ring: -1})
		}
		g := &groups[i]
		g.first, g.last, g.rows = min(g.first, row.Pos), max(g.last, row.Pos), g.rows+1
	}
	r.groups = groups
	needed := 0
	for i := range groups {
		g := &groups[i]
		if g.last-g.first+1 != g.rows {
			return fmt.Errorf("engine: the session at slot %d feeds %d rows at positions %d…%d; a session's rows in one forward must be consecutive positions", g.base, g.rows, g.first, g.last)
		}
		if j, ok := r.byBase[g.base]; ok {
			g.ring = j
		}
		switch {
		case g.ring < 0 && g.first > 0:
			return fmt.Errorf("engine: the session at slot %d is fed from position %d, but the sliding layers hold none of its keys (its ring went to another session): feed it from position 0", g.base, g.first)
		case g.ring < 0:
			needed++
		case !r.holdsBefore(&r.rings[g.ring], g.first):
			h := r.rings[g.ring]
			return fmt.Errorf("engine: the session at slot %d is fed from position %d, whose window starts at %d, but its sliding layers' ring holds positions %d…%d: feed it from where batch.Stateful's Resumable says",
				g.base, g.first, max(0, g.first-r.window+1), h.lo, h.hi)
		}
	}
	if needed > 0 && r.free(groups) < needed {
		return fmt.Errorf("engine: a forward feeds %d sessions the sliding layers' rings do not know, and %d rings are free: load the model with more sessions (Options.Sessions)", needed, r.free(groups))
	}
	for i := range groups {
		g := &groups[i]
		if g.ring < 0 {
			g.ring = r.take(g.base)
		}
		h := &r.rings[g.ring]
		if g.first == 0 {
			h.lo = 0
		}
		h.hi = g.last
		h.lo = max(h.lo, g.last-r.length+1)
		h.lastUsed = r.clock
	}
	for i, row := range rows {
		j := 0
		for groups[j].base != row.Base {
			j++
		}
		at := groups[j].ring * r.span()
		first := max(0, row.Pos-r.window+1)
		write[i] = int32(at)
		mirror[i] = int32(at + r.length)
		ringPos[i] = int32(row.Pos % r.length)
		winBases[i] = int32(at + first%r.length)
		winPositions[i] = int32(row.Pos - first)
	}
	return nil
}

// free counts the rings a forward of groups may take: free ones, and ones no session of the
// forward uses.
func (r *windowRings) free(groups []sessionRows) int {
	n := 0
	for i := range r.rings {
		if r.rings[i].base < 0 || r.rings[i].lastUsed != r.clock && !r.usedBy(groups, i) {
			n++
		}
	}
	return n
}

// usedBy reports whether ring i belongs to a session of groups.
func (r *windowRings) usedBy(groups []sessionRows, i int) bool {
	for _, g := range groups {
		if g.ring == i {
			return true
		}
	}
	return false
}

// take gives the session at base a ring: a free one, else the least recently used one that no
// session of the forward being staged uses. The caller has checked that one exists.
func (r *windowRings) take(base int) int {
	victim := -1
	for i := range r.rings {
		g := &r.rings[i]
		if g.base < 0 {
			victim = i
			break
		}
		if g.lastUsed == r.clock || r.usedBy(r.groups, i) {
			continue
		}
		if victim < 0 || g.lastUsed < r.rings[victim].lastUsed {
			victim = i
		}
	}
	if old := r.rings[victim].base; old >= 0 {
		delete(r.byBase, old)
	}
	r.rings[victim] = ring{base: base, hi: -1, lastUsed: r.clock}
	r.byBase[base] = victim
	return victim
}

// saveable returns the ring slot from which positions pos … pos+n−1 of the session at base run
// (contiguous, thanks to the second copy), and whether its ring holds them all.
func (r *windowRings) saveable(base, pos, n int) (int, bool) {
	j, ok := r.byBase[base]
	if !ok || n > r.length {
		return 0, false
	}
	h := &r.rings[j]
	return j*r.span() + pos%r.length, h.lo <= pos && pos+n-1 <= h.hi
}

// restore copies n positions of a block store's ring part, from slot at of src, into the ring of
// the session at base as positions pos … pos+n−1, both copies, as a forward writing them would;
// a session without a ring takes one.
func (r *windowRings) restore(b compute.Backend, base, pos int, src compute.KV, at, n int) error {
	if n > r.length {
		return fmt.Errorf("engine: restore %d positions into sliding layers' rings of %d", n, r.length)
	}
	r.clock++
	r.groups = r.groups[:0]
	j, ok := r.byBase[base]
	if !ok {
		if r.free(nil) == 0 {
			return fmt.Errorf("engine: restore into the session at slot %d: no ring is free for it: load the model with more sessions (Options.Sessions)", base)
		}
		j = r.take(base)
	}
	// Each copy of the ring in at most two runs: up to its end, then from its start.
	for _, c := range []int{0, r.length} {
		start := pos % r.length
		first := min(n, r.length-start)
		b.CopyKV(r.kv, j*r.span()+c+start, src, at, first)
		if first < n {
			b.CopyKV(r.kv, j*r.span()+c, src, at+first, n-first)
		}
	}
	h := &r.rings[j]
	switch {
	case pos == 0:
		h.lo = 0
	case pos > h.hi+1 || h.hi < h.lo:
		h.lo = pos // a gap: only the restored positions are the sequence's
	}
	h.hi = pos + n - 1
	h.lo = max(h.lo, h.hi-r.length+1)
	h.lastUsed = r.clock
	return nil
}

// resumable implements batch.Stateful's Resumable for the rings.
func (r *windowRings) resumable(base, want int) int {
	j, ok := r.byBase[base]
	if !ok {
		return 0
	}
	h := &r.rings[j]
	p := min(want, h.hi+1)
	if !r.holdsBefore(h, p) {
		return 0
	}
	return max(p, 0)
}

// move copies the ring of the session at src, as far as its first n positions go, to the
// session at dst; it is MoveKV's part for the sliding layers.
func (r *windowRings) move(b compute.Backend, dst, src, n int) error {
	if n == 0 || dst == src {
		return nil
	}
	j, ok := r.byBase[src]
	if !ok || !r.holdsBefore(&r.rings[j], n) {
		return fmt.Errorf("engine: move the session at slot %d to slot %d: its sliding layers' ring does not hold the window before position %d", src, dst, n)
	}
	r.clock++
	r.groups = append(r.groups[:0], sessionRows{base: src, ring: j})
	k, ok := r.byBase[dst]
	if !ok {
		if r.free(r.groups) == 0 {
			return fmt.Errorf("engine: move the session at slot %d to slot %d: no ring is free for it: load the model with more sessions (Options.Sessions)", src, dst)
		}
		k = r.take(dst)
	}
	r.rings[j].lastUsed = r.clock
	b.CopyKV(r.kv, k*r.span(), r.kv, j*r.span(), r.span())
	from := r.rings[j]
	r.rings[k] = ring{base: dst, lo: from.lo, hi: min(from.hi, n-1), lastUsed: r.clock}
	return nil
}

// Resumable returns the largest position p ≤ want from which the session at base can be fed
// next: every position when the model keeps every key, and otherwise 0 or a position whose
// window the sliding layers' ring still holds. It implements batch.Stateful.
func (m *Model) Resumable(base, want int) int {
	if m.rings == nil {
		return want
	}
	return m.rings.resumable(base, want)
}

// StateDepth returns how many drafts after its newest token a session can have rejected and
// still be fed again after any of them: a ring keeps MaxRows positions beyond the window. It
// implements batch.Stateful.
func (m *Model) StateDepth() int { return m.maxRows }

// Rings returns how many sessions' sliding layers the model keeps in rings at once
// (Options.Sessions), or 0 when its sessions keep every position.
func (m *Model) Rings() int {
	if m.rings == nil {
		return 0
	}
	return len(m.rings.rings)
}

// States returns where the model's sessions can be fed again from, as a batch.Stateful: a
// hybrid model's DeltaNet states (deltastate.go), or the model itself when its sessions keep the
// sliding layers in rings; nil when every session keeps every position and can be fed again from
// any. No family has both.
func (m *Model) States() batch.Stateful {
	switch {
	case m.states != nil:
		return stateHolder{m}
	case m.rings != nil:
		return m
	}
	return nil
}
