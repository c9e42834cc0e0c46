package daemon

import (
	"io"
	"log/slog"
)

// NewLeveledLogger returns the daemon's logger, one line per event in slog's text format, and
// the variable that sets its level: Run sets it from log.level, at start and on each reload.
func NewLeveledLogger(w io.Writer) (*slog.Logger, *slog.LevelVar) {
	level := new(slog.LevelVar)
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level})), level
}
