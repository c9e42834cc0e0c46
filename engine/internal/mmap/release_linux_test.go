package mmap

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// TestRelease checks that Release drops the released pages of a mapping from the process's
// resident set (the mapping's Rss in /proc/self/smaps), keeps the pages b only partly covers, and
// leaves the bytes readable and unchanged; and that bytes outside the mapping are left alone.
func TestRelease(t *testing.T) {
	page := os.Getpagesize()
	want := make([]byte, 64*page)
	for i := range want {
		want[i] = byte(i*7 + i/page)
	}
	path := filepath.Join(t.TempDir(), "weights")
	if err := os.WriteFile(path, want, 0o644); err != nil {
		t.Fatal(err)
	}
	data, unmap, err := Map(path)
	if err != nil {
		t.Fatal(err)
	}
	defer unmap()
	if !bytes.Equal(data, want) { // reads, so faults in, every page
		t.Fatal("the mapping does not hold the file")
	}
	if got := residentKiB(t, data); got != len(data)/1024 {
		t.Fatalf("before Release: %d KiB of the mapping resident, want all %d", got, len(data)/1024)
	}

	// Pages 8 … 39 lie wholly inside b; pages 7 and 40, which b covers in part, stay.
	Release(data, data[7*page+1:40*page+1])
	if got, wantKiB := residentKiB(t, data), (len(data)-32*page)/1024; got != wantKiB {
		t.Errorf("after Release: %d KiB resident, want %d", got, wantKiB)
	}
	if !bytes.Equal(data, want) {
		t.Error("the bytes changed after Release")
	}

	heap := bytes.Clone(want)
	Release(data, heap) // outside the mapping: nothing happens
	if !bytes.Equal(heap, want) {
		t.Error("Release of bytes outside the mapping changed them")
	}
}

// residentKiB returns the Rss of the mapping that starts at data, from /proc/self/smaps.
func residentKiB(t *testing.T, data []byte) int {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skip("no /proc/self/smaps:", err)
	}
	defer f.Close()
	start := fmt.Sprintf("%x-", uintptr(unsafe.Pointer(unsafe.SliceData(data))))
	in := false
	s := bufio.NewScanner(f)
	for s.Scan() {
		line := s.Text()
		switch {
		case strings.HasPrefix(line, start):
			in = true
		case in && strings.HasPrefix(line, "Rss:"):
			kib, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(strings.TrimPrefix(line, "Rss:")), " kB"))
			if err != nil {
				t.Fatal(err)
			}
			return kib
		}
	}
	t.Fatalf("no mapping at %s in /proc/self/smaps", start)
	return 0
}
