package promptcache

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"syscall"
)

// writeLoop is the writer: it writes the queued blocks in order until Close, after the queue is
// empty.
func (d *Disk) writeLoop() {
	defer close(d.done)
	d.mu.Lock()
	defer d.mu.Unlock()
	for {
		for len(d.queue) == 0 && !d.closed {
			d.cond.Wait()
		}
		if len(d.queue) == 0 {
			return
		}
		w := d.queue[0]
		d.queue[0] = nil
		d.queue = d.queue[1:]
		d.writeLocked(w)
		delete(d.pending, w.key)
		d.queued -= w.size
		d.cond.Broadcast()
	}
}

// writeLocked writes w's file, first deleting the least recently used files to make room for it.
// It holds the lock except while the temporary file is written, so puts and gets go on meanwhile.
func (d *Disk) writeLocked(w *spillWrite) {
	switch {
	case d.limit == 0:
		return // spilling was turned off since the put
	case w.size > d.limit || d.full && d.hooks.now().Before(d.retryAt):
		d.skipped++
		return
	}
	d.evictLocked(d.limit - w.size)
	name := spillName(d.prefix, w.key)
	path := filepath.Join(d.dir, name)

	d.mu.Unlock()
	tmp, err := d.writeTemp(name, w)
	d.mu.Lock()

	if err == nil {
		// Renamed under the lock, so that a Get dropping a bad file of this name never deletes the new one.
		if err = os.Rename(tmp, path); err != nil {
			os.Remove(tmp)
		}
	}
	if err != nil {
		d.writeFailedLocked(err)
		return
	}
	if el := d.ours[w.key]; el != nil {
		d.forgetLocked(el) // a file of this name found at open, and replaced
	}
	d.insertLocked(&spillEntry{name: name, key: w.key, ours: true, size: w.size})
	d.writes++
	d.lastError = ""
	if d.full {
		d.full = false
		d.log.Info("prompt cache: spilling resumes", "dir", d.dir)
	}
	d.evictLocked(d.limit) // the limit may have shrunk during the write
}

// writeTemp writes w to a new temporary file in the folder, mode 0640, and returns its path.
// On an error it removes the file.
func (d *Disk) writeTemp(name string, w *spillWrite) (string, error) {
	f, err := d.hooks.createTemp(d.dir, name+spillTempSuffix+"*")
	if err != nil {
		return "", err
	}
	var sum [4]byte
	binary.LittleEndian.PutUint32(sum[:], spillChecksum(w.header, w.payload))
	err = f.Chmod(0o640) // explicitly, whatever the umask
	for _, b := range [][]byte{w.header, w.payload, sum[:]} {
		if err == nil {
			_, err = f.Write(b)
		}
	}
	if closeErr := f.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

// writeFailedLocked skips a block whose write failed, and stops spilling if the disk is full.
func (d *Disk) writeFailedLocked(err error) {
	d.skipped++
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		if !d.full {
			d.log.Warn("prompt cache: the spill folder's disk is full: spilling stops, serving goes on",
				"dir", d.dir, "err", err, "retry_in", fullRetry)
		}
		d.full = true
		d.retryAt = d.hooks.now().Add(fullRetry)
		return
	}
	// The errno, not the message, which names a random temporary file.
	kind := err.Error()
	var errno syscall.Errno
	if errors.As(err, &errno) {
		kind = errno.Error()
	}
	if kind != d.lastError {
		d.lastError = kind
		d.log.Warn("prompt cache: cannot write a spill file: block not spilled", "dir", d.dir, "err", err)
	}
}
