package promptcache

import (
	"io/fs"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
)

// The writer against a failing disk: full, quota, other write errors.

type failingFile struct {
	*os.File
	err error
}

func (f failingFile) Write(p []byte) (int, error) {
	return 0, &fs.PathError{Op: "write", Path: f.Name(), Err: f.err}
}

// failingCreate returns a createTemp whose files fail their writes with the errno failure holds,
// when it holds one.
func failingCreate(failure *atomic.Uintptr) func(dir, pattern string) (tempFile, error) {
	return func(dir, pattern string) (tempFile, error) {
		f, err := os.CreateTemp(dir, pattern)
		if errno := syscall.Errno(failure.Load()); errno != 0 && err == nil {
			return failingFile{f, errno}, nil
		}
		return f, err
	}
}

func TestDiskFull(t *testing.T) {
	for _, errno := range []syscall.Errno{syscall.ENOSPC, syscall.EDQUOT} {
		t.Run(errno.Error(), func(t *testing.T) {
			var failure atomic.Uintptr
			failure.Store(uintptr(errno))
			dir := t.TempDir()
			d := openTestDisk(t, dir, 1<<20, testIdentity, failingCreate(&failure))
			putBlocks(d, 1)
			if s := d.Stats(); !s.Full || s.Skipped != 1 || s.Files != 0 {
				t.Fatalf("after a write to a full disk: Stats = %+v, want Full and 1 skipped", s)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Errorf("files left after the failed write: %v", entries)
			}
			putBlocks(d, 2, 3) // skipped at once, without a line
			// A minute on, writes try again; the disk is still full, and nothing more is said.
			d.clock.Advance(fullRetry)
			putBlocks(d, 4, 5)
			if s := d.Stats(); !s.Full || s.Skipped != 5 || s.Writes != 0 {
				t.Errorf("Stats = %+v, want Full and 5 skipped", s)
			}
			if lines := d.log.lines("disk is full"); len(lines) != 1 || !strings.Contains(lines[0], "level=WARN") {
				t.Errorf("log lines %q, want one warning", lines)
			}
			// Space is freed; spilling resumes after the next minute.
			failure.Store(0)
			putBlocks(d, 6)
			d.clock.Advance(fullRetry)
			putBlocks(d, 7)
			checkHas(t, d, map[int]bool{1: false, 5: false, 6: false, 7: true})
			if s := d.Stats(); s.Full || s.Writes != 1 {
				t.Errorf("Stats = %+v, want spilling resumed", s)
			}
			if lines := d.log.lines("spilling resumes"); len(lines) != 1 {
				t.Errorf("log lines %q, want one saying spilling resumes", lines)
			}
		})
	}
}

func TestDiskFullEndsAtSetLimit(t *testing.T) {
	var failure atomic.Uintptr
	failure.Store(uintptr(syscall.ENOSPC))
	d := openTestDisk(t, t.TempDir(), 1<<20, testIdentity, failingCreate(&failure))
	putBlocks(d, 1)
	failure.Store(0)
	d.SetLimit(1 << 20)
	putBlocks(d, 2)
	if s := d.Stats(); s.Full || s.Writes != 1 {
		t.Errorf("after SetLimit: Stats = %+v, want spilling on again", s)
	}
}

func TestDiskWriteError(t *testing.T) {
	var failure atomic.Uintptr
	failure.Store(uintptr(syscall.EIO))
	dir := t.TempDir()
	d := openTestDisk(t, dir, 1<<20, testIdentity, failingCreate(&failure))
	putBlocks(d, 1, 2, 3)
	if s := d.Stats(); s.Full || s.Skipped != 3 || s.Files != 0 {
		t.Errorf("Stats = %+v, want 3 skipped and not Full", s)
	}
	if lines := d.log.lines("cannot write a spill file"); len(lines) != 1 {
		t.Errorf("log lines %q, want one for three failures alike", lines)
	}
	failure.Store(0)
	putBlocks(d, 4)
	failure.Store(uintptr(syscall.EIO))
	putBlocks(d, 5)
	if lines := d.log.lines("cannot write a spill file"); len(lines) != 2 {
		t.Errorf("log lines %q, want a second after a success", lines)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("folder holds %d files, want block 4's alone", len(entries))
	}
}
