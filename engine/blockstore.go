package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"tfd/compute"
)

// BlockStore is the prompt cache's memory on the model's backend (a promptcache.Store): a KV
// pool of its own, with the model's layers (the MTP layer's included), KV heads and head size,
// cut into numbered blocks of a fixed number of positions. Block b holds slots b·tokens …
// (b+1)·tokens−1 of that pool. Save and Restore are device copies between the model's pool and
// the store's, enqueued in order with the model's forwards; Read and Write move one block to and
// from the host in compute's layout (ReadKV), the same on every backend.
//
// A model whose sessions keep their sliding layers in rings (window.go) stores those layers in
// a second pool, ringKV, block for block beside the first: a block is its full layers' part
// then its sliding layers' part, on the device and on the host. A block can be saved only while
// the session's ring still holds its positions (Saveable); a restore writes them into the ring
// as a forward would.
//
// A hybrid model's block carries a third part, after the others: for each DeltaNet layer, the
// convolution's state and the recurrent state after the block's second-to-last position (one row
// of each, F32 little-endian on the host), the state from which a restore feeds the block's last
// position again. Sessions snapshot those boundary states as they are fed (deltastate.go), so a
// block can be saved while its session's snapshot or ring holds its state (Saveable); a restore
// writes it into the session's ring.
//
// Like the model, a BlockStore is driven by one goroutine, the one that drives the model.
type BlockStore struct {
	m      *Model
	kv     compute.KV // nil while the store holds no blocks
	ringKV compute.KV // the sliding layers' part, when the model keeps them in rings; else nil
	// A hybrid model's states part: per DeltaNet layer, [blocks, ConvState] and [blocks,
	// DeltaState]; and one row of each to read a block through. nil otherwise.
	conv, rec           []compute.Tensor
	convStage, recStage []compute.Tensor
	blocks              int
	tokens              int
	closed              bool
}

// NewBlockStore returns a store of blocks zeroed blocks of tokens positions each; blocks may be
// 0, for a store that Resize grows later. The model's Close closes it too.
func (m *Model) NewBlockStore(blocks, tokens int) (*BlockStore, error) {
	if tokens <= 0 {
		return nil, fmt.Errorf("engine: a block store's blocks need at least one position, got %d", tokens)
	}
	s := &BlockStore{m: m, tokens: tokens}
	if m.states != nil {
		if tokens != StateBlockTokens {
			return nil, fmt.Errorf("engine: a hybrid model's block store takes blocks of %d positions, the ones its sessions snapshot states for, not %d", StateBlockTokens, tokens)
		}
		for l := range m.states.conv {
			c, err := m.backend.Alloc(compute.F32, 1, m.states.conv[l].Shape()[1])
			if err != nil {
				return nil, fmt.Errorf("engine: a block store's staging rows: %w", err)
			}
			r, err := m.backend.Alloc(compute.F32, 1, m.states.rec[l].Shape()[1])
			if err != nil {
				m.backend.Free(c)
				return nil, fmt.Errorf("engine: a block store's staging rows: %w", err)
			}
			s.convStage, s.recStage = append(s.convStage, c), append(s.recStage, r)
		}
	}
	if err := s.Resize(blocks, nil); err != nil {
		return nil, err
	}
	if m.stores == nil {
		m.stores = map[*BlockStore]struct{}{}
	}
	m.stores[s] = struct{}{}
	return s, nil
}

// errClosed is returned by every method of a BlockStore after Close.
var errClosed = errors.New("engine: the block store was closed")

// Blocks returns how many blocks the store holds.
func (s *BlockStore) Blocks() int { return s.blocks }

// Tokens returns the positions one block holds.
func (s *BlockStore) Tokens() int { return s.tokens }

// BlockBytes returns the bytes of one block on the host: the length Read fills and Write takes.
func (s *BlockStore) BlockBytes() int {
	return int(s.spec(s.tokens).Bytes()+s.ringSpec(s.tokens).Bytes()) + s.stateBytes()
}

// stateBytes returns the bytes of one block's states part on the host, 0 for a model without
// DeltaNet layers.
func (s *BlockStore) stateBytes() int {
	if s.m.states == nil {
		return 0
	}
	n := 0
	for l := range s.m.states.conv {
		n += 4 * (s.m.states.conv[l].Shape()[1] + s.m.states.rec[l].Shape()[1])
	}
	return n
}

// boundary returns the position whose state a block starting at pos carries.
func (s *BlockStore) boundary(pos int) int { return pos + s.tokens - 2 }

// spec returns the KV spec of a pool of the store's shape with the given slots.
func (s *BlockStore) spec(slots int) compute.KVSpec {
	spec := s.m.kvSpec
	spec.Slots = slots
	return spec
}

// ringSpec returns the KV spec of the sliding layers' part with the given slots; its Bytes are 0
// when the model keeps no rings.
func (s *BlockStore) ringSpec(slots int) compute.KVSpec {
	if s.m.rings == nil {
		return compute.KVSpec{}
	}
	spec := s.m.rings.spec
	spec.Slots = slots
	return spec
}

// Save copies the keys and values of positions pos … pos+Tokens()−1 of the session whose slots
// start at base, in every layer, into block.
func (s *BlockStore) Save(block, base, pos int) error {
	if err := s.check("save", block, base, pos); err != nil {
		return err
	}
	if s.ringKV != nil {
		slot, ok := s.m.rings.saveable(base, pos, s.tokens)
		if !ok {
			return fmt.Errorf("engine: save block %d at positions %d…%d of the session at slot %d: its sliding layers' ring no longer holds them", block, pos, pos+s.tokens-1, base)
		}
		s.m.backend.CopyKV(s.ringKV, block*s.tokens, s.m.rings.kv, slot, s.tokens)
	}
	if st := s.m.states; st != nil {
		row, ok := st.boundaryRow(base, s.boundary(pos))
		if !ok {
			return fmt.Errorf("engine: save block %d at positions %d…%d of the session at slot %d: it no longer holds the DeltaNet states after position %d", block, pos, pos+s.tokens-1, base, s.boundary(pos))
		}
		for l := range st.conv {
			st.dn.CopyRows(s.conv[l], block, st.conv[l], row, 1)
			st.dn.CopyRows(s.rec[l], block, st.rec[l], row, 1)
		}
	}
	s.m.backend.CopyKV(s.kv, block*s.tokens, s.m.kv, base+pos, s.tokens)
	return nil
}

// Saveable reports whether Save can copy positions pos … pos+Tokens()−1 of the session at base:
// always, unless the model keeps its sliding layers in rings and the session's ring no longer
// holds them, or it is a hybrid model and the session no longer holds the DeltaNet states after
// the block's second-to-last position. It implements promptcache.WindowedStore.
func (s *BlockStore) Saveable(base, pos int) bool {
	if s.m.states != nil {
		if _, ok := s.m.states.boundaryRow(base, s.boundary(pos)); !ok {
			return false
		}
	}
	if s.m.rings == nil {
		return true
	}
	_, ok := s.m.rings.saveable(base, pos, s.tokens)
	return ok
}

// Restore copies block into positions pos … pos+Tokens()−1 of the session whose slots start at
// base, in every layer; the next forward sees them.
func (s *BlockStore) Restore(base, pos, block int) error {
	if err := s.check("restore", block, base, pos); err != nil {
		return err
	}
	if s.ringKV != nil {
		if err := s.m.rings.restore(s.m.backend, base, pos, s.ringKV, block*s.tokens, s.tokens); err != nil {
			return err
		}
	}
	if s.m.states != nil {
		if err := s.m.states.restore(base, s.boundary(pos), s.conv, s.rec, block); err != nil {
			return err
		}
	}
	s.m.backend.CopyKV(s.m.kv, base+pos, s.kv, block*s.tokens, s.tokens)
	return nil
}

// check checks a Save's or Restore's block and positions.
func (s *BlockStore) check(op string, block, base, pos int) error {
	if err := s.checkBlock(op, block); err != nil {
		return err
	}
	if base < 0 || pos < 0 || base+pos+s.tokens > s.m.slots {
		return fmt.Errorf("engine: %s block %d at positions %d…%d of the session at slot %d: slots %d…%d are outside the KV pool of %d",
			op, block, pos, pos+s.tokens-1, base, base+pos, base+pos+s.tokens-1, s.m.slots)
	}
	return nil
}

// checkBlock checks that the store is open and holds block.
func (s *BlockStore) checkBlock(op string, block int) error {
	if s.closed {
		return errClosed
	}
	if block < 0 || block >= s.blocks {
		return fmt.Errorf("engine: %s block %d of a block store of %d blocks", op, block, s.blocks)
	}
	return nil
}

// Read waits for the work enqueued so far and copies block into dst, which must be BlockBytes
// long.
func (s *BlockStore) Read(block int, dst []byte) error {
	if err := s.checkBlock("read", block); err != nil {
		return err
	}
	if len(dst) != s.BlockBytes() {
		return fmt.Errorf("engine: read block %d into %d bytes: a block is %d", block, len(dst), s.BlockBytes())
	}
	full := s.spec(s.tokens).Bytes()
	if err := s.m.backend.ReadKV(s.kv, block*s.tokens, s.tokens, dst[:full]); err != nil {
		return fmt.Errorf("engine: read block %d: %w", block, err)
	}
	ring := s.ringSpec(s.tokens).Bytes()
	if s.ringKV != nil {
		if err := s.m.backend.ReadKV(s.ringKV, block*s.tokens, s.tokens, dst[full:full+ring]); err != nil {
			return fmt.Errorf("engine: read block %d: %w", block, err)
		}
	}
	if s.m.states != nil {
		if err := s.readStates(block, dst[full+ring:]); err != nil {
			return fmt.Errorf("engine: read block %d: %w", block, err)
		}
	}
	return nil
}

// readStates copies block's states part into dst through the staging rows.
func (s *BlockStore) readStates(block int, dst []byte) error {
	dn := s.m.states.dn
	for l := range s.conv {
		for _, t := range [][2]compute.Tensor{{s.convStage[l], s.conv[l]}, {s.recStage[l], s.rec[l]}} {
			dn.CopyRows(t[0], 0, t[1], block, 1)
			row := make([]float32, t[0].Shape()[1])
			if err := s.m.backend.ReadFloat32(t[0], row); err != nil {
				return err
			}
			for i, f := range row {
				binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(f))
			}
			dst = dst[4*len(row):]
		}
	}
	return nil
}

// writeStates copies src, as readStates wrote it, into block's states part: each row uploaded,
// copied, and freed once the copy is done with it.
func (s *BlockStore) writeStates(block int, src []byte) error {
	dn := s.m.states.dn
	for l := range s.conv {
		for _, t := range []compute.Tensor{s.conv[l], s.rec[l]} {
			n := 4 * t.Shape()[1]
			row, err := s.m.backend.Upload(compute.F32, []int{1, n / 4}, src[:n])
			if err != nil {
				return err
			}
			dn.CopyRows(t, block, row, 0, 1)
			s.m.backend.Free(row)
			src = src[n:]
		}
	}
	return nil
}

// Write copies src, as Read wrote it, into block. src may be reused when Write returns.
func (s *BlockStore) Write(block int, src []byte) error {
	if err := s.checkBlock("write", block); err != nil {
		return err
	}
	if len(src) != s.BlockBytes() {
		return fmt.Errorf("engine: write %d bytes into block %d: a block is %d", len(src), block, s.BlockBytes())
	}
	full := s.spec(s.tokens).Bytes()
	ring := s.ringSpec(s.tokens).Bytes()
	s.m.backend.WriteKV(s.kv, block*s.tokens, src[:full])
	if s.ringKV != nil {
		s.m.backend.WriteKV(s.ringKV, block*s.tokens, src[full:full+ring])
	}
	if s.m.states != nil {
		if err := s.writeStates(block, src[full+ring:]); err != nil {
			return fmt.Errorf("engine: write block %d: %w", block, err)
		}
	}
	return nil
}

// Resize makes the store hold blocks blocks: block i of the resized store holds what block keep[i]
// held (len(keep) ≤ blocks), the rest are zero. It places a new pool, copies the kept blocks into
// it (runs of consecutive blocks in one copy) and frees the old one, so for a moment both are
// held; resizing to 0 frees the pool and leaves an empty store. On an error the store is as it
// was.
func (s *BlockStore) Resize(blocks int, keep []int) error {
	if s.closed {
		return errClosed
	}
	if blocks < 0 {
		return fmt.Errorf("engine: resize a block store to %d blocks", blocks)
	}
	if len(keep) > blocks {
		return fmt.Errorf("engine: resize a block store to %d blocks: the %d blocks to keep do not fit", blocks, len(keep))
	}
	for i, k := range keep {
		if k < 0 || k >= s.blocks {
			return fmt.Errorf("engine: resize a block store: keep[%d] is block %d of %d", i, k, s.blocks)
		}
	}
	kv, err := s.newPool(s.spec(blocks * s.tokens))
	if err != nil {
		return err
	}
	var ringKV compute.KV
	if s.m.rings != nil {
		if ringKV, err = s.newPool(s.ringSpec(blocks * s.tokens)); err != nil {
			if kv != nil {
				s.m.backend.FreeKV(kv)
			}
			return err
		}
	}
	conv, rec, err := s.newStates(blocks)
	if err != nil {
		s.freePools(kv, ringKV)
		return err
	}
	for i := 0; i < len(keep); {
		run := 1
		for i+run < len(keep) && keep[i+run] == keep[i]+run {
			run++
		}
		s.m.backend.CopyKV(kv, i*s.tokens, s.kv, keep[i]*s.tokens, run*s.tokens)
		if ringKV != nil {
			s.m.backend.CopyKV(ringKV, i*s.tokens, s.ringKV, keep[i]*s.tokens, run*s.tokens)
		}
		for l := range conv {
			s.m.states.dn.CopyRows(conv[l], i, s.conv[l], keep[i], run)
			s.m.states.dn.CopyRows(rec[l], i, s.rec[l], keep[i], run)
		}
		i += run
	}
	s.free()
	s.kv, s.ringKV, s.conv, s.rec, s.blocks = kv, ringKV, conv, rec, blocks
	return nil
}

// newStates places a hybrid model's states part for blocks blocks: none for a model without
// DeltaNet layers, or for no blocks.
func (s *BlockStore) newStates(blocks int) (conv, rec []compute.Tensor, err error) {
	st := s.m.states
	if st == nil || blocks == 0 {
		return nil, nil, nil
	}
	for l := range st.conv {
		for _, t := range []struct {
			dst *[]compute.Tensor
			row int
		}{{&conv, st.conv[l].Shape()[1]}, {&rec, st.rec[l].Shape()[1]}} {
			x, err := s.m.backend.Alloc(compute.F32, blocks, t.row)
			if err != nil {
				for _, y := range append(conv, rec...) {
					s.m.backend.Free(y)
				}
				return nil, nil, fmt.Errorf("engine: the DeltaNet states of a block store of %d blocks: %w", blocks, err)
			}
			*t.dst = append(*t.dst, x)
		}
	}
	return conv, rec, nil
}

// freePools frees pools placed for a resize that failed.
func (s *BlockStore) freePools(kvs ...compute.KV) {
	for _, kv := range kvs {
		if kv != nil {
			s.m.backend.FreeKV(kv)
		}
	}
}

// newPool places one of the store's pools, or none for a spec of no slots.
func (s *BlockStore) newPool(spec compute.KVSpec) (compute.KV, error) {
	if spec.Slots == 0 {
		return nil, nil
	}
	kv, err := s.m.backend.NewKV(spec)
	if err != nil {
		return nil, fmt.Errorf("engine: a block store of %d blocks of %d tokens (%.2f GiB): %w",
			spec.Slots/s.tokens, s.tokens, float64(spec.Bytes())/(1<<30), err)
	}
	return kv, nil
}

// free frees the store's pools.
func (s *BlockStore) free() {
	s.freePools(s.kv, s.ringKV)
	for _, t := range append(s.conv, s.rec...) {
		s.m.backend.Free(t)
	}
	s.kv, s.ringKV, s.conv, s.rec = nil, nil, nil, nil
}

// Close frees the store's memory. Save, Restore, Read, Write and Resize return an error
// afterwards, and Blocks 0; Close again does nothing.
func (s *BlockStore) Close() {
	if s.closed {
		return
	}
	s.free()
	for _, t := range append(s.convStage, s.recStage...) {
		s.m.backend.Free(t)
	}
	s.convStage, s.recStage = nil, nil
	s.blocks, s.closed = 0, true
	delete(s.m.stores, s)
}
