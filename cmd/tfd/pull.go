package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"tfd/daemon"
	"tfd/daemon/service"
	"tfd/engine"
	"tfd/hub"
)

// pull fetches a model from the Hugging Face hub into the models folder and says how to serve
// it: tfd pull [flags] REPO[:FILE]. Ctrl-C stops it and keeps what arrived for the next pull.
func pull(args []string, stdout, stderr io.Writer) int {
	var dir, revision string
	var operands []string
	eff, _, code := loadConfigArgs("pull", args, stderr, func(fs *flag.FlagSet) {
		fs.StringVar(&dir, "dir", "", "the models folder (model.dir)")
		fs.StringVar(&revision, "revision", hub.DefaultRevision, "a branch, tag or commit of the repo")
	}, &operands)
	if eff == nil {
		return code
	}
	if len(operands) != 1 {
		fmt.Fprintf(stderr, "tfd pull: want one REPO or REPO:FILE, e.g. tfd pull Qwen/Qwen3-0.6B (got %d)\n", len(operands))
		return exitUsage
	}
	ref, err := hub.ParseRef(operands[0])
	if err != nil {
		fmt.Fprintf(stderr, "tfd pull: %v\n", err)
		return exitUsage
	}
	dir, err = filepath.Abs(cmp.Or(dir, eff.Config.Model.Dir, defaultModelsDir()))
	if err != nil {
		report(stderr, err)
		return exitFailure
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := hub.FromEnv(os.Getenv).Pull(ctx, ref, revision, dir, newProgress(stderr))
	if err != nil {
		report(stderr, err)
		if errors.Is(err, fs.ErrPermission) {
			fmt.Fprintf(stderr, "tfd: the models folder %s is not yours to write: run tfd pull with sudo (sudo -E keeps HF_TOKEN), or name another folder with --dir or model.dir\n", dir)
		}
		return exitFailure
	}
	for _, name := range res.Missing {
		fmt.Fprintf(stderr, "tfd: warning: %s has no %s, which tfd needs to serve it\n", ref.Repo, name)
	}
	configFile := cmp.Or(eff.File, service.DefaultConfigPath())
	fetched := 0
	for _, f := range res.Files {
		if f.Fetched {
			fetched++
		}
	}
	fmt.Fprintf(stdout, "%s (commit %.12s) is in %s: %d files, %s (%d fetched, %d already there)\n",
		ref, res.Commit, res.Path, len(res.Files), engine.FormatBytes(res.Bytes()), fetched, len(res.Files)-fetched)
	fmt.Fprintf(stdout, "serve it with tfd serve --model %s, or set in %s:\n  [model]\n  path = %s\n",
		res.Path, configFile, strconv.Quote(res.Path))
	return 0
}

// defaultModelsDir is the models folder when neither --dir nor model.dir names one: the
// service's when it is installed or tfd runs as root, else the user's cache; see
// service.Paths.PullModelsDir for why.
func defaultModelsDir() string {
	paths := service.DefaultPaths(runtime.GOOS, runtime.GOARCH, "")
	cache, _ := os.UserCacheDir()
	platform, err := service.PlatformFor(runtime.GOOS)
	if err != nil { // no service here: the user's own folder
		return filepath.Join(cmp.Or(cache, "."), "tfd", "models")
	}
	return paths.PullModelsDir(platform, os.Geteuid() == 0, cache)
}

// newProgress shows a pull's progress on w: a line per file redrawn as it transfers when w is a
// terminal, else one log line per file when it is done.
func newProgress(w io.Writer) hub.Progress {
	if isTerminal(w) {
		return &terminalProgress{w: w, now: time.Now}
	}
	logger, _ := daemon.NewLeveledLogger(w)
	return &logProgress{logger: logger, now: time.Now}
}

// isTerminal reports whether w is a character device: a terminal (or /dev/null, where the
// redrawn lines cost nothing). A dependency on golang.org/x/term would tell the two apart.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}

// transfer is one file's transfer as a Progress hears it.
type transfer struct {
	name             string
	from, have, size int64 // bytes on disk at the start and now, of size (-1: unknown)
	start            time.Time
}

// rate returns the bytes per second of the transfer so far.
func (t *transfer) rate(now time.Time) float64 {
	if s := now.Sub(t.start).Seconds(); s > 0 {
		return float64(t.have-t.from) / s
	}
	return 0
}

// terminalProgress draws one line per file, redrawn in place at most every redraw as bytes
// arrive: the name, the bytes on disk of the size, the share done and the rate.
type terminalProgress struct {
	w     io.Writer
	now   func() time.Time
	t     transfer
	drawn time.Time
}

// redraw is the least time between two drawings of a file's line.
const redraw = 200 * time.Millisecond

func (p *terminalProgress) Present(name string, size int64) {
	fmt.Fprintf(p.w, "%s  %s  already here\n", name, engine.FormatBytes(size))
}

func (p *terminalProgress) Start(name string, have, size int64) {
	p.t = transfer{name: name, from: have, have: have, size: size, start: p.now()}
	p.draw(p.t.start)
}

func (p *terminalProgress) Update(_ string, have int64) {
	p.t.have = have
	if now := p.now(); now.Sub(p.drawn) >= redraw {
		p.draw(now)
	}
}

func (p *terminalProgress) Finish(name string, err error) {
	if p.t.name != name { // failed before its transfer started
		return
	}
	p.draw(p.now())
	if err == nil {
		fmt.Fprint(p.w, "  done")
	}
	fmt.Fprintln(p.w)
	p.t = transfer{}
}

// draw writes the file's line over the one before: \r to its start, ESC [K to clear the rest.
func (p *terminalProgress) draw(now time.Time) {
	p.drawn = now
	t := &p.t
	line := fmt.Sprintf("%s  %s", t.name, engine.FormatBytes(t.have))
	if t.size > 0 {
		line += fmt.Sprintf(" of %s (%d%%)", engine.FormatBytes(t.size), t.have*100/t.size)
	}
	fmt.Fprintf(p.w, "\r%s  %s/s\x1b[K", line, engine.FormatBytes(int64(t.rate(now))))
}

// logProgress logs one line per file when it is done: in place already, or fetched, with its
// bytes and rate. A failure is left to the error the pull returns.
type logProgress struct {
	logger *slog.Logger
	now    func() time.Time
	t      transfer
}

func (p *logProgress) Present(name string, size int64) {
	p.logger.Info("in place already", "file", name, "bytes", size)
}

func (p *logProgress) Start(name string, have, size int64) {
	p.t = transfer{name: name, from: have, have: have, size: size, start: p.now()}
}

func (p *logProgress) Update(_ string, have int64) { p.t.have = have }

func (p *logProgress) Finish(name string, err error) {
	if err != nil || p.t.name != name {
		return
	}
	now := p.now()
	p.logger.Info("fetched", "file", name, "bytes", p.t.have, "resumed_from", p.t.from,
		"seconds", fmt.Sprintf("%.1f", now.Sub(p.t.start).Seconds()), "rate", engine.FormatBytes(int64(p.t.rate(now)))+"/s")
}
