//go:build !(linux || darwin)

package mmap

import "os"

// mapFile reads the whole file: platforms other than linux and darwin get no memory mapping, which
// costs resident memory for the whole checkpoint but keeps the package portable.
func mapFile(path string) ([]byte, func() error, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	return data, func() error { return nil }, nil
}

// release has nothing to release: the file was read, not mapped.
func release(mapping []byte, from, to int) {}
