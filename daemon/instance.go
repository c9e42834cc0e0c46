package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"tfd/batch"
	"tfd/compute"
	"tfd/daemon/api"
	"tfd/daemon/config"
	"tfd/daemon/metrics"
	"tfd/engine"
	"tfd/engine/tokenizer"
	"tfd/grammar"
	"tfd/models"
	"tfd/promptcache"
	"tfd/scheduler"
)

// MaxRows is the rows one forward takes where the backend states no preference (the engine's
// default; engine.ForwardRows chooses a model's), and always the most of them that ask for
// logits: larger forwards are a prompt's alone.
const MaxRows = engine.DefaultMaxRows

// instance is one served model: its backend, its weights and KV pool, the scheduler host that
// runs its requests and the API Handler that feeds the host. A model switch builds a new
// instance and retires the old; each has a backend of its own, so that two models never drive
// one backend from two goroutines (a backend is not safe for concurrent use).
type instance struct {
	mc      config.ModelConfig
	plan    engine.Plan
	backend compute.Backend
	model   *engine.Model
	host    *scheduler.Shared
	// served is what the API sees of the model; handler serves the API for it. A reload that
	// renames the model replaces both, under the server's lock.
	served  api.ServedModel
	handler *front
	// loadTime is how long the weights took to load, for the log.
	loadTime time.Duration
	// clock times the host's rounds (RunOptions.Clock); nil: time.Now.
	clock func() time.Time

	// The prompt cache (cache.go): its memory, its index, and its spill folder (nil: none), the
	// one the config in force names; disk changes on reload under the server's lock.
	store    *engine.BlockStore
	cache    *promptcache.Cache
	identity string
	disk     *promptcache.Disk
}

// ModelSource returns the engine source mc names: the folder, or the bundled model.
func ModelSource(mc config.ModelConfig) engine.Source {
	if mc.Path == "" {
		return engine.Source{FS: models.FS(), Name: cmp.Or(mc.Name, models.Name)}
	}
	return engine.Source{Dir: mc.Path, Name: mc.Name}
}

// kvCacheDType is the dtype sessions.kv_cache names (validated with the config).
func kvCacheDType(name string) compute.DType {
	if name == "f16" {
		return compute.F16
	}
	return compute.F32
}

// PlanConfig computes the memory plan for cfg on backend without loading weights: it reads the
// model's config and tensor headers only.
func PlanConfig(cfg config.Config, backend compute.Backend) (engine.Plan, error) {
	q, err := engine.ParseQuantization(cfg.Model.Quantize)
	if err != nil {
		return engine.Plan{}, err
	}
	mcfg, info, err := engine.Inspect(ModelSource(cfg.Model), q)
	if err != nil {
		return engine.Plan{}, fmt.Errorf("daemon: read the model for its memory plan: %w", err)
	}
	parallel, _, _ := cfg.Sessions.ParallelN() // validated with the config; auto is 0
	layout, _ := batch.ParseLayout(cfg.Sessions.Layout)
	return engine.MakePlan(engine.PlanInput{
		Model:        mcfg,
		WeightBytes:  info.Bytes,
		Quantize:     q,
		DeviceMemory: backend.Memory(),
		WorkingSet:   workingSet(backend),
		LoadLimitGB:  cfg.Memory.LoadLimitGB,
		MarginGB:     cfg.Memory.MarginGB,
		Context:      cfg.Model.Context,
		Parallel:     parallel,
		Grow:         cfg.Sessions.Grow,
		Layout:       layout,
		MaxRows:      engine.ForwardRows(backend, mcfg),
		LogitRows:    MaxRows,

		PromptCacheGiB: cfg.PromptCache.GiB,
		StateDepth:     stateDepth(cfg.Drafts),
		KVCache:        kvCacheDType(cfg.Sessions.KVCache),
	})
}

// stateDepth is how many of its newest positions' DeltaNet states a hybrid model's session keeps:
// the newest token's and the one before it (a kept prompt's last position is fed again), and
// one for each draft a round may verify after the newest token.
func stateDepth(d config.DraftsConfig) int {
	depth := 2
	if d.Enabled {
		mtp, ngram := d.Depths()
		depth += mtp + ngram
	}
	return depth
}

// workingSet is what the GPU may hold at once where it shares the machine's RAM, or 0.
func workingSet(b compute.Backend) uint64 {
	if s, ok := b.(compute.SharedMemory); ok {
		return s.WorkingSet()
	}
	return 0
}

// residentBytes is what a loaded instance holds under the plan's limit.
func (in *instance) residentBytes() int64 {
	return in.plan.Weights + in.plan.Scratch + in.plan.Cache + in.plan.KV + in.plan.States
}

// startInstance opens a backend, plans, loads the model and starts its host, with an API Handler
// made with hopts. plan, when not nil, is a plan already made for cfg on this kind of backend;
// otherwise one is made here. clock is the host's SharedOptions.Clock (RunOptions.Clock).
func startInstance(ctx context.Context, cfg config.Config, plan *engine.Plan, hopts api.HandlerOptions, logger *slog.Logger, clock func() time.Time) (*instance, error) {
	backend, err := OpenBackend(cfg.Model.Backend, logger)
	if err != nil {
		return nil, err
	}
	in := &instance{mc: cfg.Model, backend: backend, clock: clock}
	if plan != nil {
		in.plan = *plan
	} else if in.plan, err = PlanConfig(cfg, backend); err != nil {
		backend.Close()
		return nil, err
	}
	if r, ok := backend.(compute.Resident); ok {
		// Before the first tensor: the backend holds what the model loads within the plan.
		if err := r.SetResidency(in.residency(cfg.Residency), logger); err != nil {
			in.close(context.Background())
			return nil, fmt.Errorf("daemon: residency: %w", err)
		}
	}
	if err := in.load(ctx, cfg, logger, workedAround(logger, hopts.Metrics)); err != nil {
		in.close(context.Background())
		return nil, err
	}
	in.served = servedModel(in.model, in.host)
	in.handler = newFront(api.NewHandler(in.served, hopts))
	return in, nil
}

// load loads the weights with a KV pool of the plan's size and starts the host on its layout.
func (in *instance) load(ctx context.Context, cfg config.Config, logger *slog.Logger, report func(where string, err error)) error {
	start := time.Now()
	m, err := engine.Load(ctx, ModelSource(cfg.Model), in.backend, engine.Options{
		Context: in.plan.Context, MaxRows: in.plan.MaxRows, LogitRows: in.plan.LogitRows, Slots: in.plan.Slots(), Quantize: in.plan.Quantize, KVCache: in.plan.KVCache,
		Sessions: len(in.plan.Layout), StateDepth: in.plan.StateDepth, Progress: loadProgress(logger, start)})
	if err != nil {
		if cfg.Model.Path == "" {
			return fmt.Errorf("daemon: load the bundled model: %w", err)
		}
		return fmt.Errorf("daemon: load model.path %s: %w", cfg.Model.Path, err)
	}
	in.model = m
	if err := in.openCache(cfg, logger); err != nil {
		return err
	}
	opts := in.sharedOptions(cfg)
	opts.Drafter, opts.Chainer, opts.DraftChainer, opts.Warmer, opts.Report, opts.Logger = m.MTP(), m.Chains(), m.DraftChains(), m, report, logger
	opts.States = m.States()
	opts.Cache = in.cache
	opts.Calibrate = true // drafts are priced by this machine's timings from the first round
	opts.Clock = in.clock
	in.host, err = scheduler.NewShared(m, opts)
	if err != nil {
		return fmt.Errorf("daemon: start the host: %w", err)
	}
	in.loadTime = time.Since(start)
	return nil
}

// loadProgress logs a long load's progress, a line every two seconds at most, so that a large
// model's minute of loading does not look like a hang.
func loadProgress(logger *slog.Logger, start time.Time) func(step string, done, total int) {
	last := start
	return func(step string, done, total int) {
		if now := time.Now(); now.Sub(last) >= 2*time.Second && done < total {
			last = now
			logger.Info("loading the model", "step", step, "done", fmt.Sprintf("%d/%d", done, total), "after", now.Sub(start).Round(time.Second))
		}
	}
}

// workedAround returns a host's Report: each error the host worked around is counted in
// tfd_errors_total{where} and logged the first time one of its kind comes, so that a broken draft
// head or tick shows up without flooding the log.
func workedAround(logger *slog.Logger, m *metrics.Metrics) func(where string, err error) {
	var mu sync.Mutex // guards seen
	seen := map[string]bool{}
	return func(where string, err error) {
		m.CountError(where)
		mu.Lock()
		first := !seen[where]
		seen[where] = true
		mu.Unlock()
		if first {
			logger.Warn("worked around an error; more of this kind are only counted in tfd_errors_total", "where", where, "err", err)
		}
	}
}

// sharedOptions are the host's routing for cfg's sessions under the instance's plan.
func (in *instance) sharedOptions(cfg config.Config) scheduler.SharedOptions {
	return scheduler.SharedOptions{Layout: slices.Clone(in.plan.Layout), Grow: cfg.Sessions.Grow, Queue: cfg.Sessions.Queue,
		KeepWarm: in.keepWarm(cfg.Residency), WarmTick: cfg.Residency.Tick, CacheBlocks: in.cacheBlocks(), CacheSpill: in.spill()}
}

// residency is what a backend that holds its memory resident works with: the [residency]
// settings and the plan's limit.
func (in *instance) residency(rc config.ResidencyConfig) compute.ResidencyOptions {
	return compute.ResidencyOptions{Enabled: rc.Enabled, Tick: rc.Tick, KeepWarm: in.keepWarm(rc), Limit: uint64(max(in.plan.Limit, 0))}
}

// keepWarm is how long the host ticks the device after its last forward: residency.keep_warm
// on a GPU, nothing on the CPU (there is nothing to keep warm).
func (in *instance) keepWarm(rc config.ResidencyConfig) time.Duration {
	if !rc.Enabled || in.backend.Name() == "cpu" {
		return 0
	}
	return rc.KeepWarm
}

// close stops the host (running streams have until ctx ends), then frees the model and backend.
func (in *instance) close(ctx context.Context) error {
	var err error
	if in.host != nil {
		err = in.host.Close(ctx) // the host hands the cache's blocks to the spill folder as it ends
	}
	if in.disk != nil {
		err = errors.Join(err, in.disk.Close()) // waits for the blocks to be written
	}
	if in.store != nil {
		in.store.Close()
	}
	if in.model != nil {
		in.model.Close()
	}
	return errors.Join(err, in.backend.Close())
}

// stats returns the host's load; zero while there is no host.
func (in *instance) stats() scheduler.Stats {
	if in == nil || in.host == nil {
		return scheduler.Stats{}
	}
	return in.host.Stats()
}

// backendPreference is the order "auto" tries backends in: GPUs first.
var backendPreference = []string{"metal", "cuda", "cpu"}

// OpenBackend opens the backend model.backend names, or for "auto" the first registered one
// that opens (GPUs first). The caller closes it. `tfd plan` uses it to read the machine's memory.
func OpenBackend(name string, logger *slog.Logger) (compute.Backend, error) {
	if name != "auto" {
		b, err := compute.Open(name)
		if err != nil {
			return nil, fmt.Errorf("daemon: model.backend %q: %w", name, err)
		}
		return b, nil
	}
	registered := compute.Drivers()
	var errs []error
	var why []string // one line for the log: why each backend before the one taken was passed over
	for _, n := range backendPreference {
		if !slices.Contains(registered, n) {
			continue
		}
		b, err := compute.Open(n)
		if err == nil {
			if len(why) > 0 {
				logger.Info("model.backend auto: serving on "+n, "passed_over", strings.Join(why, "; "))
			}
			return b, nil
		}
		errs = append(errs, err)
		why = append(why, strings.ReplaceAll(err.Error(), "\n", " "))
	}
	return nil, fmt.Errorf("daemon: model.backend auto: no backend opened (registered: %v): %w", registered, errors.Join(errs...))
}

// servedModel is what the HTTP API sees of m, served by host.
func servedModel(m *engine.Model, host scheduler.Host) api.ServedModel {
	g := m.Generation()
	sm := api.ServedModel{
		Name:      m.Name(),
		Tokenizer: engineTokenizer{m.Tokenizer()},
		EOS:       g.EOS,
		Context:   m.Context(),
		VocabSize: m.Vocab(),
		Defaults: config.SamplingConfig{Temperature: float64(g.Temperature), TopP: float64(g.TopP),
			TopK: g.TopK, MinP: float64(g.MinP), RepetitionPenalty: float64(g.RepetitionPenalty)},
		Host:    host,
		Created: time.Now().Unix(),
		Vocab:   sync.OnceValue(func() *grammar.Vocab { return grammarVocab(m) }),
	}
	if t := m.Template(); t != nil { // a nil *Template must not become a non-nil interface
		sm.Template = t
	}
	return sm
}

// grammarVocab lays out m's vocabulary for response_format's grammars: each id's bytes, none for
// special tokens (a grammar allows only the stop tokens among them, where a reply may end) and
// for ids past the tokenizer's (a padded embedding).
func grammarVocab(m *engine.Model) *grammar.Vocab {
	tok := m.Tokenizer()
	tokens := make([][]byte, m.Vocab())
	for id := range tokens {
		if !tok.IsSpecial(int32(id)) {
			tokens[id] = tok.TokenBytes(int32(id))
		}
	}
	return grammar.NewVocab(tokens)
}

// engineTokenizer adapts the engine's tokenizer to the API's Tokenizer interface.
type engineTokenizer struct{ *tokenizer.Tokenizer }

func (t engineTokenizer) NewDecoder() api.Decoder { return t.Tokenizer.NewDecoder() }
