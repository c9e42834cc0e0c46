package promptcache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const testIdentity = "0123456789abcdef-test-model/cpu/k1"

// testBlock returns block i: its key under identity, its tokens and a payload of n bytes.
func testBlock(identity string, i, n int) (Key, []int32, []byte) {
	tokens := make([]int32, BlockTokens)
	for j := range tokens {
		tokens[j] = int32(i*1000 + j)
	}
	payload := make([]byte, n)
	for j := range payload {
		payload[j] = byte(i*7 + j)
	}
	return Keys(identity, tokens)[0], tokens, payload
}

const testPayload = 1000

// testFileSize is the size of a testBlock's file under testIdentity.
var testFileSize = spillFileSize(len(testIdentity), BlockTokens, testPayload)

// logBuffer collects a Disk's log lines; the writer goroutine and the test share it.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines returns the lines that contain s.
func (b *logBuffer) lines(s string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for line := range strings.Lines(b.buf.String()) {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return out
}

// fakeClock is a clock that moves only when told.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

type testDisk struct {
	*Disk
	log   *logBuffer
	clock *fakeClock
}

// openTestDisk opens a Disk on dir with a log buffer and a fake clock; createTemp, if not nil,
// replaces os.CreateTemp. The Disk is closed at the test's end.
func openTestDisk(t *testing.T, dir string, limit int64, identity string, createTemp func(dir, pattern string) (tempFile, error)) testDisk {
	t.Helper()
	logs := &logBuffer{}
	clock := &fakeClock{now: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	if createTemp == nil {
		createTemp = func(dir, pattern string) (tempFile, error) { return os.CreateTemp(dir, pattern) }
	}
	d, err := openDisk(DiskOptions{
		Dir:      dir,
		Limit:    limit,
		Identity: identity,
		Logger:   slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}, diskHooks{createTemp: createTemp, now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return testDisk{d, logs, clock}
}

// putBlocks puts testBlocks is under d's identity, one at a time (a small limit queues only one),
// and waits until each is written.
func putBlocks(d testDisk, is ...int) {
	for _, i := range is {
		d.Put(testBlock(d.identity, i, testPayload))
		d.Flush()
	}
}

// checkHas checks which of testBlocks is d has, by Has and by Get.
func checkHas(t *testing.T, d testDisk, want map[int]bool) {
	t.Helper()
	for i, has := range want {
		k, tokens, payload := testBlock(d.identity, i, testPayload)
		if got := d.Has(k); got != has {
			t.Errorf("Has(block %d) = %v, want %v", i, got, has)
		}
		if !has {
			continue
		}
		got, err := d.Get(k, tokens)
		if err != nil || !bytes.Equal(got, payload) {
			t.Errorf("Get(block %d): %d bytes, %v; want the %d bytes put", i, len(got), err, len(payload))
		}
	}
}

// spillFiles returns the names of the spill files in dir.
func spillFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if _, _, ok := parseSpillName(e.Name()); ok {
			names = append(names, e.Name())
		}
	}
	return names
}

func TestDiskRoundTrip(t *testing.T) {
	d := openTestDisk(t, t.TempDir(), 1<<20, testIdentity, nil)
	k, tokens, payload := testBlock(testIdentity, 1, testPayload)
	if _, err := d.Get(k, tokens); !errors.Is(err, ErrNotSpilled) {
		t.Fatalf("Get before Put: %v, want ErrNotSpilled", err)
	}
	d.Put(k, tokens, slices.Clone(payload))
	d.Flush()
	got, err := d.Get(k, tokens)
	if err != nil || !bytes.Equal(got, payload) {
		t.Fatalf("Get after Put: %d bytes, %v; want the %d bytes put", len(got), err, len(payload))
	}
	if !d.Has(k) {
		t.Error("Has after Put = false")
	}
	want := DiskStats{Bytes: testFileSize, Files: 1, Reads: 1, Writes: 1}
	if s := d.Stats(); s != want {
		t.Errorf("Stats = %+v, want %+v", s, want)
	}
	if names := spillFiles(t, d.dir); len(names) != 1 || names[0] != spillName(spillPrefix(testIdentity), k) {
		t.Errorf("files %q, want one named %s", names, spillName(spillPrefix(testIdentity), k))
	}
}

// blockingCreate returns a createTemp that waits for gate to close before it creates a file.
func blockingCreate(gate <-chan struct{}) func(dir, pattern string) (tempFile, error) {
	return func(dir, pattern string) (tempFile, error) {
		<-gate
		return os.CreateTemp(dir, pattern)
	}
}

func TestDiskQueue(t *testing.T) {
	gate := make(chan struct{})
	// A limit of 12 files: the queue holds a quarter of it, 3 files.
	d := openTestDisk(t, t.TempDir(), 12*testFileSize, testIdentity, blockingCreate(gate))
	var release sync.Once
	t.Cleanup(func() { release.Do(func() { close(gate) }) }) // before Close, which waits for the writer
	putBlocks := func(is ...int) {
		for _, i := range is {
			d.Put(testBlock(testIdentity, i, testPayload))
		}
	}
	putBlocks(1, 2, 3, 4) // the writer holds 1 at the gate; 4 does not fit
	if s := d.Stats(); s.Skipped != 1 || s.Queued != 3*testFileSize {
		t.Fatalf("after 4 puts into a queue of 3: Stats = %+v, want 1 skipped and 3 files queued", s)
	}
	// A queued block is there for Has and Get before it is written.
	k, tokens, payload := testBlock(testIdentity, 2, testPayload)
	if got, err := d.Get(k, tokens); !d.Has(k) || err != nil || !bytes.Equal(got, payload) {
		t.Errorf("queued block: Has = %v, Get = %d bytes, %v", d.Has(k), len(got), err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	k5, tokens5, payload5 := testBlock(testIdentity, 5, testPayload)
	if err := d.PutWait(ctx, k5, tokens5, payload5); !errors.Is(err, context.Canceled) {
		t.Errorf("PutWait with a full queue and a cancelled context = %v, want context.Canceled", err)
	}
	waited := make(chan error)
	k6, tokens6, payload6 := testBlock(testIdentity, 6, testPayload)
	go func() { waited <- d.PutWait(context.Background(), k6, tokens6, payload6) }()
	release.Do(func() { close(gate) })
	if err := <-waited; err != nil {
		t.Errorf("PutWait once the writer moves: %v", err)
	}
	d.Flush()
	checkHas(t, d, map[int]bool{1: true, 2: true, 3: true, 4: false, 5: false, 6: true})
	if s := d.Stats(); s.Writes != 4 || s.Skipped != 2 || s.Queued != 0 {
		t.Errorf("Stats = %+v, want 4 writes, 2 skipped, nothing queued", s)
	}
}

func TestDiskWarmRestart(t *testing.T) {
	dir := t.TempDir()
	d := openTestDisk(t, dir, 1<<20, testIdentity, nil)
	putBlocks(d, 1, 2, 3)
	d.Close()

	d = openTestDisk(t, dir, 1<<20, testIdentity, nil)
	if s := d.Stats(); s.Files != 3 || s.Bytes != 3*testFileSize || s.Foreign != 0 {
		t.Errorf("reopened: Stats = %+v, want 3 files of ours, %d bytes", s, 3*testFileSize)
	}
	checkHas(t, d, map[int]bool{1: true, 2: true, 3: true, 4: false})
}

func TestDiskWarmRestartKeepsLRUOrder(t *testing.T) {
	dir := t.TempDir()
	d := openTestDisk(t, dir, 1<<20, testIdentity, nil)
	putBlocks(d, 1, 2, 3)
	// Get refreshes a file's modification time, so the next open orders by it: block 1 is the
	// most recently used.
	d.clock.Advance(time.Hour)
	k, tokens, _ := testBlock(testIdentity, 1, testPayload)
	if _, err := d.Get(k, tokens); err != nil {
		t.Fatal(err)
	}
	d.Close()
	// Make the other two files' times differ whatever the file system's resolution.
	for i, age := range map[int]time.Duration{2: 2 * time.Hour, 3: time.Hour / 2} {
		k, _, _ := testBlock(testIdentity, i, testPayload)
		mtime := d.clock.Now().Add(-age)
		if err := os.Chtimes(filepath.Join(dir, spillName(spillPrefix(testIdentity), k)), mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	d = openTestDisk(t, dir, 3*testFileSize, testIdentity, nil)
	putBlocks(d, 4) // evicts the least recently used: 2
	checkHas(t, d, map[int]bool{1: true, 2: false, 3: true, 4: true})
}

// spillPath returns the path of testBlock i's file under identity in dir.
func TestDiskLRU(t *testing.T) {
	dir := t.TempDir()
	d := openTestDisk(t, dir, 3*testFileSize, testIdentity, nil)
	putBlocks(d, 1, 2, 3)
	k, tokens, _ := testBlock(testIdentity, 1, testPayload)
	if _, err := d.Get(k, tokens); err != nil { // 1 is used: 2 is the oldest now
		t.Fatal(err)
	}
	putBlocks(d, 4)
	if s := d.Stats(); s.Evictions != 1 || s.Files != 3 || s.Bytes > 3*testFileSize {
		t.Errorf("Stats = %+v, want 1 eviction and the limit kept", s)
	}
	if _, err := os.Stat(spillPath(dir, testIdentity, 2)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("block 2's file is still there: %v", err)
	}
	putBlocks(d, 3) // already there: a put marks it used; the order is 1, 4, 3
	putBlocks(d, 5) // evicts 1
	checkHas(t, d, map[int]bool{1: false, 2: false, 3: true, 4: true, 5: true})
	if got := len(spillFiles(t, dir)); got != 3 {
		t.Errorf("%d files in the folder, want 3", got)
	}
}

// TestDiskLimitDuringWrites checks that the folder is within its limit while a file is written,
// not only after, and after a limit shrunk during a write.
func TestDiskLimitDuringWrites(t *testing.T) {
	dir := t.TempDir()
	var stall atomic.Bool
	entered, gate := make(chan int), make(chan struct{})
	d := openTestDisk(t, dir, 3*testFileSize, testIdentity, func(dir, pattern string) (tempFile, error) {
		if stall.Load() {
			entries, _ := os.ReadDir(dir) // on the writer's goroutine: no t.Fatal here
			files := 0
			for _, e := range entries {
				if _, _, ok := parseSpillName(e.Name()); ok {
					files++
				}
			}
			entered <- files
			<-gate
		}
		return os.CreateTemp(dir, pattern)
	})
	putBlocks(d, 1, 2, 3)
	stall.Store(true)
	d.Put(testBlock(testIdentity, 4, testPayload))
	if files := <-entered; files != 2 {
		t.Errorf("the folder held %d files while the fourth was written, want 2 (a limit of 3)", files)
	}
	d.SetLimit(2 * testFileSize) // while block 4 is written: evicts 2 to 1 file
	stall.Store(false)
	close(gate)
	d.Flush()
	if names := spillFiles(t, dir); len(names) != 2 {
		t.Errorf("folder holds %d files after the write, want 2 (a limit shrunk during it)", len(names))
	}
	checkHas(t, d, map[int]bool{3: true, 4: true})
}

func TestDiskSetLimit(t *testing.T) {
	dir := t.TempDir()
	d := openTestDisk(t, dir, 4*testFileSize, testIdentity, nil)
	putBlocks(d, 1, 2, 3, 4)
	d.SetLimit(2*testFileSize + 1)
	checkHas(t, d, map[int]bool{1: false, 2: false, 3: true, 4: true})
	if s := d.Stats(); s.Evictions != 2 || s.Bytes != 2*testFileSize {
		t.Errorf("after shrinking to 2 files: Stats = %+v", s)
	}
	d.SetLimit(0)
	putBlocks(d, 5)
	if s := d.Stats(); s.Files != 0 || s.Writes != 4 || s.Skipped != 0 {
		t.Errorf("after SetLimit(0) and a put: Stats = %+v, want no files and nothing written", s)
	}
	if names := spillFiles(t, dir); len(names) != 0 {
		t.Errorf("files left: %q", names)
	}
	d.SetLimit(testFileSize - 1) // smaller than a block
	putBlocks(d, 6)
	if s := d.Stats(); s.Files != 0 || s.Skipped != 1 {
		t.Errorf("a block larger than the limit: Stats = %+v, want it skipped", s)
	}
}

// failingFile fails its writes with err.
// TestDiskConcurrent runs puts, gets, limits and stats at once, for the race detector, and then
// checks that the index and the folder agree.
func TestDiskConcurrent(t *testing.T) {
	dir := t.TempDir()
	d := openTestDisk(t, dir, 8*testFileSize, testIdentity, nil)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 50 {
				b := (g*50 + i) % 20
				switch i % 4 {
				case 0, 1:
					d.Put(testBlock(testIdentity, b, testPayload))
				case 2:
					k, tokens, payload := testBlock(testIdentity, b, testPayload)
					if got, err := d.Get(k, tokens); err == nil && !bytes.Equal(got, payload) {
						t.Errorf("Get(block %d) returned another payload", b)
					}
				case 3:
					k, _, _ := testBlock(testIdentity, b, testPayload)
					d.Has(k)
					d.Stats()
				}
			}
		})
	}
	wg.Go(func() {
		for i := range 20 {
			d.SetLimit(int64(4+i%5) * testFileSize)
		}
	})
	wg.Wait()
	d.Flush()
	s := d.Stats()
	if s.Bytes > d.limit || s.Dropped != 0 {
		t.Errorf("Stats = %+v with a limit of %d", s, d.limit)
	}
	if names := spillFiles(t, dir); len(names) != s.Files || int64(len(names))*testFileSize != s.Bytes {
		t.Errorf("folder holds %d files, the index %d files of %d bytes", len(names), s.Files, s.Bytes)
	}
}

func ExampleDisk() {
	dir, _ := os.MkdirTemp("", "spill")
	defer os.RemoveAll(dir)
	identity := "the model's identity"
	d, err := OpenDisk(DiskOptions{Dir: dir, Limit: 1 << 30, Identity: identity, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	tokens := make([]int32, BlockTokens)
	k := Keys(identity, tokens)[0]
	d.Put(k, tokens, []byte("the block's state"))
	d.Close() // writes what is queued

	d, _ = OpenDisk(DiskOptions{Dir: dir, Limit: 1 << 30, Identity: identity, Logger: slog.New(slog.DiscardHandler)})
	defer d.Close()
	payload, err := d.Get(k, tokens)
	fmt.Printf("%s %v\n", payload, err)
	// Output: the block's state <nil>
}
