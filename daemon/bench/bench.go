// Package bench owns `tfd bench`: it loads the configured model as the daemon does and times
// concurrent replies on it (package replies) or a conversation's fourth turn with the prompt
// cache off, in memory and on disk (package turns).
package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"tfd/compute"
	"tfd/daemon"
	"tfd/daemon/bench/replies"
	"tfd/daemon/config"
	"tfd/engine"
	"tfd/scheduler"
)

// Run loads cfg's model on cfg's backend with one session per stream of the largest scenario,
// then runs each scenario twice, drafts off and on (the config's: MTP chains up to
// drafts.mtp_max and n-gram copies if on), as package replies does. It writes one progress line
// per scenario to logger and a table to out.
func Run(ctx context.Context, cfg config.Config, opts replies.Options, logger *slog.Logger, out io.Writer) error {
	if err := opts.Check(); err != nil {
		return err
	}
	layout := opts.Layout()
	cfg.Sessions.Layout = fmt.Sprintf("%dx%d", layout[0], len(layout))
	cfg.Sessions.Grow = opts.Tokens
	m, backend, plan, err := load(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer backend.Close()
	defer m.Close()
	mtp, ngram := cfg.Drafts.Depths()
	results, err := replies.Run(ctx, m, plan.Layout, opts, scheduler.Drafts{MTP: mtp, NGram: ngram}, func(streams int, drafts bool) {
		logger.Info("bench: running", "streams", streams, "drafts", drafts, "prompt", opts.Prompt, "tokens", opts.Tokens)
	})
	if err != nil {
		return err
	}
	return replies.Write(out, m.Name(), backend.Name(), opts, results)
}

// load opens cfg's backend, plans cfg's sessions on it and loads the model with a KV pool of the
// plan's size. The caller closes the model, then the backend.
func load(ctx context.Context, cfg config.Config, logger *slog.Logger) (*engine.Model, compute.Backend, engine.Plan, error) {
	backend, err := daemon.OpenBackend(cfg.Model.Backend, logger)
	if err != nil {
		return nil, nil, engine.Plan{}, err
	}
	plan, err := daemon.PlanConfig(cfg, backend)
	if err != nil {
		backend.Close()
		return nil, nil, plan, fmt.Errorf("bench: sessions %s: %w", cfg.Sessions.Layout, err)
	}
	logger.Info("bench: loading the model", "backend", backend.Name(), "sessions", plan.LayoutString())
	m, err := engine.Load(ctx, daemon.ModelSource(cfg.Model), backend, engine.Options{Context: plan.Context, MaxRows: plan.MaxRows, LogitRows: plan.LogitRows, Slots: plan.Slots(), Quantize: plan.Quantize,
		KVCache: plan.KVCache, Sessions: len(plan.Layout), StateDepth: plan.StateDepth})
	if err != nil {
		backend.Close()
		return nil, nil, plan, fmt.Errorf("bench: load the model: %w", err)
	}
	return m, backend, plan, nil
}
