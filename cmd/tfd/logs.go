package main

import (
	"context"
	"flag"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// logs prints the service's last lines and follows its log until interrupted: tfd logs [-n N]
// [--no-follow]. It needs no root: the log is the admin group's on macOS, and journalctl says
// itself who may read the journal.
func logs(args []string, stdout, stderr io.Writer, newManager managerFunc) int {
	fs := flag.NewFlagSet("tfd logs", flag.ContinueOnError)
	lines := 10
	fs.Var(countFlag{&lines, 0, "lines"}, "n", "lines to print before following")
	noFollow := fs.Bool("no-follow", false, "print the last lines and stop")
	if code, done := parseFlags("logs", fs, args, stderr); done {
		return code
	}
	m, err := newManager("logs", stdout)
	if err != nil {
		report(stderr, err)
		return exitFailure
	}
	// Ctrl-C reaches tail or journalctl from the terminal too; tfd waits for it to end and
	// exits 0, as the one who asked to stop expects.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := m.Logs(ctx, lines, !*noFollow, os.Stdin, stdout, stderr); err != nil {
		report(stderr, err)
		return exitFailure
	}
	return 0
}
