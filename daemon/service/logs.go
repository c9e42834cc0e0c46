package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
)

// Logs prints the service's last lines lines and, with follow, what it logs next until ctx ends:
// under launchd from the log file, with tail (-F follows the file across newsyslog's rotation,
// which a Go copy of tail would have to redo); under systemd from the journal, with journalctl.
// Either gets the caller's streams, as if run by hand, through the Runner, which must be an
// Attacher.
func (m *Manager) Logs(ctx context.Context, lines int, follow bool, stdin io.Reader, stdout, stderr io.Writer) error {
	a, ok := m.Runner.(Attacher)
	if !ok {
		return errors.New("service: this command runner cannot hand the terminal to a command")
	}
	n := strconv.Itoa(lines)
	if m.Platform == Systemd {
		args := []string{"-u", systemdUnit, "-n", n, "--no-pager"}
		if follow {
			args = append(args, "-f")
		}
		return a.Attach(ctx, stdin, stdout, stderr, "journalctl", args...)
	}
	file := m.Paths.logFile()
	f, err := os.Open(file)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("service: no log at %s: tfd has not run as a service here (tfd status; sudo tfd install)", file)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("service: %s is readable by %s and the admin group only: sudo tfd logs", file, serviceUser)
	case err != nil:
		return fmt.Errorf("service: %w", err)
	}
	f.Close()
	args := []string{"-n", n, file}
	if follow {
		args = []string{"-F", "-n", n, file}
	}
	return a.Attach(ctx, stdin, stdout, stderr, "tail", args...)
}
