//go:build darwin && arm64

package metal

import (
	"errors"
	"fmt"
	"unsafe"

	"tfd/compute"
)

// The moves of whole KV slots: blit copies between pools and within one (CopyKV), encoded in
// order with the kernels, and copies to and from the host in the layout every backend shares
// (ReadKV, WriteKV) through the CPU, which shares the pools' memory (shared storage). A layer's
// buffer holds its keys, then its values, each [slots, kvHeads, headDim] of the pool's dtype:
// ReadKV's layout per layer, for a range of slots.

// CopyKV copies n slots of src from srcSlot to dst from dstSlot in every layer, bits unchanged;
// within one pool the ranges may overlap. Ranges outside either pool are reported by the next
// Sync and nothing is copied. The copies are blit commands in the open command buffer, after the
// work encoded before them.
func (b *backend) CopyKV(dst compute.KV, dstSlot int, src compute.KV, srcSlot, n int) {
	d, s := b.asKV(dst, "CopyKV", 0), b.asKV(src, "CopyKV", 0)
	if d.spec.Layers != s.spec.Layers || d.spec.KVHeads != s.spec.KVHeads || d.spec.HeadDim != s.spec.HeadDim || d.spec.Elem() != s.spec.Elem() {
		panic(fmt.Sprintf("metal: CopyKV between pools of %d layers × %d×%d %v and %d layers × %d×%d %v",
			s.spec.Layers, s.spec.KVHeads, s.spec.HeadDim, s.spec.Elem(), d.spec.Layers, d.spec.KVHeads, d.spec.HeadDim, d.spec.Elem()))
	}
	if n <= 0 || (d == s && dstSlot == srcSlot) {
		return
	}
	if dstSlot < 0 || srcSlot < 0 || dstSlot+n > d.spec.Slots || srcSlot+n > s.spec.Slots {
		if b.pending == nil {
			b.pending = fmt.Errorf("metal: CopyKV: %d slots from %d (of %d) to %d (of %d) do not fit the pools",
				n, srcSlot, s.spec.Slots, dstSlot, d.spec.Slots)
		}
		return
	}
	// A blit copy's ranges must not overlap, so overlapping moves within one pool go in pieces
	// no longer than the distance between them, in the direction that reads each source slot
	// before it is overwritten; each piece is a pass of its own, and Metal's hazard tracking
	// (the buffers are tracked) finishes a pass's reads and writes before the next pass writes.
	// Two pools never overlap: one pass.
	piece := n
	if d == s {
		piece = min(n, max(dstSlot-srcSlot, srcSlot-dstSlot))
	}
	slot := uint64(d.slotBytes())
	cmd := b.commandBuffer()
	b.endCompute()
	pl := pushPool()
	defer pl.pop()
	for done := 0; done < n; done += piece {
		m := min(piece, n-done)
		off := done
		if d == s && dstSlot > srcSlot {
			off = n - done - m // from the end backwards
		}
		e := cmd.blitCommandEncoder()
		if e.id == 0 {
			panic("metal: the command buffer gave no blit encoder")
		}
		for l := range d.layers {
			for _, half := range [2][2]uint64{{0, 0}, {d.values(), s.values()}} {
				e.copyFromBuffer(s.layers[l].mtl, half[1]+uint64(srcSlot+off)*slot,
					d.layers[l].mtl, half[0]+uint64(dstSlot+off)*slot, uint64(m)*slot)
			}
		}
		e.endEncoding()
	}
}

// ReadKV commits and waits for the work encoded so far and copies n slots from slot on into
// dst, from the pool's shared memory: per layer the keys, then the values.
func (b *backend) ReadKV(kv compute.KV, slot, n int, dst []byte) error {
	p := b.asKV(kv, "ReadKV", 0)
	spec := p.spec
	spec.Slots = n
	if n < 0 || int64(len(dst)) != spec.Bytes() {
		panic(fmt.Sprintf("metal: ReadKV of %d slots into %d bytes; they take %d", n, len(dst), spec.Bytes()))
	}
	if slot < 0 || slot+n > p.spec.Slots {
		return errors.Join(fmt.Errorf("metal: ReadKV: %d slots from %d do not fit the pool's %d slots", n, slot, p.spec.Slots), b.Sync())
	}
	err := b.Sync()
	if n == 0 {
		return err
	}
	half := n * p.slotBytes()
	for i := range 2 * p.spec.Layers {
		copy(dst[i*half:(i+1)*half], p.hostHalf(i, slot, n))
	}
	return err
}

// WriteKV copies src into the slots from slot on through the CPU. Work already encoded may read
// or write those slots, so if there is any it is committed and waited for first (as WriteInt32
// does); an error it meets is kept for the next Sync. A range outside the pool is reported by
// the next Sync and nothing is written.
func (b *backend) WriteKV(kv compute.KV, slot int, src []byte) {
	p := b.asKV(kv, "WriteKV", 0)
	per := 2 * p.spec.Layers * p.slotBytes() // bytes of one slot in every layer
	if len(src)%per != 0 {
		panic(fmt.Sprintf("metal: WriteKV of %d bytes: not a whole number of %d-byte slots", len(src), per))
	}
	n := len(src) / per
	if slot < 0 || slot+n > p.spec.Slots {
		if b.pending == nil {
			b.pending = fmt.Errorf("metal: WriteKV: %d slots from %d do not fit the pool's %d slots", n, slot, p.spec.Slots)
		}
		return
	}
	if n == 0 {
		return
	}
	if b.cmd.id != 0 {
		if err := b.flush(); err != nil && b.pending == nil {
			b.pending = err
		}
	}
	half := n * p.slotBytes()
	for i := range 2 * p.spec.Layers {
		copy(p.hostHalf(i, slot, n), src[i*half:(i+1)*half])
	}
}

// hostHalf views, at the CPU address of the pool's memory, n slots from slot of half i: layer
// i/2's keys for even i, its values for odd.
func (kv *kvPool) hostHalf(i, slot, n int) []byte {
	at := uint64(slot) * uint64(kv.slotBytes())
	if i%2 == 1 {
		at += kv.values()
	}
	return unsafe.Slice((*byte)(unsafe.Add(kv.layers[i/2].host, at)), n*kv.slotBytes())
}
