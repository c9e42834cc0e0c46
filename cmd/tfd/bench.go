package main

import (
	"context"
	"flag"
	"io"
	"os"
	"os/signal"
	"syscall"

	"tfd/daemon"
	"tfd/daemon/bench"
	"tfd/daemon/bench/replies"
)

// runBench measures the configured model on this machine and prints a table: time to the first
// token, aggregate and per-reply tokens per second, at each concurrency, drafts off and on; the
// replies are greedy unless --temperature sets a sampled draw (with --top-p and --top-k).
func runBench(args []string, stdout, stderr io.Writer) int {
	opts := replies.Options{Streams: []int{1, 4, 16}, Prompt: 256, Tokens: 128}
	conversation := 0
	eff, _, code := loadConfigWith("bench", args, stderr, func(fs *flag.FlagSet) {
		fs.Var(listFlag{&opts.Streams}, "streams", "concurrent replies per run")
		fs.Var(countFlag{&opts.Prompt, 1, "tokens"}, "prompt", "prompt tokens per reply")
		fs.Var(countFlag{&opts.Tokens, 1, "tokens"}, "tokens", "tokens generated per reply")
		fs.Var(countFlag{&conversation, 256, "tokens"}, "conversation", "time a conversation's fourth turn of this many tokens with the prompt cache off, in memory and on disk")
		fs.Var(rangeFlag{&opts.Sampling.Temperature, 0, 2}, "temperature", "sample the replies at this temperature (0: greedy), reply i with seed i")
		fs.Var(rangeFlag{&opts.Sampling.TopP, 0, 1}, "top-p", "with --temperature: keep the most likely tokens whose probability reaches this (0 or 1: all)")
		fs.Var(countFlag{&opts.Sampling.TopK, 0, "tokens"}, "top-k", "with --temperature: keep this many most likely tokens (0: all)")
	})
	if eff == nil {
		return code
	}
	logger, _ := daemon.NewLeveledLogger(stderr)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	run := func() error { return bench.Run(ctx, eff.Config, opts, logger, stdout) }
	if conversation > 0 {
		run = func() error { return bench.RunCache(ctx, eff.Config, conversation, logger, stdout) }
	}
	if err := run(); err != nil {
		report(stderr, err)
		return exitFailure
	}
	return 0
}
