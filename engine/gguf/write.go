package gguf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
)

// Writer builds a GGUF file (version 3): metadata pairs and tensors in the order they are added,
// laid out as llama.cpp's writer lays them out (the data section aligned, each tensor's data
// padded to the alignment). It holds the tensors' data until WriteTo, without copying it.
//
// Set and AddTensor record the first misuse (a repeated key or name, data of the wrong size …)
// and do nothing after it; WriteTo returns that error, as bufio.Writer keeps its first error.
type Writer struct {
	kv        []KV
	keys      map[string]bool
	tensors   []Tensor // Offset set as added
	dataSize  int64
	alignment int
	err       error
}

// NewWriter returns an empty Writer with the default alignment.
func NewWriter() *Writer {
	return &Writer{keys: map[string]bool{}, alignment: DefaultAlignment}
}

// Err returns the first misuse recorded, if any.
func (w *Writer) Err() error { return w.err }

func (w *Writer) fail(format string, args ...any) {
	if w.err == nil {
		w.err = fmt.Errorf("gguf: "+format, args...)
	}
}

// Set adds a metadata pair. general.alignment sets the alignment; it must be a u32 power of two
// and come before any tensor.
func (w *Writer) Set(key string, v Value) {
	switch {
	case w.err != nil:
		return
	case key == "":
		w.fail("a metadata key is empty")
		return
	case w.keys[key]:
		w.fail("metadata key %q is set twice", key)
		return
	case v.v == nil:
		w.fail("metadata %q has no value", key)
		return
	}
	if key == AlignmentKey {
		a, ok := v.v.(uint32)
		if !ok || a == 0 || bits.OnesCount32(a) != 1 || len(w.tensors) > 0 {
			w.fail("%s must be a u32 power of two set before any tensor, got %s %v", key, v.Describe(), v.v)
			return
		}
		w.alignment = int(a)
	}
	w.keys[key] = true
	w.kv = append(w.kv, KV{Key: key, Value: v})
}

// AddTensor adds a tensor of type typ and shape (outermost first, as PyTorch lists it; the file
// stores it innermost first). data must hold exactly the tensor's bytes; the Writer keeps it
// until WriteTo, so the caller must not change it before then.
func (w *Writer) AddTensor(name string, typ Type, shape []int, data []byte) {
	if w.err != nil {
		return
	}
	t := Tensor{Name: name, Type: typ, Dims: make([]int64, len(shape)), Offset: w.dataSize, Data: data}
	for i, d := range shape {
		if d < 0 {
			w.fail("tensor %q has shape %v", name, shape)
			return
		}
		t.Dims[len(shape)-1-i] = int64(d)
	}
	switch {
	case name == "":
		w.fail("a tensor name is empty")
	case w.hasTensor(name):
		w.fail("tensor %q is added twice", name)
	case !typ.Known():
		w.fail("tensor %q has %s, which ggml does not define", name, typ)
	case len(shape) > maxDims:
		w.fail("tensor %q has %d dimensions; GGUF allows at most %d", name, len(shape), maxDims)
	case len(shape) > 0 && t.Dims[0]%int64(typ.BlockSize()) != 0:
		w.fail("tensor %q: rows of %d elements are not whole %s blocks of %d", name, t.Dims[0], typ, typ.BlockSize())
	case int64(len(data)) != typ.RowBytes(t.Elements()):
		w.fail("tensor %q of %s %v needs %d bytes, got %d", name, typ, shape, typ.RowBytes(t.Elements()), len(data))
	}
	if w.err != nil {
		return
	}
	w.tensors = append(w.tensors, t)
	w.dataSize += pad(int64(len(data)), int64(w.alignment))
}

func (w *Writer) hasTensor(name string) bool {
	for _, t := range w.tensors {
		if t.Name == name {
			return true
		}
	}
	return false
}

// pad rounds n up to a multiple of align.
func pad(n, align int64) int64 { return (n + align - 1) / align * align }

// WriteTo writes the file to out and returns the bytes written, or the first misuse recorded.
func (w *Writer) WriteTo(out io.Writer) (int64, error) {
	if w.err != nil {
		return 0, w.err
	}
	head := append([]byte(nil), magic[:]...)
	head = binary.LittleEndian.AppendUint32(head, 3)
	head = binary.LittleEndian.AppendUint64(head, uint64(len(w.tensors)))
	head = binary.LittleEndian.AppendUint64(head, uint64(len(w.kv)))
	for _, kv := range w.kv {
		head = appendString(head, kv.Key)
		var err error
		if head, err = appendValue(head, kv.Value, true); err != nil {
			return 0, fmt.Errorf("gguf: metadata %q: %w", kv.Key, err)
		}
	}
	for _, t := range w.tensors {
		head = appendString(head, t.Name)
		head = binary.LittleEndian.AppendUint32(head, uint32(len(t.Dims)))
		for _, d := range t.Dims {
			head = binary.LittleEndian.AppendUint64(head, uint64(d))
		}
		head = binary.LittleEndian.AppendUint32(head, uint32(t.Type))
		head = binary.LittleEndian.AppendUint64(head, uint64(t.Offset))
	}
	if len(w.tensors) > 0 {
		head = append(head, make([]byte, pad(int64(len(head)), int64(w.alignment))-int64(len(head)))...)
	}
	n, err := out.Write(head)
	written := int64(n)
	zeros := make([]byte, w.alignment)
	for _, t := range w.tensors {
		if err != nil {
			break
		}
		n, err = out.Write(t.Data)
		written += int64(n)
		if err == nil {
			n, err = out.Write(zeros[:pad(int64(len(t.Data)), int64(w.alignment))-int64(len(t.Data))])
			written += int64(n)
		}
	}
	if err != nil {
		return written, fmt.Errorf("gguf: writing: %w", err)
	}
	return written, nil
}

func appendString(b []byte, s string) []byte {
	b = binary.LittleEndian.AppendUint64(b, uint64(len(s)))
	return append(b, s...)
}

// appendValue encodes v, with its type first when typed (an array's elements go untyped).
func appendValue(b []byte, v Value, typed bool) ([]byte, error) {
	if typed {
		b = binary.LittleEndian.AppendUint32(b, uint32(v.typ))
	}
	le := binary.LittleEndian
	switch x := v.v.(type) {
	case uint8:
		return append(b, x), nil
	case int8:
		return append(b, byte(x)), nil
	case bool:
		return append(b, boolByte(x)), nil
	case uint16:
		return le.AppendUint16(b, x), nil
	case int16:
		return le.AppendUint16(b, uint16(x)), nil
	case uint32:
		return le.AppendUint32(b, x), nil
	case int32:
		return le.AppendUint32(b, uint32(x)), nil
	case float32:
		return le.AppendUint32(b, math.Float32bits(x)), nil
	case uint64:
		return le.AppendUint64(b, x), nil
	case int64:
		return le.AppendUint64(b, uint64(x)), nil
	case float64:
		return le.AppendUint64(b, math.Float64bits(x)), nil
	case string:
		return appendString(b, x), nil
	}
	if v.typ != TypeArray {
		return nil, errors.New("not a GGUF value")
	}
	b = le.AppendUint32(b, uint32(v.elem))
	b = le.AppendUint64(b, uint64(v.Len()))
	switch x := v.v.(type) {
	case []uint8:
		return append(b, x...), nil
	case []int8:
		return appendEach(b, x, func(b []byte, e int8) []byte { return append(b, byte(e)) }), nil
	case []bool:
		return appendEach(b, x, func(b []byte, e bool) []byte { return append(b, boolByte(e)) }), nil
	case []uint16:
		return appendEach(b, x, le.AppendUint16), nil
	case []int16:
		return appendEach(b, x, func(b []byte, e int16) []byte { return le.AppendUint16(b, uint16(e)) }), nil
	case []uint32:
		return appendEach(b, x, le.AppendUint32), nil
	case []int32:
		return appendEach(b, x, func(b []byte, e int32) []byte { return le.AppendUint32(b, uint32(e)) }), nil
	case []float32:
		return appendEach(b, x, func(b []byte, e float32) []byte { return le.AppendUint32(b, math.Float32bits(e)) }), nil
	case []uint64:
		return appendEach(b, x, le.AppendUint64), nil
	case []int64:
		return appendEach(b, x, func(b []byte, e int64) []byte { return le.AppendUint64(b, uint64(e)) }), nil
	case []float64:
		return appendEach(b, x, func(b []byte, e float64) []byte { return le.AppendUint64(b, math.Float64bits(e)) }), nil
	case []string:
		return appendEach(b, x, appendString), nil
	case []Value:
		for _, e := range x {
			var err error
			if b, err = appendValue(b, e, false); err != nil {
				return nil, err
			}
		}
		return b, nil
	}
	return nil, errors.New("not a GGUF array")
}

func appendEach[T any](b []byte, s []T, add func([]byte, T) []byte) []byte {
	for _, e := range s {
		b = add(b, e)
	}
	return b
}

func boolByte(x bool) byte {
	if x {
		return 1
	}
	return 0
}
