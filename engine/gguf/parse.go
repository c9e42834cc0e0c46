package gguf

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"slices"
)

// The limits of what Parse accepts beyond what the bytes themselves bound.
const (
	// maxDims is ggml's GGML_MAX_DIMS.
	maxDims = 4
	// maxElements keeps a tensor's byte size far below 2⁶³ whatever its type (the largest
	// block is under 2⁹ bytes).
	maxElements = 1 << 53
	// maxNesting bounds arrays of arrays: the format allows them, no model uses more than one
	// level, and a corrupt file must not recurse deeply.
	maxNesting = 4
)

var magic = [4]byte{'G', 'G', 'U', 'F'}

// fix says what a user can do about a corrupt file; every parse error ends with it.
const fix = "the file is corrupt or truncated; re-download or re-convert it"

// decoder reads a file's header front to back, keeping the offset for errors.
type decoder struct {
	name string // the file, for errors
	data []byte
	off  int
}

// errorf reports a problem at offset at.
func (d *decoder) errorf(at int, format string, args ...any) error {
	return fmt.Errorf("gguf: %s: at offset %d: %s: %s", d.name, at, fmt.Sprintf(format, args...), fix)
}

func (d *decoder) left() int { return len(d.data) - d.off }

// take returns the next n bytes, or an error naming what needed them.
func (d *decoder) take(n int, what string) ([]byte, error) {
	if n < 0 || n > d.left() {
		return nil, d.errorf(d.off, "%s needs %d bytes, %d are left", what, n, d.left())
	}
	b := d.data[d.off : d.off+n]
	d.off += n
	return b, nil
}

func (d *decoder) u32(what string) (uint32, error) {
	b, err := d.take(4, what)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

func (d *decoder) u64(what string) (uint64, error) {
	b, err := d.take(8, what)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

// count reads a uint64 count of items each at least minSize bytes long, and refuses one that the
// rest of the file could not hold, so a corrupt count never allocates.
func (d *decoder) count(what string, minSize int) (int, error) {
	at := d.off
	n, err := d.u64(what)
	if err != nil {
		return 0, err
	}
	if n > uint64(d.left()/minSize) {
		return 0, d.errorf(at, "%s is %d, more than the %d bytes left could hold", what, n, d.left())
	}
	return int(n), nil
}

func (d *decoder) str(what string) (string, error) {
	at := d.off
	n, err := d.u64(what + "'s length")
	if err != nil {
		return "", err
	}
	if n > uint64(d.left()) {
		return "", d.errorf(at, "%s is %d bytes long, but %d are left", what, n, d.left())
	}
	b, _ := d.take(int(n), what)
	return string(b), nil
}

// Parse parses a whole GGUF file held in data; its tensors' Data alias data. name identifies the
// file in errors (a path); it is not opened.
func Parse(name string, data []byte) (*File, error) {
	d := &decoder{name: name, data: data}
	f := &File{Alignment: DefaultAlignment, keys: map[string]int{}, tensors: map[string]int{}}
	if err := d.header(f); err != nil {
		return nil, err
	}
	nTensors, err := d.count("the tensor count", 8+4+4+8) // a name's length, dims, type, offset
	if err != nil {
		return nil, err
	}
	nKV, err := d.count("the metadata count", 8+4) // a key's length, a type
	if err != nil {
		return nil, err
	}
	f.KV = make([]KV, 0, nKV)
	for i := range nKV {
		if err := d.kv(f, i); err != nil {
			return nil, err
		}
	}
	if err := d.alignment(f); err != nil {
		return nil, err
	}
	f.Tensors = make([]Tensor, 0, nTensors)
	for i := range nTensors {
		if err := d.tensorInfo(f, i); err != nil {
			return nil, err
		}
	}
	if err := d.placeData(f); err != nil {
		return nil, err
	}
	return f, nil
}

// header reads the magic and the version.
func (d *decoder) header(f *File) error {
	b, err := d.take(4, "the magic \"GGUF\"")
	if err != nil {
		return fmt.Errorf("gguf: %s: %d bytes long, too short to be a GGUF file", d.name, len(d.data))
	}
	if [4]byte(b) != magic {
		return fmt.Errorf("gguf: %s: starts with %q, not \"GGUF\": not a GGUF file", d.name, b)
	}
	at := d.off
	if f.Version, err = d.u32("the version"); err != nil {
		return err
	}
	switch v := f.Version; {
	case v != 0 && v&0xffff == 0:
		return fmt.Errorf("gguf: %s: version reads as %#x: the file is big-endian; tfd reads little-endian GGUF files, convert it again without --bigendian", d.name, v)
	case v == 1:
		return fmt.Errorf("gguf: %s: GGUF version 1 is no longer read (tfd reads versions 2 and 3); convert the model again with a current llama.cpp", d.name)
	case v < 2 || v > 3:
		return d.errorf(at, "version %d is not one tfd reads (2 and 3)", v)
	}
	return nil
}

// kv reads metadata pair i.
func (d *decoder) kv(f *File, i int) error {
	at := d.off
	key, err := d.str(fmt.Sprintf("metadata key %d", i))
	if err != nil {
		return err
	}
	if key == "" {
		return d.errorf(at, "metadata key %d is empty", i)
	}
	if _, dup := f.keys[key]; dup {
		return d.errorf(at, "metadata key %q appears twice", key)
	}
	what := fmt.Sprintf("metadata %q", key)
	typeAt := d.off
	typ, err := d.u32(what + "'s type")
	if err != nil {
		return err
	}
	v, err := d.value(ValueType(typ), typeAt, what, 0)
	if err != nil {
		return err
	}
	f.keys[key] = len(f.KV)
	f.KV = append(f.KV, KV{Key: key, Value: v})
	return nil
}

// value reads a value of type typ (read at typeAt).
func (d *decoder) value(typ ValueType, typeAt int, what string, depth int) (Value, error) {
	switch typ {
	case TypeString:
		s, err := d.str(what)
		return String(s), err
	case TypeArray:
		return d.array(what, depth)
	}
	size := typ.size()
	if size == 0 {
		return Value{}, d.errorf(typeAt, "%s has type %d, which is not a GGUF value type", what, uint32(typ))
	}
	at := d.off
	b, err := d.take(size, what)
	if err != nil {
		return Value{}, err
	}
	switch typ {
	case TypeUint8:
		return Uint8(b[0]), nil
	case TypeInt8:
		return Int8(int8(b[0])), nil
	case TypeBool:
		if b[0] > 1 {
			return Value{}, d.errorf(at, "%s is a bool of value %d, not 0 or 1", what, b[0])
		}
		return Bool(b[0] == 1), nil
	case TypeUint16:
		return Uint16(binary.LittleEndian.Uint16(b)), nil
	case TypeInt16:
		return Int16(int16(binary.LittleEndian.Uint16(b))), nil
	case TypeUint32:
		return Uint32(binary.LittleEndian.Uint32(b)), nil
	case TypeInt32:
		return Int32(int32(binary.LittleEndian.Uint32(b))), nil
	case TypeFloat32:
		return Float32(math.Float32frombits(binary.LittleEndian.Uint32(b))), nil
	case TypeUint64:
		return Uint64(binary.LittleEndian.Uint64(b)), nil
	case TypeInt64:
		return Int64(int64(binary.LittleEndian.Uint64(b))), nil
	default: // TypeFloat64
		return Float64(math.Float64frombits(binary.LittleEndian.Uint64(b))), nil
	}
}

// array reads an array's element type, count and elements.
func (d *decoder) array(what string, depth int) (Value, error) {
	elemAt := d.off
	t, err := d.u32(what + "'s element type")
	if err != nil {
		return Value{}, err
	}
	elem := ValueType(t)
	minSize := elem.size()
	switch elem {
	case TypeString:
		minSize = 8
	case TypeArray:
		if depth+1 >= maxNesting {
			return Value{}, d.errorf(elemAt, "%s nests arrays %d deep; tfd reads at most %d", what, depth+2, maxNesting)
		}
		minSize = 4 + 8
	}
	if minSize == 0 {
		return Value{}, d.errorf(elemAt, "%s is an array of type %d, which is not a GGUF value type", what, t)
	}
	n, err := d.count(what+"'s length", minSize)
	if err != nil {
		return Value{}, err
	}
	v := Value{typ: TypeArray, elem: elem}
	switch elem {
	case TypeString:
		s := make([]string, n)
		for i := range s {
			if s[i], err = d.str(fmt.Sprintf("%s[%d]", what, i)); err != nil {
				return Value{}, err
			}
		}
		v.v = s
	case TypeArray:
		s := make([]Value, n)
		for i := range s {
			if s[i], err = d.array(fmt.Sprintf("%s[%d]", what, i), depth+1); err != nil {
				return Value{}, err
			}
		}
		v.v = s
	default:
		at := d.off
		b, _ := d.take(n*minSize, what) // count checked that the bytes are there
		if v.v, err = fixedArray(elem, b); err != nil {
			return Value{}, d.errorf(at, "%s: %v", what, err)
		}
	}
	return v, nil
}

// fixedArray decodes the little-endian elements of an array of a fixed-size type.
func fixedArray(elem ValueType, b []byte) (any, error) {
	switch elem {
	case TypeUint8:
		return slices.Clone(b), nil
	case TypeInt8:
		return decodeEach(b, 1, func(b []byte) int8 { return int8(b[0]) }), nil
	case TypeBool:
		for i, x := range b {
			if x > 1 {
				return nil, fmt.Errorf("element %d is a bool of value %d, not 0 or 1", i, x)
			}
		}
		return decodeEach(b, 1, func(b []byte) bool { return b[0] == 1 }), nil
	case TypeUint16:
		return decodeEach(b, 2, binary.LittleEndian.Uint16), nil
	case TypeInt16:
		return decodeEach(b, 2, func(b []byte) int16 { return int16(binary.LittleEndian.Uint16(b)) }), nil
	case TypeUint32:
		return decodeEach(b, 4, binary.LittleEndian.Uint32), nil
	case TypeInt32:
		return decodeEach(b, 4, func(b []byte) int32 { return int32(binary.LittleEndian.Uint32(b)) }), nil
	case TypeFloat32:
		return decodeEach(b, 4, func(b []byte) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(b)) }), nil
	case TypeUint64:
		return decodeEach(b, 8, binary.LittleEndian.Uint64), nil
	case TypeInt64:
		return decodeEach(b, 8, func(b []byte) int64 { return int64(binary.LittleEndian.Uint64(b)) }), nil
	default: // TypeFloat64
		return decodeEach(b, 8, func(b []byte) float64 { return math.Float64frombits(binary.LittleEndian.Uint64(b)) }), nil
	}
}

func decodeEach[T any](b []byte, size int, decode func([]byte) T) []T {
	out := make([]T, len(b)/size)
	for i := range out {
		out[i] = decode(b[i*size:])
	}
	return out
}

// alignment reads general.alignment, once the metadata is read.
func (d *decoder) alignment(f *File) error {
	v, ok := f.Lookup(AlignmentKey)
	if !ok {
		return nil
	}
	a, isU32 := v.Any().(uint32)
	switch {
	case !isU32:
		return fmt.Errorf("gguf: %s: %s is %s, must be u32: %s", d.name, AlignmentKey, v.Describe(), fix)
	case a == 0 || bits.OnesCount32(a) != 1:
		return fmt.Errorf("gguf: %s: %s is %d, not a power of two: %s", d.name, AlignmentKey, a, fix)
	}
	f.Alignment = int(a)
	return nil
}

// tensorInfo reads tensor description i.
func (d *decoder) tensorInfo(f *File, i int) error {
	at := d.off
	name, err := d.str(fmt.Sprintf("tensor %d's name", i))
	if err != nil {
		return err
	}
	if name == "" {
		return d.errorf(at, "tensor %d has an empty name", i)
	}
	if _, dup := f.tensors[name]; dup {
		return d.errorf(at, "tensor %q appears twice", name)
	}
	what := fmt.Sprintf("tensor %q", name)
	nAt := d.off
	nDims, err := d.u32(what + "'s dimension count")
	if err != nil {
		return err
	}
	if nDims > maxDims {
		return d.errorf(nAt, "%s has %d dimensions; GGUF allows at most %d", what, nDims, maxDims)
	}
	t := Tensor{Name: name, Dims: make([]int64, nDims)}
	elems := int64(1)
	for j := range t.Dims {
		dAt := d.off
		dim, err := d.u64(fmt.Sprintf("%s's dimension %d", what, j))
		if err != nil {
			return err
		}
		if dim > maxElements || (dim > 0 && elems > maxElements/int64(dim)) {
			return d.errorf(dAt, "%s has dimensions too large to be real (dimension %d is %d)", what, j, dim)
		}
		t.Dims[j] = int64(dim)
		elems *= int64(dim)
	}
	typeAt := d.off
	typ, err := d.u32(what + "'s type")
	if err != nil {
		return err
	}
	t.Type = Type(typ)
	if !t.Type.Known() {
		return d.errorf(typeAt, "%s has ggml type %d, which ggml does not define", what, typ)
	}
	if nDims > 0 && t.Dims[0]%int64(t.Type.BlockSize()) != 0 {
		return d.errorf(typeAt, "%s is %s, whose blocks hold %d elements, but its rows hold %d", what, t.Type, t.Type.BlockSize(), t.Dims[0])
	}
	offAt := d.off
	off, err := d.u64(what + "'s data offset")
	if err != nil {
		return err
	}
	if off%uint64(f.Alignment) != 0 || off > math.MaxInt64 {
		return d.errorf(offAt, "%s's data offset %d is not a multiple of the alignment %d", what, off, f.Alignment)
	}
	t.Offset = int64(off)
	f.tensors[name] = len(f.Tensors)
	f.Tensors = append(f.Tensors, t)
	return nil
}

// placeData finds the data section after the header and points each tensor at its bytes,
// checking that they lie inside the file and do not overlap.
func (d *decoder) placeData(f *File) error {
	start := int64(d.off)
	if len(f.Tensors) > 0 {
		start = (start + int64(f.Alignment) - 1) / int64(f.Alignment) * int64(f.Alignment)
	}
	f.DataOffset = start
	size := int64(len(d.data)) - start
	if size < 0 {
		return fmt.Errorf("gguf: %s: the data section should start at offset %d, past the end of the %d-byte file: %s",
			d.name, start, len(d.data), fix)
	}
	f.header = d.data[:start:start]
	order := make([]int, len(f.Tensors))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(f.Tensors[a].Offset, f.Tensors[b].Offset) })
	end, last := int64(0), -1 // the end of the data of the tensor before, and its index
	for _, i := range order {
		t := &f.Tensors[i]
		n := t.Type.RowBytes(t.Elements())
		if n > 0 && t.Offset < end {
			return fmt.Errorf("gguf: %s: the data of tensors %q [%d, %d) and %q [%d, %d) overlap: %s",
				d.name, f.Tensors[last].Name, f.Tensors[last].Offset, end, t.Name, t.Offset, t.Offset+n, fix)
		}
		if t.Offset > size || n > size-t.Offset {
			return fmt.Errorf("gguf: %s: tensor %q needs bytes [%d, %d) of the data section at offset %d, "+
				"but the file holds %d: %s", d.name, t.Name, t.Offset, t.Offset+n, start, size, fix)
		}
		t.Data = d.data[start+t.Offset : start+t.Offset+n : start+t.Offset+n]
		if n > 0 {
			end, last = t.Offset+n, i
		}
	}
	return nil
}
