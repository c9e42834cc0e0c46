package daemon

import (
	"io"
	"log/slog"
)

// NewLogger returns the daemon's logger: one line per event in slog's text format, at level
// (debug, info, warn or error; anything else is info).
func NewLogger(w io.Writer, level string) *slog.Logger {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		l = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l}))
}
