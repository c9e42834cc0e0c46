//go:build amd64 || arm64

package cuda

import (
	"errors"
	"fmt"
	"unsafe"

	"tfd/compute"
)

// The moves of whole KV slots: device copies between pools and within one (CopyKV), and copies to
// and from the host in the layout every backend shares (ReadKV, WriteKV), all recorded on the
// stream in order with the kernels. A layer's keys (and its values) for a range of slots are one
// contiguous span of its pool, so each move is one copy per layer and half.

// CopyKV copies n slots of src from srcSlot to dst from dstSlot in every layer, bits unchanged;
// within one pool the ranges may overlap. Ranges outside either pool are reported by the next
// Sync and nothing is copied.
func (b *backend) CopyKV(dst compute.KV, dstSlot int, src compute.KV, srcSlot, n int) {
	d, s := b.asKV(dst, "CopyKV", 0), b.asKV(src, "CopyKV", 0)
	if d.spec.Layers != s.spec.Layers || d.spec.KVHeads != s.spec.KVHeads || d.spec.HeadDim != s.spec.HeadDim || d.spec.Elem() != s.spec.Elem() {
		panic(fmt.Sprintf("cuda: CopyKV between pools of %d layers × %d×%d %v and %d layers × %d×%d %v",
			s.spec.Layers, s.spec.KVHeads, s.spec.HeadDim, s.spec.Elem(), d.spec.Layers, d.spec.KVHeads, d.spec.HeadDim, d.spec.Elem()))
	}
	if n <= 0 || (d == s && dstSlot == srcSlot) {
		return
	}
	if dstSlot < 0 || srcSlot < 0 || dstSlot+n > d.spec.Slots || srcSlot+n > s.spec.Slots {
		if b.pending == nil {
			b.pending = fmt.Errorf("cuda: CopyKV: %d slots from %d (of %d) to %d (of %d) do not fit the pools",
				n, srcSlot, s.spec.Slots, dstSlot, d.spec.Slots)
		}
		return
	}
	// Overlapping ranges of one pool go in pieces no longer than the distance between them, in
	// the direction that reads each source slot before it is overwritten: each piece is a copy
	// of disjoint memory, which is all cuMemcpyDtoDAsync promises. Two pools never overlap.
	piece := n
	if d == s {
		piece = min(n, max(dstSlot-srcSlot, srcSlot-dstSlot))
	}
	slot := devPtr(d.slotBytes())
	for l := range d.spec.Layers {
		dk, dv := d.layer(l)
		sk, sv := s.layer(l)
		for _, half := range [2][2]devPtr{{dk, sk}, {dv, sv}} {
			for done := 0; done < n; done += piece {
				m := min(piece, n-done)
				off := done
				if d == s && dstSlot > srcSlot {
					off = n - done - m // from the end backwards
				}
				c := b.record()
				*c = command{kind: cmdDtoD, args: [maxArgs]uint64{
					uint64(half[0] + devPtr(dstSlot+off)*slot), uint64(half[1] + devPtr(srcSlot+off)*slot), uint64(devPtr(m) * slot)}}
			}
		}
	}
}

// ReadKV waits for the recorded work and copies n slots from slot on into dst: per layer the
// keys, then the values, little-endian in the pool's dtype (the device's own layout of each half). The halves
// go through the pinned stage, as many at a time as it holds.
func (b *backend) ReadKV(kv compute.KV, slot, n int, dst []byte) error {
	p := b.asKV(kv, "ReadKV", 0)
	spec := p.spec
	spec.Slots = n
	if n < 0 || int64(len(dst)) != spec.Bytes() {
		panic(fmt.Sprintf("cuda: ReadKV of %d slots into %d bytes; they take %d", n, len(dst), spec.Bytes()))
	}
	if slot < 0 || slot+n > p.spec.Slots {
		return errors.Join(fmt.Errorf("cuda: ReadKV: %d slots from %d do not fit the pool's %d slots", n, slot, p.spec.Slots), b.Sync())
	}
	if n == 0 {
		return b.Sync()
	}
	half := n * p.slotBytes() // bytes of one layer's keys or values
	if half > len(b.stage) {
		b.replaceHost(&b.stage, half)
	}
	perSync := len(b.stage) / half
	var err error
	for first := 0; first < 2*p.spec.Layers; first += perSync {
		last := min(first+perSync, 2*p.spec.Layers)
		for i := first; i < last; i++ {
			src := p.half(i) + devPtr(slot*p.slotBytes())
			c := b.record()
			*c = command{kind: cmdDtoH, args: [maxArgs]uint64{uint64(uintptr(unsafe.Pointer(&b.stage[(i-first)*half]))), uint64(src), uint64(half)}}
		}
		if serr := b.Sync(); err == nil {
			err = serr
		}
		copy(dst[first*half:last*half], b.stage)
	}
	return err
}

// WriteKV copies src into the pinned arena now, one layer's keys or values at a time, and
// records their copies into the slots from slot on. A range outside the pool is reported by the
// next Sync and nothing is written.
func (b *backend) WriteKV(kv compute.KV, slot int, src []byte) {
	p := b.asKV(kv, "WriteKV", 0)
	half := p.slotBytes()
	if len(src)%(2*p.spec.Layers*half) != 0 {
		panic(fmt.Sprintf("cuda: WriteKV of %d bytes: not a whole number of %d-byte slots", len(src), 2*p.spec.Layers*half))
	}
	n := len(src) / (2 * p.spec.Layers * half)
	if slot < 0 || slot+n > p.spec.Slots {
		if b.pending == nil {
			b.pending = fmt.Errorf("cuda: WriteKV: %d slots from %d do not fit the pool's %d slots", n, slot, p.spec.Slots)
		}
		return
	}
	if n == 0 {
		return
	}
	half *= n
	for i := range 2 * p.spec.Layers {
		b.writeHost(p.half(i)+devPtr(slot*p.slotBytes()), src[i*half:(i+1)*half])
	}
}
