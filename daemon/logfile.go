package daemon

import (
	"fmt"
	"os"
	"sync"
)

// LogFile is a log file that follows its path, for the LaunchDaemon's log: before each write it
// checks that the path still names the file it holds, and when newsyslog (or anyone) has moved
// the file away it opens the path again, making a new file if none is there. So rotation needs
// no signal and nothing is written into an archive that is about to be compressed and deleted.
// A stat per line costs little beside a line. Safe for concurrent use.
type LogFile struct {
	path string
	// redirect points standard output and error at each file opened, so the Go runtime's own
	// last words (a panic's trace) land in the current log too, not in launchd's first file.
	redirect bool

	mu sync.Mutex // guards f
	f  *os.File
}

// OpenLogFile opens path for appending, making it (mode 0640, before the umask) if needed. With
// redirect, standard output and error are pointed at it too, now and after each rotation.
func OpenLogFile(path string, redirect bool) (*LogFile, error) {
	l := &LogFile{path: path, redirect: redirect}
	if err := l.openLocked(); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *LogFile) openLocked() error {
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return fmt.Errorf("daemon: open the log: %w", err)
	}
	if l.redirect {
		if err := redirectStdio(f); err != nil {
			f.Close()
			return fmt.Errorf("daemon: point standard output and error at the log %s: %w", l.path, err)
		}
	}
	if l.f != nil {
		l.f.Close()
	}
	l.f = f
	return nil
}

// Write writes p to the file at the path, opening the path again first if the file it holds
// has been moved or removed. If that fails, p goes to the old file, and the next write tries
// again.
func (l *LogFile) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.moved() {
		l.openLocked()
	}
	return l.f.Write(p)
}

// moved reports whether the path no longer names the file held.
func (l *LogFile) moved() bool {
	now, err := os.Stat(l.path)
	if err != nil {
		return true
	}
	held, err := l.f.Stat()
	return err != nil || !os.SameFile(now, held)
}

// Close closes the file.
func (l *LogFile) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f.Close()
}
