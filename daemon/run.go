package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"time"

	"tfd/compute"
	"tfd/engine"
	"tfd/engine/tokenizer"
	"tfd/models"
	"tfd/scheduler"
)

// Run serves cfg until ctx ends: it reads the API keys, binds server.listen, opens the backend,
// loads the model (the bundled one when model.path is empty), starts the scheduler host and
// serves the HTTP API. It returns nil after a clean shutdown, or the error that stopped it. The
// backends it may open are those registered with compute (cmd/tfd imports them).
func Run(ctx context.Context, cfg Config, logger *slog.Logger) error {
	var keys []string
	if cfg.Server.APIKeysFile != "" {
		var err error
		if keys, err = ReadAPIKeys(cfg.Server.APIKeysFile); err != nil {
			return err
		}
	}
	// Bind before loading, so a taken port fails at once rather than after the weights load.
	ln, err := net.Listen("tcp", cfg.Server.Listen)
	if err != nil {
		return fmt.Errorf("daemon: server.listen: %w", err)
	}
	defer ln.Close()

	backend, err := openBackend(cfg.Model.Backend, logger)
	if err != nil {
		return err
	}
	defer backend.Close()
	m, err := loadModel(ctx, cfg.Model, backend, logger)
	if err != nil {
		return err
	}
	defer m.Close()

	host := newHost(m, cfg.Sessions, logger) // Serve closes it
	handler := NewHandler(servedModel(m, cfg.Model, host), HandlerOptions{Sampling: cfg.Sampling, APIKeys: keys, Logger: logger})
	logger.Info("serving", "url", "http://"+ln.Addr().String()+"/v1", "model", m.Name(), "backend", backend.Name(),
		"context", m.Context(), "auth", len(keys) > 0)
	return Serve(ctx, ln, handler, host, cfg.Server.ShutdownTimeout, logger)
}

// backendPreference is the order "auto" tries backends in: GPUs first.
var backendPreference = []string{"metal", "cuda", "cpu"}

// openBackend opens the named backend, or for "auto" the first registered one that opens.
func openBackend(name string, logger *slog.Logger) (compute.Backend, error) {
	if name != "auto" {
		b, err := compute.Open(name)
		if err != nil {
			return nil, fmt.Errorf("daemon: model.backend %q: %w", name, err)
		}
		return b, nil
	}
	registered := compute.Drivers()
	var errs []error
	for _, n := range backendPreference {
		if !slices.Contains(registered, n) {
			continue
		}
		b, err := compute.Open(n)
		if err == nil {
			return b, nil
		}
		logger.Info("backend unavailable, trying the next", "backend", n, "err", err)
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("daemon: model.backend auto: no backend opened (registered: %v): %w", registered, errors.Join(errs...))
}

// loadModel loads the configured model folder, or the bundled model when mc.Path is empty.
func loadModel(ctx context.Context, mc ModelConfig, backend compute.Backend, logger *slog.Logger) (*engine.Model, error) {
	src := engine.Source{Dir: mc.Path, Name: mc.Name}
	if mc.Path == "" {
		src = engine.Source{FS: models.FS(), Name: cmp.Or(mc.Name, models.Name)}
	}
	start := time.Now()
	m, err := engine.Load(ctx, src, backend, engine.Options{Context: mc.Context})
	if err != nil {
		if mc.Path == "" {
			return nil, fmt.Errorf("daemon: load the bundled model: %w", err)
		}
		return nil, fmt.Errorf("daemon: load model.path %s: %w", mc.Path, err)
	}
	logger.Info("model loaded", "model", m.Name(), "path", mc.Path, "context", m.Context(), "took", time.Since(start).Round(time.Millisecond))
	return m, nil
}

// newHost starts the scheduler host that sessions.parallel asks for.
func newHost(m *engine.Model, sc SessionsConfig, logger *slog.Logger) scheduler.Host {
	n, auto, _ := sc.ParallelN() // validated with the config
	if auto || n > 1 {
		logger.Info("one reply at a time: the shared host is not built yet", "sessions.parallel", sc.Parallel)
	}
	return scheduler.NewSerial(m, scheduler.SerialOptions{})
}

// servedModel is what the HTTP layer sees of m.
func servedModel(m *engine.Model, mc ModelConfig, host scheduler.Host) Model {
	g := m.Generation()
	sm := Model{
		Name:      m.Name(),
		Tokenizer: engineTokenizer{m.Tokenizer()},
		EOS:       g.EOS,
		Context:   m.Context(),
		Defaults: SamplingConfig{Temperature: float64(g.Temperature), TopP: float64(g.TopP),
			TopK: g.TopK, MinP: float64(g.MinP)},
		Host:    host,
		Created: time.Now().Unix(),
	}
	if t := m.Template(); t != nil { // a nil *Template must not become a non-nil interface
		sm.Template = t
	}
	return sm
}

// engineTokenizer adapts the engine's tokenizer to the Tokenizer interface.
type engineTokenizer struct{ *tokenizer.Tokenizer }

func (t engineTokenizer) NewDecoder() Decoder { return t.Tokenizer.NewDecoder() }
