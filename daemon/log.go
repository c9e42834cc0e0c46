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

// NewLogger returns the daemon's logger: one line per event in slog's text format, at level
// (debug, info, warn or error; anything else is info).
func NewLogger(w io.Writer, level string) *slog.Logger {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		l = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l}))
}
