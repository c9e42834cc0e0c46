package service

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
)

// CommandRunner runs a command of the system's (launchctl, systemctl, dscl, chown) and returns
// its combined output; a non-zero exit is an error that carries the output.
type CommandRunner interface {
	Run(ctx context.Context, name string, args ...string) (string, error)
}

// An Attacher runs a command wired to the caller's own streams until it ends or ctx is done:
// `tfd logs` hands the terminal to journalctl -f or tail -F. A CommandRunner that can do so
// implements it; ExecRunner does.
type Attacher interface {
	Attach(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer, name string, args ...string) error
}

// ExecRunner runs commands with os/exec.
type ExecRunner struct{}

// Run implements CommandRunner.
func (ExecRunner) Run(ctx context.Context, name string, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return string(out), nil
}

// Attach implements Attacher. When ctx ends (tfd was interrupted) the command is asked to stop
// as Ctrl-C would ask it. An end by Ctrl-C is no error: the terminal sends SIGINT to the command
// and to tfd at once, so the command may end before ctx hears of it.
func (ExecRunner) Attach(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	err := cmd.Run()
	if err == nil || ctx.Err() != nil || interrupted(err) {
		return nil
	}
	return fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
}

// interrupted reports whether err is a command's end by SIGINT, or by the exit status 130 that
// programs which catch it give.
func interrupted(err error) bool {
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		return false
	}
	ws, ok := exit.Sys().(interface {
		Signaled() bool
		Signal() syscall.Signal
	})
	return exit.ExitCode() == 130 || (ok && ws.Signaled() && ws.Signal() == syscall.SIGINT)
}
