// Package mmap maps model files into memory read-only, so that opening a checkpoint of many
// gigabytes costs address space rather than resident memory until its weights are read, and the
// pages are shared with other processes reading the same file. It is shared by the readers of
// the checkpoint formats (engine/safetensors, engine/gguf).
package mmap

import "unsafe"

// Map returns the whole file at path, and unmap, which releases it. On linux and darwin the bytes
// are a read-only shared mapping: writing to them faults, and they must not be used after unmap.
// Elsewhere the file is read into memory and unmap releases nothing. An empty file gives empty
// bytes (mmap refuses a length of 0). Errors are the os package's, or name the path.
func Map(path string) (data []byte, unmap func() error, err error) {
	return mapFile(path)
}

// Release drops the whole pages of b, bytes of mapping (a Map result that is still mapped), from
// the process's resident memory: a loader calls it once it has copied b elsewhere, so that the
// file's pages and the copy are not resident together. The bytes stay valid: a page read again
// comes back from the file (the mapping is shared and read-only, so nothing is lost). b outside
// mapping, or a platform without mappings, releases nothing; errors are ignored, since the
// release only saves memory.
func Release(mapping, b []byte) {
	if len(b) == 0 || len(mapping) == 0 {
		return
	}
	start, end := uintptr(unsafe.Pointer(unsafe.SliceData(mapping))), uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	if end < start || end-start+uintptr(len(b)) > uintptr(len(mapping)) {
		return
	}
	release(mapping, int(end-start), int(end-start)+len(b))
}
