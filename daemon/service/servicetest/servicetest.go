// Package servicetest is test support for tfd's service commands: a command runner that runs
// nothing, recording what it is asked to run and answering from a script, and an HTTP client
// that reaches no daemon. It imports nothing of tfd's, so the service package's own tests use it
// as cmd/tfd's do.
package servicetest

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
)

// Runner is a service.CommandRunner, and an Attacher, that runs nothing. It records each command
// as its line ("systemctl restart tfd.service"); a command whose line starts with a key of Fail
// fails, one whose line starts with a key of Out prints that key's value. Its methods are safe
// for concurrent use; change Fail and Out only while no command runs.
type Runner struct {
	Fail map[string]bool
	Out  map[string]string

	mu   sync.Mutex // guards cmds
	cmds []string
}

// Run records the command and answers it from the script.
func (r *Runner) Run(_ context.Context, name string, args ...string) (string, error) {
	line := strings.Join(append([]string{name}, args...), " ")
	r.mu.Lock()
	r.cmds = append(r.cmds, line)
	r.mu.Unlock()
	for prefix := range r.Fail {
		if strings.HasPrefix(line, prefix) {
			return "", errors.New(line + ": exit status 1")
		}
	}
	for prefix, out := range r.Out {
		if strings.HasPrefix(line, prefix) {
			return out, nil
		}
	}
	return "", nil
}

// Attach records the command as "attach: LINE" and prints to stdout what Run would answer.
func (r *Runner) Attach(ctx context.Context, _ io.Reader, stdout, _ io.Writer, name string, args ...string) error {
	out, err := r.Run(ctx, name, args...)
	r.mu.Lock()
	r.cmds[len(r.cmds)-1] = "attach: " + r.cmds[len(r.cmds)-1]
	r.mu.Unlock()
	io.WriteString(stdout, out)
	return err
}

// Take returns the lines of the commands run since the last Take, and forgets them.
func (r *Runner) Take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	cmds := r.cmds
	r.cmds = nil
	return cmds
}

// NoDaemon returns a client for a Manager that reaches no daemon at all, so that a tfd serving on
// the machine that runs the tests does not change what status says.
func NoDaemon() *http.Client { return &http.Client{Transport: noDaemon{}} }

type noDaemon struct{}

func (noDaemon) RoundTrip(*http.Request) (*http.Response, error) {
	return nil, errors.New("connection refused (test)")
}
