// Package mmap maps model files into memory read-only, so that opening a checkpoint of many
// gigabytes costs address space rather than resident memory until its weights are read, and the
// pages are shared with other processes reading the same file. It is shared by the readers of
// the checkpoint formats (engine/safetensors, engine/gguf).
package mmap

// Map returns the whole file at path, and unmap, which releases it. On linux and darwin the bytes
// are a read-only shared mapping: writing to them faults, and they must not be used after unmap.
// Elsewhere the file is read into memory and unmap releases nothing. An empty file gives empty
// bytes (mmap refuses a length of 0). Errors are the os package's, or name the path.
func Map(path string) (data []byte, unmap func() error, err error) {
	return mapFile(path)
}
