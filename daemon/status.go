package daemon

import (
	"os"
	"time"

	"tfd/batch"
	"tfd/engine"
)

// statusPath is the daemon's status endpoint. Like /metrics it needs an API key when keys are
// set: the config file, the load and the memory plan are not for whoever reaches the port.
const statusPath = "/v1/tfd/status"

// StatusReport is the answer of GET /v1/tfd/status, and what `tfd status` prints.
type StatusReport struct {
	// Status is "serving", or "switching" while a model switch has no model in force.
	Status  string    `json:"status"`
	PID     int       `json:"pid"`
	Started time.Time `json:"started"`
	Model   string    `json:"model,omitempty"`
	Backend string    `json:"backend,omitempty"`
	Config  struct {
		File       string       `json:"file"`
		Generation int          `json:"generation"` // 1 at start, +1 for each reload applied
		LastReload reloadRecord `json:"last_reload"`
		Waiting    []string     `json:"waiting_for_restart,omitempty"`
	} `json:"config"`
	Host struct {
		Layout string `json:"layout"`
		// Retiring is the part of an earlier layout that running replies still hold while a
		// sessions edit takes effect; empty once it has.
		Retiring      string `json:"retiring_layout,omitempty"`
		Sessions      int    `json:"sessions"`
		SessionsInUse int    `json:"sessions_in_use"`
		Active        int    `json:"active"`
		Waiting       int    `json:"waiting"`
		Grow          int    `json:"grow"`
		Queue         int    `json:"queue"`
	} `json:"host"`
	Plan PlanReport `json:"plan"`
}

// PlanReport is a memory plan in the status report: its figures in bytes and its text.
type PlanReport struct {
	LimitBytes    int64    `json:"limit_bytes"`
	WeightsBytes  int64    `json:"weights_bytes"`
	ScratchBytes  int64    `json:"scratch_bytes"`
	MarginBytes   int64    `json:"margin_bytes"`
	SessionsBytes int64    `json:"sessions_bytes"`
	LeftBytes     int64    `json:"left_bytes"`
	Context       int      `json:"context"`
	Layout        string   `json:"layout"`
	Notes         []string `json:"notes,omitempty"`
	Text          string   `json:"text"`
}

func planReport(p engine.Plan) PlanReport {
	return PlanReport{LimitBytes: p.Limit, WeightsBytes: p.Weights, ScratchBytes: p.Scratch, MarginBytes: p.Margin,
		SessionsBytes: p.KV, LeftBytes: p.Left, Context: p.Context, Layout: p.LayoutString(), Notes: p.Notes, Text: p.String()}
}

// statusReport builds the status report from the state in force.
func (s *server) statusReport() StatusReport {
	var rep StatusReport
	rep.Status, rep.PID, rep.Started = "serving", os.Getpid(), s.started
	s.mu.Lock()
	in := s.cur
	rep.Config.File, rep.Config.Generation, rep.Config.LastReload = s.file, s.gen, s.lastReload
	rep.Config.Waiting = s.pending
	rep.Host.Grow, rep.Host.Queue = s.cfg.Sessions.Grow, s.cfg.Sessions.Queue
	if in != nil {
		rep.Model, rep.Backend = in.handler.model.Name, in.backend.Name()
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
	return rep
}
