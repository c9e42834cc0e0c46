package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"tfd/daemon"
)

// serve runs the daemon until SIGINT or SIGTERM, then stops gracefully and exits 0. With
// --log-file it logs to that file, and follows it when log rotation moves it away: the
// LaunchDaemon's way, since launchd's own log descriptors would keep writing to the moved file.
func serve(args []string, stderr io.Writer) int {
	var logFile string
	eff, src, code := loadConfigWith("serve", args, stderr, func(fs *flag.FlagSet) {
		fs.StringVar(&logFile, "log-file", "", "log to this file, following its rotation")
	})
	if eff == nil {
		return code
	}
	if logFile != "" {
		f, err := daemon.OpenLogFile(logFile, true)
		if err != nil {
			report(stderr, err)
			return exitFailure
		}
		defer f.Close()
		stderr = f
	}
	logger, level := daemon.NewLeveledLogger(stderr)
	logger.Info("starting", "version", version(), "config", cmp.Or(eff.File, "(none)"), "pid", os.Getpid())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := daemon.Run(ctx, eff, daemon.RunOptions{Sources: src, Logger: logger, Level: level, Report: stderr})
	if err != nil {
		report(stderr, err)
		return exitFailure
	}
	logger.Info("stopped")
	return 0
}

// printPlan prints the memory plan the config gives on this machine. It opens the backend to
// read its memory and reads the model's config and tensor headers; it loads no weights.
func printPlan(args []string, stdout, stderr io.Writer) int {
	eff, _, code := loadConfig("plan", args, stderr)
	if eff == nil {
		return code
	}
	logger, _ := daemon.NewLeveledLogger(stderr)
	backend, err := daemon.OpenBackend(eff.Config.Model.Backend, logger)
	if err != nil {
		report(stderr, err)
		return exitFailure
	}
	defer backend.Close()
	plan, err := daemon.PlanConfig(eff.Config, backend)
	if err != nil {
		report(stderr, err)
		return exitFailure
	}
	model := cmp.Or(eff.Config.Model.Path, "the bundled model")
	fmt.Fprintf(stdout, "%s on %s (%s of memory), config %s\n", model, backend.Name(),
		formatMemory(backend.Memory()), cmp.Or(eff.File, "(none)"))
	fmt.Fprint(stdout, plan.String())
	return 0
}
