package promptcache

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// What the spill folder holds: bad, foreign and other files, modes, and folders it refuses.

func spillPath(dir, identity string, i int) string {
	k, _, _ := testBlock(identity, i, testPayload)
	return filepath.Join(dir, spillName(spillPrefix(identity), k))
}

func TestDiskBadFiles(t *testing.T) {
	rewrite := func(change func(data []byte) []byte) func(t *testing.T, path string) {
		return func(t *testing.T, path string) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, change(data), 0o640); err != nil {
				t.Fatal(err)
			}
		}
	}
	// otherFile writes block i under another identity, or block 2 of ours, under block 1's name.
	otherFile := func(identity string, i int) func(t *testing.T, path string) {
		return func(t *testing.T, path string) {
			k, tokens, payload := testBlock(identity, i, testPayload)
			data := encodeSpillFile(identity, k, tokens, payload)
			if err := os.WriteFile(path, data, 0o640); err != nil {
				t.Fatal(err)
			}
		}
	}
	tests := []struct {
		name      string
		change    func(t *testing.T, path string) // the file of block 1; nil: none
		whileOpen bool                            // change it after the Disk indexed it
		tokens    func([]int32) []int32           // the tokens Get asks for; nil: block 1's
		reason    string                          // in the log line
	}{
		{name: "corrupt payload byte", change: rewrite(func(b []byte) []byte { b[len(b)-10] ^= 1; return b }), reason: "checksum"},
		{name: "corrupt header byte", change: rewrite(func(b []byte) []byte { b[20] ^= 0x80; return b }), reason: "checksum"},
		{name: "corrupt checksum", change: rewrite(func(b []byte) []byte { b[len(b)-1]++; return b }), reason: "checksum"},
		{name: "truncated", change: rewrite(func(b []byte) []byte { return b[:len(b)-100] }), reason: "truncated"},
		{name: "truncated header", change: rewrite(func(b []byte) []byte { return b[:30] }), reason: "truncated"},
		{name: "empty", change: rewrite(func([]byte) []byte { return nil }), reason: "magic"},
		{name: "padded", change: rewrite(func(b []byte) []byte { return append(b, 0) }), reason: "padded"},
		{name: "grown past the limit", whileOpen: true, change: rewrite(func(b []byte) []byte { return append(b, make([]byte, 1<<20)...) }), reason: "more than the folder's limit"},
		{name: "not a spill file", change: rewrite(func([]byte) []byte { return []byte("hello, world\n") }), reason: "magic"},
		{name: "newer format", change: rewrite(func(b []byte) []byte { b[8] = 2; return b }), reason: "format version 2"},
		{name: "another identity under our name", change: otherFile("another model", 1), reason: "another model"},
		{name: "another block under its name", change: otherFile(testIdentity, 2), reason: "not the block its name says"},
		{name: "other tokens", tokens: func(t []int32) []int32 { t = slices.Clone(t); t[5]++; return t }, reason: "other tokens"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			d := openTestDisk(t, dir, 1<<20, testIdentity, nil)
			putBlocks(d, 1, 2)
			d.Close()
			path := spillPath(dir, testIdentity, 1)
			if tt.change != nil && !tt.whileOpen {
				tt.change(t, path)
			}
			d = openTestDisk(t, dir, 1<<20, testIdentity, nil)
			if tt.change != nil && tt.whileOpen {
				tt.change(t, path)
			}
			k, tokens, _ := testBlock(testIdentity, 1, testPayload)
			if tt.tokens != nil {
				tokens = tt.tokens(tokens)
			}
			got, err := d.Get(k, tokens)
			if !errors.Is(err, ErrBadSpillFile) || got != nil {
				t.Fatalf("Get = %d bytes, %v; want a miss wrapping ErrBadSpillFile", len(got), err)
			}
			if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("the bad file is still there: %v", err)
			}
			if d.Has(k) {
				t.Error("Has = true after the file was dropped")
			}
			if s := d.Stats(); s.Dropped != 1 || s.Files != 1 || s.Bytes != testFileSize {
				t.Errorf("Stats = %+v, want 1 dropped and block 2's file left", s)
			}
			lines := d.log.lines("spill file dropped")
			if len(lines) != 1 || !strings.Contains(lines[0], filepath.Base(path)) ||
				!strings.Contains(lines[0], "level=WARN") || !strings.Contains(lines[0], tt.reason) {
				t.Errorf("log lines %q, want one warning naming %s and %q", lines, filepath.Base(path), tt.reason)
			}
			checkHas(t, d, map[int]bool{1: false, 2: true})
			// The dropped block can be spilled again.
			putBlocks(d, 1)
			checkHas(t, d, map[int]bool{1: true})
		})
	}
}

func TestDiskFileGone(t *testing.T) {
	dir := t.TempDir()
	d := openTestDisk(t, dir, 1<<20, testIdentity, nil)
	putBlocks(d, 1)
	if err := os.Remove(spillPath(dir, testIdentity, 1)); err != nil {
		t.Fatal(err)
	}
	k, tokens, _ := testBlock(testIdentity, 1, testPayload)
	if _, err := d.Get(k, tokens); !errors.Is(err, ErrNotSpilled) {
		t.Errorf("Get of a file deleted by someone else = %v, want ErrNotSpilled", err)
	}
	if s := d.Stats(); s.Files != 0 || s.Bytes != 0 || s.Dropped != 0 {
		t.Errorf("Stats = %+v, want the file forgotten and nothing dropped", s)
	}
}

func TestDiskForeignFiles(t *testing.T) {
	const otherIdentity = "fedcba9876543210-test-model/gpu/k2" // as long as testIdentity: files of one size
	dir := t.TempDir()
	other := openTestDisk(t, dir, 1<<20, otherIdentity, nil)
	putBlocks(other, 1, 2)
	other.Close()
	otherSize := spillFileSize(len(otherIdentity), BlockTokens, testPayload)
	// Block 1's file is the older one.
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(spillPath(dir, otherIdentity, 1), old, old); err != nil {
		t.Fatal(err)
	}

	// Room for the two foreign files and one of ours.
	d := openTestDisk(t, dir, 2*otherSize+testFileSize, testIdentity, nil)
	if s := d.Stats(); s.Files != 2 || s.Foreign != 2 || s.Bytes != 2*otherSize {
		t.Fatalf("Stats = %+v, want 2 foreign files counted", s)
	}
	// The same tokens under another identity are another key; the foreign files are never read.
	for i := 1; i <= 2; i++ {
		k, tokens, _ := testBlock(otherIdentity, i, testPayload)
		if _, err := d.Get(k, tokens); d.Has(k) || !errors.Is(err, ErrNotSpilled) {
			t.Errorf("foreign block %d: Has = %v, Get error %v; want a miss", i, d.Has(k), err)
		}
	}
	putBlocks(d, 1)
	if s := d.Stats(); s.Foreign != 2 || s.Evictions != 0 {
		t.Fatalf("with room: Stats = %+v, want both foreign files kept", s)
	}
	putBlocks(d, 2) // needs the room of the oldest file: the foreign block 1
	if _, err := os.Stat(spillPath(dir, otherIdentity, 1)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the least recently used foreign file is still there: %v", err)
	}
	if _, err := os.Stat(spillPath(dir, otherIdentity, 2)); err != nil {
		t.Errorf("the other foreign file is gone: %v", err)
	}
	if s := d.Stats(); s.Foreign != 1 || s.Files != 3 || s.Evictions != 1 || s.Bytes > 2*otherSize+testFileSize {
		t.Errorf("Stats = %+v, want 1 foreign file evicted", s)
	}
	checkHas(t, d, map[int]bool{1: true, 2: true})
}

func TestDiskLeavesOtherFilesAlone(t *testing.T) {
	dir := t.TempDir()
	prefix := spillPrefix(testIdentity)
	k, _, _ := testBlock(testIdentity, 9, testPayload)
	spillLike := spillName(prefix, k)
	others := []string{
		"notes.txt",
		"x.tfdkv",
		strings.ToUpper(spillLike[:len(spillLike)-len(spillExt)]) + spillExt, // not as tfd writes it
		spillLike + ".bak",
		spillLike + spillTempSuffix + "12ab", // not os.CreateTemp's
	}
	for _, name := range others {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("not ours"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// A folder and a link under a spill file's name are not tfd's either.
	k2, _, _ := testBlock(testIdentity, 10, testPayload)
	if err := os.Mkdir(filepath.Join(dir, spillLike), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("notes.txt", filepath.Join(dir, spillName(prefix, k2))); err != nil {
		t.Fatal(err)
	}
	others = append(others, spillLike, spillName(prefix, k2))
	stale := spillPath(dir, testIdentity, 11) + spillTempSuffix + "1234567"
	if err := os.WriteFile(stale, []byte("half a file"), 0o640); err != nil {
		t.Fatal(err)
	}

	d := openTestDisk(t, dir, 1<<20, testIdentity, nil)
	if _, err := os.Stat(stale); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a stale temporary file is still there: %v", err)
	}
	if s := d.Stats(); s.Files != 0 {
		t.Errorf("Stats = %+v, want no files indexed", s)
	}
	putBlocks(d, 1, 2)
	d.SetLimit(0) // deletes every spill file
	if s := d.Stats(); s.Files != 0 || s.Evictions != 2 {
		t.Errorf("after SetLimit(0): Stats = %+v, want both files evicted", s)
	}
	for _, name := range others {
		if _, err := os.Lstat(filepath.Join(dir, name)); err != nil {
			t.Errorf("%s was touched: %v", name, err)
		}
	}
}

func TestDiskModes(t *testing.T) {
	// The modes must not depend on the umask; a strict one shows it.
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	dir := filepath.Join(t.TempDir(), "cache", "spill")
	d := openTestDisk(t, dir, 1<<20, testIdentity, nil)
	putBlocks(d, 1)
	checkMode(t, dir, fs.ModeDir|0o750)
	checkMode(t, spillPath(dir, testIdentity, 1), 0o640)

	// An existing folder keeps its mode.
	mine := filepath.Join(t.TempDir(), "mine")
	if err := os.Mkdir(mine, 0o700); err != nil {
		t.Fatal(err)
	}
	openTestDisk(t, mine, 1<<20, testIdentity, nil)
	checkMode(t, mine, fs.ModeDir|0o700)
}

func checkMode(t *testing.T, path string, want fs.FileMode) {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode() != want {
		t.Errorf("%s: mode %v, want %v", path, info.Mode(), want)
	}
}

func TestOpenDiskRefuses(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		opts DiskOptions
		want string
	}{
		{"no folder", DiskOptions{Limit: 1, Identity: "m"}, "spill_dir"},
		{"a file", DiskOptions{Dir: file, Limit: 1, Identity: "m"}, "not a folder"},
		{"no identity", DiskOptions{Dir: t.TempDir(), Limit: 1}, "identity"},
		{"negative limit", DiskOptions{Dir: t.TempDir(), Limit: -1, Identity: "m"}, "limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := OpenDisk(tt.opts)
			if err == nil {
				d.Close()
				t.Fatal("OpenDisk succeeded")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not say %q", err, tt.want)
			}
		})
	}
}
