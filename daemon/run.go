package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"sync"
	"time"

	"tfd/compute"
	"tfd/daemon/api"
	"tfd/daemon/config"
	"tfd/daemon/metrics"
	"tfd/daemon/status"
	"tfd/engine"
	"tfd/scheduler"
)

// RunOptions are what Run needs besides the config.
type RunOptions struct {
	// Sources are the layers the config was built from; a reload reads them all again, and
	// Sources.File is the file watched.
	Sources config.Sources
	// Logger receives one line per event.
	Logger *slog.Logger
	// Level, if set, is Logger's level: Run sets it from log.level at start and on every reload.
	Level *slog.LevelVar
	// Report receives the memory plan at startup as one readable block; nil: the log only.
	Report io.Writer
	// Debounce is how long the config file must be quiet before a reload; 0: 200 ms.
	Debounce time.Duration
	// Ready, if set, is called with the bound address once requests are served. A test hook.
	Ready func(addr net.Addr)
	// BodyTimeout bounds a request body's arrival; 0: api.DefaultBodyTimeout. A test hook.
	BodyTimeout time.Duration
	// Clock is every host's scheduler.SharedOptions.Clock: it times the rounds that price
	// drafts; nil: time.Now. A test hook, for tests that need drafts granted on a busy machine.
	Clock func() time.Time
}

// server is a running daemon: the config in force, the served instance, and the instances being
// retired after a model switch. Reloads run one at a time on the watcher's goroutine; mu guards
// the state they change against the status endpoint, the metrics and the shutdown.
type server struct {
	src     config.Sources
	opts    RunOptions
	logger  *slog.Logger
	metrics *metrics.Metrics
	http    *liveHandler
	started time.Time
	retired sync.WaitGroup // one per instance being retired

	mu         sync.Mutex // guards the fields below
	cfg        config.Config
	file       string
	gen        int
	routing    api.Routing
	cur        *instance   // nil only while a switch is between models
	retiring   []*instance // switched away from; they finish their replies, then are freed
	pending    []string    // changed settings that wait for a restart
	lastReload status.Reload
	closed     bool
}

// Run serves eff until ctx ends: it reads the API keys, binds server.listen, plans memory, loads
// the model (the bundled one when model.path is empty), starts the scheduler host, serves the
// HTTP API and applies edits of the config file as they happen. When ctx ends it stops
// admitting, lets running replies finish for server.shutdown_timeout, cancels the rest, and
// returns nil; when ctx ends during the model load it returns nil without serving; otherwise it
// returns the error that stopped it. The backends it may open are
// those registered with compute (cmd/tfd imports them).
func Run(ctx context.Context, eff *config.Effective, opts RunOptions) error {
	cfg := eff.Config
	s := &server{src: opts.Sources, opts: opts, logger: opts.Logger, started: time.Now(), cfg: cfg, file: eff.File, gen: 1}
	if opts.Level != nil {
		opts.Level.Set(logLevel(cfg.Log.Level))
	}
	for _, w := range eff.Warnings { // a reload reads the same environment: said once, here
		s.logger.Warn("config warning", "warning", w)
	}
	var err error
	if s.routing, err = readRouting(cfg); err != nil {
		return err
	}
	// Bind before loading, so a taken port fails at once rather than after the weights load.
	ln, err := listen(ctx, cfg.Server.Listen)
	if err != nil {
		return fmt.Errorf("daemon: server.listen: %w", err)
	}
	defer ln.Close()
	s.metrics = metrics.New(s.hostStats)
	in, err := startInstance(ctx, cfg, nil, s.handlerOptions(s.routing), s.logger, s.opts.Clock)
	if ctx.Err() != nil {
		// A stop asked for while the model loaded (a service manager's SIGTERM at boot) is not a
		// failure: end as a stop while serving does, so tfd exits 0.
		if in != nil {
			in.close(context.Background())
		}
		s.logger.Info("stopped during the model load", "after", time.Since(s.started).Round(time.Millisecond))
		return nil
	}
	if err != nil {
		return err
	}
	s.cur = in
	if _, ok := in.backend.(compute.Resident); ok {
		s.metrics.WatchResidency(s.residencyStats)
	}
	s.metrics.WatchPromptCache(s.cacheStats)
	s.metrics.SetPlan(in.plan, s.gen)
	s.reportPlan(in)
	s.http = newLiveHandler(in.handler, s.metrics, s.statusReport, s.apiKeys, cmp.Or(s.opts.BodyTimeout, api.DefaultBodyTimeout))

	watchCtx, stopWatch := context.WithCancel(ctx)
	watched, armed := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watched)
		s.watch(watchCtx, sync.OnceFunc(func() { close(armed) }))
	}()
	<-armed
	s.logger.Info("serving", "url", "http://"+ln.Addr().String()+"/v1", "model", in.model.Name(), "backend", in.backend.Name(),
		"context", in.plan.Context, "sessions", in.plan.LayoutString(), "auth", len(s.routing.APIKeys) > 0, "took", in.loadTime.Round(time.Millisecond))
	if opts.Ready != nil {
		opts.Ready(ln.Addr())
	}
	err = serve(ctx, ln, s.http, closerFunc(s.shutdown), s.grace, s.logger)
	stopWatch()
	<-watched
	s.retired.Wait()
	s.mu.Lock()
	last := s.cur
	s.mu.Unlock()
	if last != nil {
		err = errors.Join(err, ignoreCancel(last.close(context.Background())))
	}
	return err
}

// handlerOptions are the options of an instance's API Handler: the ones every instance shares,
// with routing.
func (s *server) handlerOptions(routing api.Routing) api.HandlerOptions {
	return api.HandlerOptions{Routing: routing, Logger: s.logger, Metrics: s.metrics, BodyTimeout: s.opts.BodyTimeout}
}

// reportPlan shows the plan at startup: one block on Report, one line in the log.
func (s *server) reportPlan(in *instance) {
	if s.opts.Report != nil {
		fmt.Fprint(s.opts.Report, in.plan.String())
	}
	s.logger.Info("memory plan", "limit", in.plan.LimitFrom, "sessions", in.plan.LayoutString(), "context", in.plan.Context,
		"prompt_cache", engine.FormatBytes(in.plan.Cache), "serial", in.plan.Serial(), "notes", len(in.plan.Notes))
}

// grace returns server.shutdown_timeout as it is now (a reload may have changed it).
func (s *server) grace() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfg.Server.ShutdownTimeout
}

// apiKeys returns the API keys in force (a reload may have changed them).
func (s *server) apiKeys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.routing.APIKeys
}

// hostStats returns the current host's load; zero between models.
func (s *server) hostStats() scheduler.Stats {
	s.mu.Lock()
	in := s.cur
	s.mu.Unlock()
	return in.stats()
}

// residencyStats reads the residency of the backend in force, zero where it keeps none.
func (s *server) residencyStats() compute.ResidencyStats {
	s.mu.Lock()
	in := s.cur
	s.mu.Unlock()
	if in == nil {
		return compute.ResidencyStats{}
	}
	if r, ok := in.backend.(compute.Resident); ok {
		return r.ResidencyStats()
	}
	return compute.ResidencyStats{}
}

// shutdown stops every host: running replies have until ctx ends, then they are cancelled with
// a terminal event. Requests waiting on a model switch are answered 503. No reload applies after.
func (s *server) shutdown(ctx context.Context) error {
	s.http.close()
	s.mu.Lock()
	s.closed = true
	hosts := slices.Clone(s.retiring)
	if s.cur != nil {
		hosts = append(hosts, s.cur)
	}
	s.mu.Unlock()
	var wg sync.WaitGroup
	errs := make([]error, len(hosts))
	for i, in := range hosts {
		wg.Go(func() { errs[i] = in.host.Close(ctx) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// retire lets in finish the requests it is serving, then frees it.
func (s *server) retire(in *instance) {
	s.retired.Go(func() {
		drain(in.handler)
		if err := in.close(context.Background()); err != nil {
			s.logger.Warn("freeing the previous model", "err", err)
		}
		s.mu.Lock()
		s.retiring = slices.DeleteFunc(s.retiring, func(x *instance) bool { return x == in })
		s.mu.Unlock()
		s.logger.Info("previous model freed", "model", in.model.Name())
	})
}

// closerFunc adapts a function to serve's host parameter.
type closerFunc func(ctx context.Context) error

func (f closerFunc) Close(ctx context.Context) error { return f(ctx) }

func ignoreCancel(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	return err
}

// readRouting reads the settings that apply without reloading weights; reading the keys file
// may fail.
func readRouting(cfg config.Config) (api.Routing, error) {
	r := api.Routing{Sampling: cfg.Sampling, Drafts: cfg.Drafts, StallTimeout: cfg.Server.StallTimeout}
	if cfg.Server.APIKeysFile != "" {
		keys, err := config.ReadAPIKeys(cfg.Server.APIKeysFile)
		if err != nil {
			return api.Routing{}, err
		}
		r.APIKeys = keys
	}
	return r, nil
}

// logLevel reads log.level (validated with the config).
func logLevel(name string) slog.Level {
	var l slog.Level
	if err := l.UnmarshalText([]byte(cmp.Or(name, "info"))); err != nil {
		return slog.LevelInfo
	}
	return l
}
