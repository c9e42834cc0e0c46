// Package gguf reads and writes GGUF files, the model format of llama.cpp (and of Ollama and LM
// Studio, which run it): a header, metadata as typed key-value pairs, tensor descriptions, and
// the tensors' data, aligned.
//
// The layout, all little-endian (gguf.h in llama.cpp's ggml):
//
//	"GGUF", version uint32 (2 or 3), tensor count uint64, metadata count uint64
//	each metadata pair: key (string), value type uint32, value
//	    (an array: element type uint32, count uint64, the elements)
//	each tensor: name (string), dimension count uint32, dimensions uint64 each (innermost
//	    first), ggml type uint32, offset of its data in the data section uint64
//	padding to the alignment (general.alignment, 32 by default), then the data section
//
// where a string is a uint64 byte length and the bytes, and a bool one byte. Versions 2 and 3
// share this layout (version 1 had 32-bit counts; version 3 added big-endian files, which tfd
// does not read).
//
// Parse checks everything the header claims against the bytes present, so a corrupt or
// truncated file is refused when it is opened, with an error naming the offset and what was
// wrong, never read past or panicked on. Open memory-maps the file: the tensors' Data alias the
// mapping, so opening a large model costs address space, not resident memory, until its weights
// are read.
package gguf

import (
	"fmt"

	"tfd/engine/internal/mmap"
)

// DefaultAlignment is the data alignment of a file without general.alignment.
const DefaultAlignment = 32

// AlignmentKey is the metadata key that sets the alignment of the data section and of every
// tensor's data; it must be a power of two stored as a u32.
const AlignmentKey = "general.alignment"

// File is a parsed GGUF file. Its tensors' Data alias the bytes it was parsed from; for Open, a
// read-only mapping that Close releases. Its methods other than Close are safe for concurrent
// use.
type File struct {
	Version    uint32
	Alignment  int
	DataOffset int64    // where the data section starts
	KV         []KV     // the metadata, in file order
	Tensors    []Tensor // in file order

	keys    map[string]int // index into KV
	tensors map[string]int // index into Tensors
	header  []byte         // the bytes before the data section
	mapping []byte         // the whole file, as Open mapped it; nil from Parse
	unmap   func() error
}

// KV is one metadata pair.
type KV struct {
	Key   string
	Value Value
}

// Tensor is one tensor of a file.
type Tensor struct {
	Name string
	Type Type
	// Dims lists the sizes innermost first, as the file does: a PyTorch [rows, cols] matrix
	// (each row contiguous) has Dims {cols, rows}. Shape gives them outermost first.
	Dims []int64
	// Offset is where its data starts within the data section.
	Offset int64
	// Data is its bytes, aliasing the file: callers must not write to it, nor use it after the
	// File is closed. Rows are contiguous; a quantized type's blocks run along the innermost
	// dimension.
	Data []byte
}

// Shape returns the sizes outermost first, as safetensors and PyTorch list them.
func (t Tensor) Shape() []int {
	shape := make([]int, len(t.Dims))
	for i, d := range t.Dims {
		shape[len(t.Dims)-1-i] = int(d)
	}
	return shape
}

// Elements returns the number of elements (1 for a tensor of no dimensions).
func (t Tensor) Elements() int64 {
	n := int64(1)
	for _, d := range t.Dims {
		n *= d
	}
	return n
}

// Open maps the file at path read-only and parses it. The caller closes the File when done with
// its tensors.
func Open(path string) (*File, error) {
	data, unmap, err := mmap.Map(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	f, err := Parse(path, data)
	if err != nil {
		unmap()
		return nil, err
	}
	f.mapping, f.unmap = data, unmap
	return f, nil
}

// Release drops the pages of b, a tensor's Data or part of it, from the process's resident memory
// once the caller has copied them (see package mmap's Release); b stays valid, read again from the
// file if used. It releases nothing for a File from Parse, or after Close.
func (f *File) Release(b []byte) {
	if f.unmap != nil {
		mmap.Release(f.mapping, b)
	}
}

// Close releases the file's mapping; its tensors' Data must not be used afterwards. Close of a
// File from Parse releases nothing. It is idempotent, and must not run concurrently with other
// methods.
func (f *File) Close() error {
	if f.unmap == nil {
		return nil
	}
	err := f.unmap()
	f.unmap, f.header, f.mapping = nil, nil, nil
	for i := range f.Tensors {
		f.Tensors[i].Data = nil
	}
	if err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	return nil
}

// Header returns the file's bytes before the data section: the metadata and the tensor
// descriptions. It aliases the file, as tensors' Data do.
func (f *File) Header() []byte { return f.header }

// Lookup returns the value of a metadata key.
func (f *File) Lookup(key string) (Value, bool) {
	i, ok := f.keys[key]
	if !ok {
		return Value{}, false
	}
	return f.KV[i].Value, true
}

// Tensor returns the named tensor.
func (f *File) Tensor(name string) (Tensor, bool) {
	i, ok := f.tensors[name]
	if !ok {
		return Tensor{}, false
	}
	return f.Tensors[i], true
}

// TensorNames returns the tensors' names in file order.
func (f *File) TensorNames() []string {
	names := make([]string, len(f.Tensors))
	for i, t := range f.Tensors {
		names[i] = t.Name
	}
	return names
}

// Keys returns the metadata keys in file order.
func (f *File) Keys() []string {
	keys := make([]string, len(f.KV))
	for i, kv := range f.KV {
		keys[i] = kv.Key
	}
	return keys
}
