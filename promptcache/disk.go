package promptcache

import (
	"cmp"
	"container/list"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"
)

// DiskOptions configures a spill folder.
type DiskOptions struct {
	// Dir is the folder (prompt_cache.spill_dir). A missing one is made with mode 0750; an
	// existing one keeps its mode.
	Dir string
	// Limit is the bytes the folder's spill files may hold, this model's and other models'
	// (prompt_cache.spill_gib); beyond it the least recently used files are deleted. 0 holds
	// nothing: no block is written and the files there are deleted.
	Limit int64
	// Identity is the model's identity (engine.Model.Identity), 1 to 65535 bytes: a file is read
	// back only by a Disk of the same identity.
	Identity string
	// Logger receives one line per event; nil means slog.Default().
	Logger *slog.Logger
}

// DiskStats is a spill folder's state, and its counters since OpenDisk.
type DiskStats struct {
	Bytes     int64  // bytes of the spill files in the folder, of every identity
	Files     int    // spill files in the folder
	Foreign   int    // of Files, those of other identities: counted and evicted, never read
	Queued    int64  // bytes put and not written yet
	Reads     uint64 // blocks Get returned
	Writes    uint64 // files written
	Evictions uint64 // files deleted to keep Bytes within the limit
	Dropped   uint64 // files deleted by Get as corrupt, truncated, foreign or unreadable
	Skipped   uint64 // blocks put and never written: queue full, disk full, over the limit, a write error
	Full      bool   // spilling is stopped by a full disk
}

// The cache's memory spills to a Disk.
var _ Spill = (*Disk)(nil)

// ErrNotSpilled is returned by Get for a block the folder does not hold; errors.Is finds it.
var ErrNotSpilled = errors.New("promptcache: block not in the spill folder")

const (
	// maxQueued is the most bytes put and not yet written (and Limit/4 when that is less), so
	// that a slow disk costs the cache blocks, not the server memory. An empty queue takes one
	// block of any size within the limit.
	maxQueued = 64 << 20
	// fullRetry is how long spilling stays stopped after a full disk.
	fullRetry = time.Minute
)

// Disk is the prompt cache's spill folder: a file per block, read back on lookup, kept within a
// byte limit by deleting the least recently used (by Put and Get; files found at OpenDisk are
// ordered by their modification times, which Get refreshes). Writes run on a goroutine of their
// own behind a bounded queue, so Put never waits for the disk; Get reads on its caller's
// goroutine. A file is used only when its identity, key, tokens, length and checksum match; one
// that does not is deleted with one log line, and the Get is a miss. All methods are safe for
// concurrent use.
//
// A file is written under a temporary name in the folder and renamed, so a real name only ever
// names a whole file; the next OpenDisk removes the temporary files a crash leaves. Files are not
// synced: this is a cache, a block lost in a crash is a miss, and a file cut short fails its
// checks.
//
// A full disk (ENOSPC, EDQUOT) stops spilling with one log line and sets DiskStats.Full: puts
// are skipped until a minute has passed or SetLimit is called, and then the next write tries
// again. A success logs that spilling resumes; a failure stops it for another minute, without a
// new line. Other write errors skip the block with one line, said again only when the error
// changes or after a write succeeds.
//
// A folder serves one running tfd: two would evict each other's files and remove each other's
// temporary files at start, which costs misses but never a wrong block.
type Disk struct {
	dir      string
	identity string
	prefix   string // spillPrefix(identity): the start of this identity's file names
	log      *slog.Logger
	hooks    diskHooks
	done     chan struct{} // closed when the writer returns

	mu   sync.Mutex // guards everything below
	cond *sync.Cond // broadcast when the queue, pending, limit or closed change

	limit   int64
	lru     *list.List            // of *spillEntry: every spill file in the folder, least recently used first
	ours    map[Key]*list.Element // this identity's entries in lru, by key
	bytes   int64                 // the sizes of lru's files
	foreign int                   // lru's entries of other identities

	queue   []*spillWrite       // puts the writer has not taken yet, oldest first
	pending map[Key]*spillWrite // puts not yet written: the queue and the write in progress
	queued  int64               // the sizes of pending's files
	closed  bool

	full      bool      // a full disk stopped spilling …
	retryAt   time.Time // … until then
	lastError string    // the kind of the last write error logged, "" after a success

	reads, writes, evictions, dropped, skipped uint64
}

// diskHooks are the calls tests replace, to make a disk full or to move time.
type diskHooks struct {
	createTemp func(dir, pattern string) (tempFile, error) // os.CreateTemp
	now        func() time.Time                            // time.Now
}

// tempFile is the file a Disk writes; *os.File is one.
type tempFile interface {
	io.Writer
	Name() string
	Chmod(os.FileMode) error
	Close() error
}

// spillEntry is a spill file in the folder.
type spillEntry struct {
	name string
	key  Key
	ours bool // of this Disk's identity
	size int64
}

// spillWrite is a block put and not yet written.
type spillWrite struct {
	key     Key
	tokens  []int32
	header  []byte
	payload []byte
	size    int64 // the file's
}

// OpenDisk opens the spill folder opts.Dir, making it if missing. It indexes the spill files
// there without reading them (this identity's are read back by Get, others' only counted toward
// the limit), removes the temporary files of writes a crash interrupted, deletes the least
// recently used files beyond opts.Limit, and starts the writer; Close stops it. Files whose names
// are not a spill file's are never touched.
func OpenDisk(opts DiskOptions) (*Disk, error) {
	return openDisk(opts, diskHooks{
		createTemp: func(dir, pattern string) (tempFile, error) { return os.CreateTemp(dir, pattern) },
		now:        time.Now,
	})
}

func openDisk(opts DiskOptions, hooks diskHooks) (*Disk, error) {
	switch {
	case opts.Dir == "":
		return nil, errors.New("promptcache: no spill folder: set prompt_cache.spill_dir, or spill_gib = 0 to spill nothing")
	case opts.Identity == "" || len(opts.Identity) > maxIdentity:
		return nil, fmt.Errorf("promptcache: a model identity of %d bytes: want 1 to %d", len(opts.Identity), maxIdentity)
	case opts.Limit < 0:
		return nil, fmt.Errorf("promptcache: a spill limit of %d bytes: want 0 or more", opts.Limit)
	}
	if err := makeSpillDir(opts.Dir); err != nil {
		return nil, err
	}
	d := &Disk{
		dir:      opts.Dir,
		identity: opts.Identity,
		prefix:   spillPrefix(opts.Identity),
		log:      opts.Logger,
		hooks:    hooks,
		done:     make(chan struct{}),
		limit:    opts.Limit,
		lru:      list.New(),
		ours:     make(map[Key]*list.Element),
		pending:  make(map[Key]*spillWrite),
	}
	if d.log == nil {
		d.log = slog.Default()
	}
	d.cond = sync.NewCond(&d.mu)
	if err := d.scan(); err != nil {
		return nil, err
	}
	d.mu.Lock()
	d.evictLocked(d.limit)
	d.log.Info("prompt cache: spill folder opened", "dir", d.dir, "files", d.lru.Len(),
		"foreign", d.foreign, "bytes", d.bytes, "limit", d.limit)
	d.mu.Unlock()
	go d.writeLoop()
	return d, nil
}

// makeSpillDir makes dir with mode 0750 if it is missing.
func makeSpillDir(dir string) error {
	info, err := os.Stat(dir)
	switch {
	case err == nil && !info.IsDir():
		return fmt.Errorf("promptcache: spill folder %s is not a folder: set prompt_cache.spill_dir to a folder", dir)
	case err == nil:
		return nil
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("promptcache: spill folder: %w: set prompt_cache.spill_dir to a folder tfd's user can use", err)
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("promptcache: making the spill folder: %w: set prompt_cache.spill_dir to a folder tfd's user can make", err)
	}
	// MkdirAll's mode passes through the umask; the folder's must not depend on it.
	if err := os.Chmod(dir, 0o750); err != nil {
		return fmt.Errorf("promptcache: spill folder: %w", err)
	}
	return nil
}

// scan indexes the spill files in the folder, oldest modification first, and removes temporary
// files. Only regular files are considered: a link or folder is not one tfd wrote.
func (d *Disk) scan() error {
	entries, err := os.ReadDir(d.dir)
	if err != nil {
		return fmt.Errorf("promptcache: reading the spill folder: %w: set prompt_cache.spill_dir to a folder tfd's user can read", err)
	}
	type found struct {
		entry *spillEntry
		mtime time.Time
	}
	var files []found
	for _, de := range entries {
		name := de.Name()
		if !de.Type().IsRegular() {
			continue
		}
		if isSpillTempName(name) {
			if err := os.Remove(filepath.Join(d.dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				d.log.Warn("prompt cache: cannot remove an interrupted spill write", "file", filepath.Join(d.dir, name), "err", err)
			}
			continue
		}
		prefix, k, ok := parseSpillName(name)
		if !ok {
			continue
		}
		info, err := de.Info()
		if err != nil {
			continue // gone since ReadDir
		}
		e := &spillEntry{name: name, key: k, ours: prefix == d.prefix, size: info.Size()}
		files = append(files, found{e, info.ModTime()})
	}
	slices.SortFunc(files, func(a, b found) int {
		if c := a.mtime.Compare(b.mtime); c != 0 {
			return c
		}
		return cmp.Compare(a.entry.name, b.entry.name)
	})
	for _, f := range files {
		d.insertLocked(f.entry)
	}
	return nil
}

// Has reports whether block k is in the folder or queued for it.
func (d *Disk) Has(k Key) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, onDisk := d.ours[k]
	_, queued := d.pending[k]
	return onDisk || queued
}

// Put queues block k, which holds tokens, for the writer, and returns at once; payload is the
// block as Store.Read wrote it, and Put takes ownership of it. The block is skipped (and counted)
// when the queue is full, the disk is full, or it is larger than the limit: a cache may forget. A
// block already there or queued is only marked as used.
func (d *Disk) Put(k Key, tokens []int32, payload []byte) {
	size := spillFileSize(len(d.identity), len(tokens), len(payload))
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.acceptLocked(k, size) {
		return
	}
	if !d.roomLocked(size) {
		d.skipped++
		return
	}
	d.enqueueLocked(k, tokens, payload, size)
}

// PutWait is Put for the blocks a stop or a reload saves: it waits for room in the queue rather
// than skip the block, until ctx ends, and then returns ctx's error. It returns nil once the block
// is queued, or when Put would skip it for any other reason than a full queue.
func (d *Disk) PutWait(ctx context.Context, k Key, tokens []int32, payload []byte) error {
	stop := context.AfterFunc(ctx, func() {
		d.mu.Lock()
		d.cond.Broadcast()
		d.mu.Unlock()
	})
	defer stop()
	size := spillFileSize(len(d.identity), len(tokens), len(payload))
	d.mu.Lock()
	defer d.mu.Unlock()
	for {
		if !d.acceptLocked(k, size) {
			return nil
		}
		if d.roomLocked(size) {
			d.enqueueLocked(k, tokens, payload, size)
			return nil
		}
		if err := ctx.Err(); err != nil {
			d.skipped++
			return err
		}
		d.cond.Wait()
	}
}

// acceptLocked reports whether a block k whose file is size bytes is to be queued. It is not when
// spilling is off or closed, when k is queued or on disk (then marked as used), when the disk is
// full, or when it is larger than the limit (both counted as skipped).
func (d *Disk) acceptLocked(k Key, size int64) bool {
	if d.limit == 0 || d.closed || d.pending[k] != nil {
		return false
	}
	if el := d.ours[k]; el != nil {
		d.lru.MoveToBack(el)
		return false
	}
	if size > d.limit || d.full && d.hooks.now().Before(d.retryAt) {
		d.skipped++
		return false
	}
	return true
}

// roomLocked reports whether the queue takes a file of size bytes.
func (d *Disk) roomLocked(size int64) bool {
	return d.queued == 0 || d.queued+size <= min(maxQueued, d.limit/4)
}

func (d *Disk) enqueueLocked(k Key, tokens []int32, payload []byte, size int64) {
	w := &spillWrite{
		key:     k,
		tokens:  slices.Clone(tokens),
		header:  encodeSpillHeader(d.identity, k, tokens, len(payload)),
		payload: payload,
		size:    size,
	}
	d.queue = append(d.queue, w)
	d.pending[k] = w
	d.queued += size
	d.cond.Broadcast()
}

// Get returns the payload of block k, which holds tokens: from its file, after checking all of
// it, or from the queue. A block the folder does not hold is ErrNotSpilled; a file that fails a
// check is deleted, logged and counted, and its error wraps ErrBadSpillFile. Either is a miss.
// The caller owns the payload.
func (d *Disk) Get(k Key, tokens []int32) ([]byte, error) {
	d.mu.Lock()
	if w := d.pending[k]; w != nil {
		if !slices.Equal(w.tokens, tokens) {
			d.mu.Unlock()
			return nil, fmt.Errorf("promptcache: block %s queued for the spill folder holds other tokens than the prompt's", k)
		}
		d.reads++
		d.mu.Unlock()
		// The writer only reads the payload, so it is copied without the lock.
		return slices.Clone(w.payload), nil
	}
	el := d.ours[k]
	limit := d.limit
	d.mu.Unlock()
	if el == nil {
		return nil, ErrNotSpilled
	}
	path := filepath.Join(d.dir, el.Value.(*spillEntry).name)
	data, err := readSpillFile(path, limit)
	if errors.Is(err, fs.ErrNotExist) {
		// Deleted by someone else: nothing to drop.
		d.mu.Lock()
		if d.ours[k] == el {
			d.forgetLocked(el)
		}
		d.mu.Unlock()
		d.log.Debug("prompt cache: spill file gone", "file", path)
		return nil, fmt.Errorf("%w: %s was deleted", ErrNotSpilled, path)
	}
	var f spillFile
	if err == nil {
		f, err = parseSpillFile(data)
	}
	if err == nil {
		err = f.check(d.identity, k, tokens)
	}
	if err != nil {
		d.drop(el, path, err)
		return nil, fmt.Errorf("promptcache: spill file %s: %w", path, err)
	}
	d.mu.Lock()
	if d.ours[k] == el {
		d.lru.MoveToBack(el)
	}
	d.reads++
	d.mu.Unlock()
	// The modification time orders the files the next OpenDisk finds; a failure costs only that.
	now := d.hooks.now()
	_ = os.Chtimes(path, now, now)
	return f.payload, nil
}

// readSpillFile reads the file at path, which may be no larger than limit.
func readSpillFile(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, err
	} else if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadSpillFile, err)
	}
	defer f.Close()
	info, err := f.Stat()
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: %w", ErrBadSpillFile, err)
	case !info.Mode().IsRegular():
		return nil, fmt.Errorf("%w: not a regular file", ErrBadSpillFile)
	case info.Size() > limit:
		return nil, fmt.Errorf("%w: %d bytes, more than the folder's limit of %d", ErrBadSpillFile, info.Size(), limit)
	}
	data := make([]byte, info.Size())
	if _, err := io.ReadFull(f, data); err != nil {
		return nil, fmt.Errorf("%w: reading: %w", ErrBadSpillFile, err)
	}
	return data, nil
}

// drop deletes the file at path that Get found bad, unless the writer has replaced it since.
func (d *Disk) drop(el *list.Element, path string, reason error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ours[el.Value.(*spillEntry).key] != el {
		return
	}
	d.forgetLocked(el)
	d.dropped++
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		reason = fmt.Errorf("%w (and deleting it: %w)", reason, err)
	}
	d.log.Warn("prompt cache: spill file dropped", "file", path, "err", reason)
}

// SetLimit changes the folder's limit, as a reload of prompt_cache.spill_gib does: a smaller one
// deletes the least recently used files down to it at once. A negative limit is 0. It also ends a
// stop for a full disk: the next write tries again.
func (d *Disk) SetLimit(bytes int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.limit = max(bytes, 0)
	d.full = false
	d.evictLocked(d.limit)
	d.cond.Broadcast()
}

// Stats returns the folder's state and counters.
func (d *Disk) Stats() DiskStats {
	d.mu.Lock()
	defer d.mu.Unlock()
	return DiskStats{
		Bytes:     d.bytes,
		Files:     d.lru.Len(),
		Foreign:   d.foreign,
		Queued:    d.queued,
		Reads:     d.reads,
		Writes:    d.writes,
		Evictions: d.evictions,
		Dropped:   d.dropped,
		Skipped:   d.skipped,
		Full:      d.full,
	}
}

// Flush waits until every block put so far is written (or skipped).
func (d *Disk) Flush() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for len(d.pending) > 0 {
		d.cond.Wait()
	}
}

// Close writes what is queued and stops the writer; later puts are ignored, and Get and Has go
// on working. It returns nil: a write that fails was logged when it did.
func (d *Disk) Close() error {
	d.mu.Lock()
	d.closed = true
	d.cond.Broadcast()
	d.mu.Unlock()
	<-d.done
	return nil
}

// insertLocked adds e to the index as the most recently used.
func (d *Disk) insertLocked(e *spillEntry) {
	el := d.lru.PushBack(e)
	d.bytes += e.size
	if e.ours {
		d.ours[e.key] = el
	} else {
		d.foreign++
	}
}

// forgetLocked removes el from the index (not its file).
func (d *Disk) forgetLocked(el *list.Element) {
	e := d.lru.Remove(el).(*spillEntry)
	d.bytes -= e.size
	if e.ours {
		delete(d.ours, e.key)
	} else {
		d.foreign--
	}
}

// evictLocked deletes the least recently used files until the folder holds at most target bytes.
func (d *Disk) evictLocked(target int64) {
	for d.bytes > target && d.lru.Len() > 0 {
		el := d.lru.Front()
		name := el.Value.(*spillEntry).name
		d.forgetLocked(el)
		d.evictions++
		path := filepath.Join(d.dir, name)
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			d.log.Warn("prompt cache: cannot delete a spill file: the folder may hold more than its limit",
				"file", path, "err", err)
		}
	}
}
