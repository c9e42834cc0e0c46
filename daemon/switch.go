package daemon

import (
	"context"
	"errors"
	"fmt"

	"tfd/daemon/api"
	"tfd/daemon/config"
	"tfd/engine"
)

// errStopping is returned by a model switch that the shutdown overtook.
var errStopping = errors.New("daemon: tfd is stopping")

// switchModel loads the model next asks for and makes it the served one. When the memory plan
// leaves room for the current instance beside the new one, the new one loads while the current
// one serves, new requests switch over, and the current one is freed once its replies are done.
// Otherwise new requests wait while the current instance finishes its replies and is freed, and
// the new one loads in its place; if that load fails, the previous config's model is loaded
// again so tfd keeps serving.
func (s *server) switchModel(ctx context.Context, next config.Config, plan engine.Plan, routing api.Routing, cur *instance, r *reloadReport) error {
	if plan.Left >= cur.residentBytes() {
		return s.switchBeside(ctx, next, plan, routing, cur, r)
	}
	return s.switchAfterDrain(ctx, next, plan, routing, cur, r)
}

// switchBeside loads next beside cur, then switches.
func (s *server) switchBeside(ctx context.Context, next config.Config, plan engine.Plan, routing api.Routing, cur *instance, r *reloadReport) error {
	in, err := startInstance(ctx, next, &plan, s.handlerOptions(routing), s.logger, s.opts.Clock)
	if err != nil {
		return err
	}
	if !s.install(in, cur) {
		in.close(context.Background())
		return errStopping
	}
	s.retire(cur)
	r.apply("model %s loaded beside the previous one in %s (%s); new requests use it, the previous one finishes its replies and is freed",
		in.model.Name(), in.loadTime.Round(1e6), plan.LayoutString())
	return nil
}

// switchAfterDrain frees cur once its replies are done, then loads next.
func (s *server) switchAfterDrain(ctx context.Context, next config.Config, plan engine.Plan, routing api.Routing, cur *instance, r *reloadReport) error {
	s.logger.Info("config reload: the new model does not fit beside the current one; new requests wait while running replies finish",
		"need", engine.FormatBytes(plan.Weights+plan.Scratch+plan.KV), "left", engine.FormatBytes(plan.Left),
		"current", engine.FormatBytes(cur.residentBytes()))
	drain(s.http.pause())
	s.mu.Lock()
	if s.closed { // the shutdown came while draining: Run frees cur
		s.mu.Unlock()
		return errStopping
	}
	s.cur = nil
	s.mu.Unlock()
	if err := cur.close(context.Background()); err != nil {
		s.logger.Warn("freeing the previous model", "err", err)
	}
	in, err := startInstance(ctx, next, &plan, s.handlerOptions(routing), s.logger, s.opts.Clock)
	if err != nil {
		return s.restore(ctx, cur, routing, err)
	}
	if !s.install(in, nil) {
		in.close(context.Background())
		return errStopping
	}
	r.apply("model %s loaded after the previous one drained, in %s (%s)", in.model.Name(), in.loadTime.Round(1e6), plan.LayoutString())
	return nil
}

// restore loads the previous config's model again after the new one failed to load.
func (s *server) restore(ctx context.Context, prev *instance, routing api.Routing, cause error) error {
	s.mu.Lock()
	cfg := s.cfg
	s.mu.Unlock()
	plan := prev.plan
	back, err := startInstance(ctx, cfg, &plan, s.handlerOptions(routing), s.logger, s.opts.Clock)
	if err != nil {
		s.http.fail(fmt.Errorf("no model is loaded: the new one failed (%v) and the previous one failed to load again (%v): fix the config", cause, err))
		return fmt.Errorf("%w; loading the previous model again also failed: %v", cause, err)
	}
	if !s.install(back, nil) {
		back.close(context.Background())
		return errStopping
	}
	return fmt.Errorf("%w (the previous model is loaded again and serving)", cause)
}

// install makes in the served instance, unless tfd is stopping; with prev set, prev becomes one
// being retired. It reports whether in was installed.
func (s *server) install(in, prev *instance) bool {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return false
	}
	s.cur = in
	if prev != nil {
		s.retiring = append(s.retiring, prev)
	}
	s.mu.Unlock()
	s.http.swap(in.handler)
	return true
}
