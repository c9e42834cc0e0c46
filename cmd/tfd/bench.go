package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"tfd/daemon"
)

// bench measures the configured model on this machine and prints a table: time to the first
// token, aggregate and per-reply tokens per second, at each concurrency, drafts off and on.
func bench(args []string, stdout, stderr io.Writer) int {
	var streams string
	var opts daemon.BenchOptions
	eff, _, code := loadConfigWith("bench", args, stderr, func(fs *flag.FlagSet) {
		fs.StringVar(&streams, "streams", "1,4,16", "concurrent replies per run")
		fs.IntVar(&opts.Prompt, "prompt", 256, "prompt tokens per reply")
		fs.IntVar(&opts.Tokens, "tokens", 128, "tokens generated per reply")
	})
	if eff == nil {
		return code
	}
	for _, f := range strings.Split(streams, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			fmt.Fprintf(stderr, "tfd bench: --streams %q: want positive whole numbers separated by commas, e.g. 1,4,16\n", streams)
			return exitUsage
		}
		opts.Streams = append(opts.Streams, n)
	}
	logger, _ := daemon.NewLeveledLogger(stderr)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := daemon.Bench(ctx, eff.Config, opts, logger, stdout); err != nil {
		report(stderr, err)
		return exitFailure
	}
	return 0
}
