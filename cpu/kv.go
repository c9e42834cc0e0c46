package cpu

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"tfd/compute"
)

// The moves of whole KV slots: between pools and within one (CopyKV), and to and from the host in
// the layout every backend shares (ReadKV, WriteKV). Bits move unchanged.

// CopyKV copies n slots of src from srcSlot to dst from dstSlot in every layer, bits unchanged;
// within one pool the ranges may overlap. Ranges outside either pool are reported by the next
// Sync and nothing is copied.
func (b *backend) CopyKV(dst compute.KV, dstSlot int, src compute.KV, srcSlot, n int) {
	d, s := asKV(dst, "CopyKV", 0), asKV(src, "CopyKV", 0)
	sameSlots(d, s)
	if n <= 0 {
		return
	}
	if dstSlot < 0 || srcSlot < 0 || dstSlot+n > d.spec.Slots || srcSlot+n > s.spec.Slots {
		b.fail("CopyKV: %d slots from %d (of %d) to %d (of %d) do not fit the pools", n, srcSlot, s.spec.Slots, dstSlot, d.spec.Slots)
		return
	}
	st := d.stride()
	t := &b.ckv
	*t = copyKVTask{dst: d, src: s, dstAt: dstSlot * st, srcAt: srcSlot * st, n: n * st}
	b.run(t, 2*d.spec.Layers, 1, parFor(2*d.spec.Layers*n*st/8))
	*t = copyKVTask{}
}

// sameSlots panics unless pools d and s hold slots of one shape and dtype.
func sameSlots(d, s *kvPool) {
	if d.spec.Layers != s.spec.Layers || d.spec.KVHeads != s.spec.KVHeads || d.spec.HeadDim != s.spec.HeadDim || d.half() != s.half() {
		panic(fmt.Sprintf("cpu: CopyKV between pools of %d layers × %d×%d %v and %d layers × %d×%d %v",
			s.spec.Layers, s.spec.KVHeads, s.spec.HeadDim, s.spec.Elem(), d.spec.Layers, d.spec.KVHeads, d.spec.HeadDim, d.spec.Elem()))
	}
}

// copyKVTask copies one range of elements; item 2l is layer l's keys, 2l+1 its values. copy
// moves overlapping ranges of one slice correctly.
type copyKVTask struct {
	dst, src        *kvPool
	dstAt, srcAt, n int
}

func (t *copyKVTask) run(_ *scratch, lo, hi int) {
	for i := lo; i < hi; i++ {
		l, values := i/2, i%2 == 1
		if t.dst.half() {
			d, s := t.dst.kh[l], t.src.kh[l]
			if values {
				d, s = t.dst.vh[l], t.src.vh[l]
			}
			copy(d[t.dstAt:t.dstAt+t.n], s[t.srcAt:t.srcAt+t.n])
			continue
		}
		d, s := t.dst.k[l], t.src.k[l]
		if values {
			d, s = t.dst.v[l], t.src.v[l]
		}
		copy(d[t.dstAt:t.dstAt+t.n], s[t.srcAt:t.srcAt+t.n])
	}
}

// ReadKV copies n slots from slot on into dst: per layer the keys, then the values, in the pool's
// dtype, little-endian. It reports a range outside the pool, and what Sync would.
func (b *backend) ReadKV(kv compute.KV, slot, n int, dst []byte) error {
	p := asKV(kv, "ReadKV", 0)
	spec := p.spec
	spec.Slots = n
	if n < 0 || int64(len(dst)) != spec.Bytes() {
		panic(fmt.Sprintf("cpu: ReadKV of %d slots into %d bytes; they take %d", n, len(dst), spec.Bytes()))
	}
	if slot < 0 || slot+n > p.spec.Slots {
		return errors.Join(fmt.Errorf("cpu: ReadKV: %d slots from %d do not fit the pool's %d slots", n, slot, p.spec.Slots), b.Sync())
	}
	st := p.stride()
	at := 0
	for l := range p.spec.Layers {
		if p.half() {
			for _, s := range [2][]uint16{p.kh[l], p.vh[l]} {
				for _, h := range s[slot*st : (slot+n)*st] {
					binary.LittleEndian.PutUint16(dst[at:], h)
					at += 2
				}
			}
			continue
		}
		for _, s := range [2][]float32{p.k[l], p.v[l]} {
			for _, f := range s[slot*st : (slot+n)*st] {
				binary.LittleEndian.PutUint32(dst[at:], math.Float32bits(f))
				at += 4
			}
		}
	}
	return b.Sync()
}

// WriteKV copies src, as ReadKV lays it out, into the slots from slot on. A range outside the
// pool is reported by the next Sync and nothing is written.
func (b *backend) WriteKV(kv compute.KV, slot int, src []byte) {
	p := asKV(kv, "WriteKV", 0)
	st := p.stride()
	per := 2 * p.spec.Layers * st * p.spec.Elem().Size() // bytes of one slot in every layer
	if len(src)%per != 0 {
		panic(fmt.Sprintf("cpu: WriteKV of %d bytes: not a whole number of %d-byte slots", len(src), per))
	}
	n := len(src) / per
	if slot < 0 || slot+n > p.spec.Slots {
		b.fail("WriteKV: %d slots from %d do not fit the pool's %d slots", n, slot, p.spec.Slots)
		return
	}
	at := 0
	for l := range p.spec.Layers {
		if p.half() {
			for _, s := range [2][]uint16{p.kh[l], p.vh[l]} {
				d := s[slot*st : (slot+n)*st]
				for i := range d {
					d[i] = binary.LittleEndian.Uint16(src[at:])
					at += 2
				}
			}
			continue
		}
		for _, s := range [2][]float32{p.k[l], p.v[l]} {
			d := s[slot*st : (slot+n)*st]
			for i := range d {
				d[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[at:]))
				at += 4
			}
		}
	}
}
