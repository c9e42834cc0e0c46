package daemon

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"tfd/compute"
	"tfd/daemon/api"
	"tfd/daemon/config"
	"tfd/daemon/metrics"
	"tfd/daemon/status"
	"tfd/engine"
)

// How settings apply on reload, by key or by section (a prefix ending in a dot). server.listen
// and model.backend wait for a restart (keepRestartKeys); model.name serves the same model under
// a new id; the rest is routing (sampling, drafts, API keys, stall timeout, log level, shutdown
// timeout).
var (
	// modelKeys need the weights loaded again (sessions.kv_cache: a pool of another dtype, whose
	// model has another identity).
	modelKeys = []string{"model.path", "model.context", "model.quantize", "sessions.kv_cache"}
	// planKeys change the memory plan and so the sessions and the prompt cache's size.
	planKeys = []string{"sessions.", "memory.", "model.path", "model.context", "model.quantize", "prompt_cache.gib"}
	// spillKeys change the prompt cache's spill folder.
	spillKeys = []string{"prompt_cache.spill_dir", "prompt_cache.spill_gib"}
)

// reloadReport collects what one reload did, for its log line.
type reloadReport struct {
	changed, applied, waits []string
}

func (r *reloadReport) apply(format string, args ...any) {
	r.applied = append(r.applied, fmt.Sprintf(format, args...))
}

// reload reads the config from all its layers again, and the API keys file, and applies what
// changed. An invalid config or keys file is refused whole, with its reasons in one log line,
// and the running config and keys stay. It runs on the watcher's goroutine, so reloads never
// overlap. Before it reads the keys file the new config names, it calls watchKeys with that
// file (if set), so that the watcher sees an edit made to it from the moment it is read: one
// made between the keys going into force and the watch moving to their file would otherwise be
// missed, and the revoked key would keep working.
func (s *server) reload(ctx context.Context, watchKeys func(keysFile string)) {
	eff, err := config.Load(s.src)
	if err != nil {
		s.finishReload(metrics.ReloadInvalid, "refused, the running config stays: "+oneLine(err), nil)
		return
	}
	if f := eff.Config.Server.APIKeysFile; f != "" && watchKeys != nil {
		watchKeys(f)
	}
	routing, err := readRouting(eff.Config) // the keys file, read once for the whole reload
	if err != nil {
		s.finishReload(metrics.ReloadInvalid, "refused, the running config stays: "+oneLine(err), nil)
		return
	}
	s.mu.Lock()
	old, cur, closed, oldKeys := s.cfg, s.cur, s.closed, s.routing.APIKeys
	s.mu.Unlock()
	if closed || cur == nil {
		return
	}
	changes := config.Diff(old, eff.Config)
	if !slices.Equal(oldKeys, routing.APIKeys) && !touches(changes, "server.api_keys_file") {
		// The same keys file, edited: a key added or revoked.
		changes = append(changes, config.Change{Key: "server.api_keys_file", From: countKeys(oldKeys), To: countKeys(routing.APIKeys) + " (the file was edited)"})
	}
	if len(changes) == 0 {
		s.finishReload(metrics.ReloadUnchanged, "no setting changed", nil)
		return
	}
	r := &reloadReport{}
	for _, c := range changes {
		r.changed = append(r.changed, c.String())
	}
	next := keepRestartKeys(old, eff.Config, changes, r)
	if err := s.applyConfig(ctx, old, next, routing, cur, changes, r); err != nil {
		outcome := metrics.ReloadInvalid
		if _, failed := err.(applyError); failed {
			outcome = metrics.ReloadFailed
		}
		s.finishReload(outcome, "refused, the running config stays: "+oneLine(err), r)
		return
	}
	s.mu.Lock()
	s.cfg, s.file = next, eff.File
	s.gen++
	s.pending = r.waits
	gen, in := s.gen, s.cur
	s.mu.Unlock()
	s.metrics.SetPlan(in.plan, gen)
	s.finishReload(metrics.ReloadApplied, "", r)
}

// applyError marks a reload that was valid but failed to apply (a model that did not load).
type applyError struct{ error }

// applyConfig puts next, with routing read from it, in force over old: first everything that can
// refuse (the memory plan), then the sessions or the model, then the routing.
func (s *server) applyConfig(ctx context.Context, old, next config.Config, routing api.Routing, cur *instance, changes []config.Change, r *reloadReport) error {
	var plan engine.Plan
	if touches(changes, planKeys...) {
		var err error
		if plan, err = PlanConfig(next, cur.backend); err != nil {
			return err
		}
	}
	loaded := false
	switch {
	case touches(changes, planKeys...) && needsModelLoad(changes, plan, cur):
		if err := s.switchModel(ctx, next, plan, routing, cur, r); err != nil {
			return applyError{err}
		}
		loaded = true // the new instance has next's name
	case touches(changes, planKeys...):
		if err := s.reconfigure(next, plan, cur, r); err != nil {
			return applyError{err}
		}
	}
	if !loaded && touches(changes, spillKeys...) {
		if err := s.respill(old, next, cur, r); err != nil {
			return applyError{err}
		}
	}
	if !loaded && touches(changes, "model.name") {
		s.rename(next, cur, routing, r)
	}
	s.applyRouting(old, next, routing, changes, r)
	return nil
}

// needsModelLoad reports whether plan needs the weights loaded again: a new model or context,
// sessions that do not fit the KV pool the current model was loaded with (or, for a model that
// keeps its sliding layers in rings, more sessions than it has rings), or a prompt cache that
// does not fit under the limit beside that pool (which keeps its memory until the model loads
// again). A hybrid model is loaded again for any other layout: it keeps DeltaNet states for as
// many sessions as its layout had, and while replies finish in the old layout's sessions, a round
// could hold more sessions than that.
func needsModelLoad(changes []config.Change, plan engine.Plan, cur *instance) bool {
	pool := int64(cur.model.Slots())*plan.KVPerToken + int64(cur.model.Rings())*plan.RingPerSession + cur.plan.States
	return touches(changes, modelKeys...) || plan.Context != cur.plan.Context || plan.Slots() > cur.model.Slots() ||
		plan.RingPerSession > 0 && len(plan.Layout) > cur.model.Rings() ||
		plan.StatePerSession > 0 && !slices.Equal(plan.Layout, cur.plan.Layout) ||
		pool+plan.Cache > plan.Limit-plan.Weights-plan.Scratch-plan.Margin
}

// reconfigure gives the current host the plan's sessions: new admissions use them, running
// streams finish where they are.
func (s *server) reconfigure(next config.Config, plan engine.Plan, cur *instance, r *reloadReport) error {
	s.mu.Lock()
	kept := cur.plan
	cur.plan.Layout, cur.plan.Parallel, cur.plan.Notes = plan.Layout, plan.Parallel, plan.Notes
	cur.plan.Cache, cur.plan.CacheFrom, cur.plan.KV, cur.plan.Left = plan.Cache, plan.CacheFrom, plan.KV, plan.Left
	opts := cur.sharedOptions(next)
	s.mu.Unlock()
	if err := cur.host.Reconfigure(opts); err != nil {
		s.mu.Lock()
		cur.plan = kept
		s.mu.Unlock()
		return fmt.Errorf("daemon: reconfigure the sessions: %w", err)
	}
	r.apply("sessions %s, grow %d, queue %d for new requests (running replies finish where they are); prompt cache %s",
		plan.LayoutString(), next.Sessions.Grow, next.Sessions.Queue, engine.FormatBytes(plan.Cache))
	return nil
}

// rename serves the current model under next's model.name: a new Handler on the same host.
func (s *server) rename(next config.Config, cur *instance, routing api.Routing, r *reloadReport) {
	m := cur.served
	m.Name = modelName(next.Model, cur)
	h := newFront(api.NewHandler(m, s.handlerOptions(routing)))
	s.mu.Lock()
	cur.served, cur.handler = m, h
	s.mu.Unlock()
	old := s.http.swap(h)
	go drain(old) // nothing to free: the host and model stay
	r.apply("model.name: served as %q", m.Name)
}

// modelName is the id a model is served under: model.name, or the folder's (or bundled) name.
func modelName(mc config.ModelConfig, cur *instance) string {
	if mc.Name != "" {
		return mc.Name
	}
	if mc.Path != "" {
		return filepath.Base(filepath.Clean(mc.Path))
	}
	return ModelSource(mc).Name
}

// applyRouting puts the settings that need no new model in force.
func (s *server) applyRouting(old, next config.Config, routing api.Routing, changes []config.Change, r *reloadReport) {
	s.mu.Lock()
	s.routing = routing
	cur := s.cur
	s.mu.Unlock()
	h := cur.handler
	if touches(changes, "residency.") {
		cur.host.SetKeepWarm(cur.keepWarm(next.Residency), next.Residency.Tick)
		r.apply("keep-warm window %s, a tick every %s", cur.keepWarm(next.Residency), next.Residency.Tick)
	}
	if _, resident := cur.backend.(compute.Resident); resident && old.Residency.Enabled != next.Residency.Enabled {
		// The residency set is made with the buffers it holds, as the model loads.
		r.waits = append(r.waits, "residency.enabled (applies when the model next loads: tfd restart)")
	}
	if touches(changes, "sampling.", "server.api_keys_file", "server.stall_timeout", "drafts.") {
		h.SetRouting(routing)
		r.apply("sampling defaults, drafts, API keys and the stall timeout for new requests")
	}
	if old.Log.Level != next.Log.Level && s.opts.Level != nil {
		s.opts.Level.Set(logLevel(next.Log.Level))
		r.apply("log.level %s", next.Log.Level)
	}
	if old.Server.ShutdownTimeout != next.Server.ShutdownTimeout {
		r.apply("server.shutdown_timeout %s", next.Server.ShutdownTimeout)
	}
}

// keepRestartKeys returns next with the settings that need a restart kept at their old values,
// noting each as waiting.
func keepRestartKeys(old, next config.Config, changes []config.Change, r *reloadReport) config.Config {
	for _, c := range changes {
		switch c.Key {
		case "server.listen":
			next.Server.Listen = old.Server.Listen
		case "model.backend":
			next.Model.Backend = old.Model.Backend
		default:
			continue
		}
		r.waits = append(r.waits, c.Key+" (restart tfd: tfd restart)")
	}
	return next
}

// finishReload logs the reload in one line and counts it.
func (s *server) finishReload(outcome, why string, r *reloadReport) {
	s.metrics.ObserveReload(outcome)
	attrs := []any{"outcome", outcome}
	if r != nil {
		attrs = append(attrs, "changed", strings.Join(r.changed, "; "))
		if len(r.applied) > 0 && outcome == metrics.ReloadApplied {
			attrs = append(attrs, "applied", strings.Join(r.applied, "; "))
		}
		if len(r.waits) > 0 && outcome == metrics.ReloadApplied {
			attrs = append(attrs, "waits", strings.Join(r.waits, "; "))
		}
	}
	if why != "" {
		attrs = append(attrs, "why", why)
	}
	s.mu.Lock()
	s.lastReload = status.Reload{At: time.Now(), Outcome: outcome, Summary: why}
	gen := s.gen
	s.mu.Unlock()
	attrs = append(attrs, "generation", gen)
	if outcome == metrics.ReloadInvalid || outcome == metrics.ReloadFailed {
		s.logger.Warn("config reload", attrs...)
		return
	}
	s.logger.Info("config reload", attrs...)
}

// touches reports whether any change's key equals one of keys or starts with one that ends in
// a dot (a section).
func touches(changes []config.Change, keys ...string) bool {
	for _, c := range changes {
		for _, k := range keys {
			if c.Key == k || (strings.HasSuffix(k, ".") && strings.HasPrefix(c.Key, k)) {
				return true
			}
		}
	}
	return false
}

// countKeys says how many keys there are, for the reload's log line (never the keys themselves).
func countKeys(keys []string) string {
	if len(keys) == 1 {
		return "1 key"
	}
	return fmt.Sprintf("%d keys", len(keys))
}

// oneLine joins a multi-line error (a config error lists every problem) into one line.
func oneLine(err error) string {
	return strings.ReplaceAll(err.Error(), "\n", "; ")
}
