//go:build linux || darwin

package safetensors

import (
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// mapFile maps the whole file at path read-only and shared, so pages come from the page cache and
// are shared with other processes reading the same checkpoint. unmap releases the mapping; the
// bytes must not be used after it.
func mapFile(path string) (data []byte, unmap func() error, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("safetensors: %w", err)
	}
	defer f.Close() // the mapping outlives the descriptor
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, fmt.Errorf("safetensors: %w", err)
	}
	size := fi.Size()
	if size < 8 {
		// mmap refuses length 0, and Parse rejects such a file anyway: read it so Parse can say why.
		data, err := io.ReadAll(f)
		if err != nil {
			return nil, nil, fmt.Errorf("safetensors: %w", err)
		}
		return data, func() error { return nil }, nil
	}
	if int64(int(size)) != size {
		return nil, nil, fmt.Errorf("safetensors: %s: %d bytes do not fit this platform's address space", path, size)
	}
	data, err = unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, nil, fmt.Errorf("safetensors: mapping %s: %w", path, err)
	}
	return data, func() error {
		if err := unix.Munmap(data); err != nil {
			return fmt.Errorf("safetensors: unmapping %s: %w", path, err)
		}
		return nil
	}, nil
}
