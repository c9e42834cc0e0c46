package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"tfd/daemon/bench/turns"
	"tfd/daemon/config"
)

// cacheRuns is how many times `tfd bench --conversation` times each case; it prints the median.
const cacheRuns = 3

// RunCache loads cfg's model with one session as long as a conversation of about tokens tokens,
// then times the first token of the conversation's fourth turn with the prompt cache off, from
// its memory, and from its spill folder after a restart (package turns), and writes a table.
func RunCache(ctx context.Context, cfg config.Config, tokens int, logger *slog.Logger, out io.Writer) error {
	cfg.Sessions.Layout, cfg.Sessions.Grow = fmt.Sprint(turns.Session(tokens)), 32
	m, backend, plan, err := load(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer backend.Close()
	defer m.Close()
	results, err := turns.Run(ctx, m, plan.Layout, tokens, cacheRuns, logger)
	if err != nil {
		return err
	}
	return turns.Write(out, m.Name(), backend.Name(), tokens, cacheRuns, results)
}
