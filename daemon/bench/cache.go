package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"tfd/daemon"
	"tfd/daemon/bench/turns"
	"tfd/daemon/config"
	"tfd/engine"
)

// cacheRuns is how many times `tfd bench --conversation` times each case; it prints the median.
const cacheRuns = 3

// RunCache loads cfg's model with one session as long as a conversation of about tokens tokens,
// then times the first token of the conversation's fourth turn with the prompt cache off, from
// its memory, and from its spill folder after a restart (package turns), and writes a table.
func RunCache(ctx context.Context, cfg config.Config, tokens int, logger *slog.Logger, out io.Writer) error {
	session := turns.Session(tokens)
	cfg.Sessions.Layout, cfg.Sessions.Grow = fmt.Sprint(session), 32
	backend, err := daemon.OpenBackend(cfg.Model.Backend, logger)
	if err != nil {
		return err
	}
	defer backend.Close()
	plan, err := daemon.PlanConfig(cfg, backend)
	if err != nil {
		return fmt.Errorf("bench: one session of %d tokens: %w", session, err)
	}
	logger.Info("bench: loading the model", "backend", backend.Name(), "session", session)
	m, err := engine.Load(ctx, daemon.ModelSource(cfg.Model), backend, engine.Options{Context: plan.Context, MaxRows: daemon.MaxRows, Slots: plan.Slots()})
	if err != nil {
		return fmt.Errorf("bench: load the model: %w", err)
	}
	defer m.Close()
	results, err := turns.Run(ctx, m, plan.Layout, tokens, cacheRuns, logger)
	if err != nil {
		return err
	}
	return turns.Write(out, m.Name(), backend.Name(), tokens, cacheRuns, results)
}
