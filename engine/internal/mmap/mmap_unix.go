//go:build linux || darwin

package mmap

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

func mapFile(path string) ([]byte, func() error, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close() // the mapping outlives the descriptor
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	size := fi.Size()
	if size == 0 {
		return []byte{}, func() error { return nil }, nil
	}
	if int64(int(size)) != size {
		return nil, nil, fmt.Errorf("%s: %d bytes do not fit this platform's address space", path, size)
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, nil, fmt.Errorf("mapping %s: %w", path, err)
	}
	return data, func() error {
		if err := unix.Munmap(data); err != nil {
			return fmt.Errorf("unmapping %s: %w", path, err)
		}
		return nil
	}, nil
}

// release drops the whole pages of mapping[from:to] (madvise MADV_DONTNEED).
func release(mapping []byte, from, to int) {
	page := os.Getpagesize()
	from, to = (from+page-1)/page*page, to/page*page
	if from < to {
		_ = unix.Madvise(mapping[from:to], unix.MADV_DONTNEED)
	}
}
