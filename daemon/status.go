package daemon

import (
	"os"
	"strings"

	"tfd/batch"
	"tfd/daemon/status"
	"tfd/engine"
)

// planReport is p as the status report shows it.
func planReport(p engine.Plan) status.Plan {
	return status.Plan{LimitBytes: p.Limit, WeightsBytes: p.Weights, ScratchBytes: p.Scratch, MarginBytes: p.Margin,
		CacheBytes: p.Cache, SessionsBytes: p.KV, LeftBytes: p.Left, Context: p.Context, Layout: p.LayoutString(),
		KVCache: strings.ToLower(p.KVCache.String()), Notes: p.Notes, Text: p.String()}
}

// statusReport builds the status report from the state in force.
func (s *server) statusReport() status.Report {
	var rep status.Report
	rep.Status, rep.PID, rep.Started = "serving", os.Getpid(), s.started
	s.mu.Lock()
	in := s.cur
	rep.Config.File, rep.Config.Generation, rep.Config.LastReload = s.file, s.gen, s.lastReload
	rep.Config.Waiting = s.pending
	rep.Host.Grow, rep.Host.Queue = s.cfg.Sessions.Grow, s.cfg.Sessions.Queue
	if in != nil {
		rep.Model, rep.Backend = in.served.Name, in.backend.Name()
		rep.Plan = planReport(in.plan)
	}
	s.mu.Unlock()
	if in == nil {
		rep.Status = "switching"
		return rep
	}
	st := in.stats()
	rep.Host.Layout, rep.Host.Retiring = batch.Layout(st.Layout).String(), batch.Layout(st.Retiring).String()
	rep.Host.Sessions, rep.Host.SessionsInUse, rep.Host.Active, rep.Host.Waiting = st.Sessions, st.SessionsInUse, st.Active, st.Waiting
	rep.PromptCache = s.cacheReport()
	return rep
}
