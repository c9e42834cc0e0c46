// Package metrics owns tfd's Prometheus metrics, served at GET /metrics: what the API handler
// counts of each completion request, and what the process publishes (config reloads, the
// memory plan in force, errors worked around). Each [Metrics] has a registry of its own.
package metrics

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"tfd/compute"
	"tfd/engine"
	"tfd/promptcache"
	"tfd/scheduler"
)

// Metrics are tfd's Prometheus metrics, served at GET /metrics in the text format. Each Metrics
// has its own registry, so tests and several servers in one process do not collide. A nil
// *Metrics records nothing. Its methods are safe for concurrent use.
type Metrics struct {
	reg              *prometheus.Registry
	requests         *prometheus.CounterVec
	promptTokens     prometheus.Counter
	completionTokens prometheus.Counter
	firstToken       prometheus.Histogram
	perToken         prometheus.Histogram
	reloads          *prometheus.CounterVec
	plan             *prometheus.GaugeVec
	planSessions     prometheus.Gauge
	planContext      prometheus.Gauge
	generation       prometheus.Gauge
	errors           *prometheus.CounterVec
}

// The outcomes a request is counted under in tfd_requests_total.
const (
	outcomeOK          = "ok"
	outcomeClientError = "client_error" // 4xx: the request was wrong
	outcomeCancelled   = "cancelled"    // the client left
	outcomeUnavailable = "unavailable"  // 503: queue full or shutting down
	outcomeError       = "error"        // 5xx, or an error inside a stream
)

// The outcomes a reload is counted under in tfd_config_reloads_total.
const (
	ReloadApplied   = "applied"   // the new config is in force (some settings may wait for a restart)
	ReloadUnchanged = "unchanged" // the file changed but no setting did
	ReloadInvalid   = "invalid"   // refused: the old config keeps serving
	ReloadFailed    = "failed"    // valid, but applying it failed: the old config keeps serving
)

// New returns the metrics, reading the queue and sessions from stats at each scrape.
func New(stats func() scheduler.Stats) *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tfd_requests_total",
			Help: "Completion requests by outcome: ok, client_error, cancelled, unavailable, error."}, []string{"outcome"}),
		promptTokens: prometheus.NewCounter(prometheus.CounterOpts{Name: "tfd_prompt_tokens_total",
			Help: "Prompt tokens of the requests that reached the model."}),
		completionTokens: prometheus.NewCounter(prometheus.CounterOpts{Name: "tfd_completion_tokens_total",
			Help: "Tokens generated."}),
		firstToken: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "tfd_time_to_first_token_seconds",
			Help:    "From the request's arrival to its first generated token.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 14)}), // 10 ms … 82 s
		perToken: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "tfd_time_per_output_token_seconds",
			Help:    "Mean time between a reply's generated tokens after the first.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 12)}), // 1 ms … 2 s
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tfd_config_reloads_total",
			Help: "Config file changes by outcome: applied, unchanged, invalid, failed."}, []string{"outcome"}),
		plan: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "tfd_memory_plan_bytes",
			Help: "The memory plan: limit, weights, scratch, margin, prompt_cache, sessions (KV) and left."}, []string{"part"}),
		planSessions: prometheus.NewGauge(prometheus.GaugeOpts{Name: "tfd_memory_plan_sessions",
			Help: "Sessions in the memory plan."}),
		planContext: prometheus.NewGauge(prometheus.GaugeOpts{Name: "tfd_memory_plan_context_tokens",
			Help: "The longest sequence a session holds."}),
		generation: prometheus.NewGauge(prometheus.GaugeOpts{Name: "tfd_config_generation",
			Help: "How many configs tfd has applied since it started, the first included."}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tfd_errors_total",
			Help: "Errors tfd worked around without failing a request, by where: draft (the MTP head), warm (the keep-warm tick)."}, []string{"where"}),
	}
	gauge := func(name, help string, f func(scheduler.Stats) int) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return float64(f(stats())) })
	}
	m.reg.MustRegister(m.requests, m.promptTokens, m.completionTokens, m.firstToken, m.perToken,
		m.reloads, m.plan, m.planSessions, m.planContext, m.generation, m.errors,
		gauge("tfd_queue_depth", "Streams waiting for a session.", func(s scheduler.Stats) int { return s.Waiting }),
		gauge("tfd_sessions_in_use", "Sessions holding a stream.", func(s scheduler.Stats) int { return s.SessionsInUse }),
		gauge("tfd_sessions", "Sessions in the current layout.", func(s scheduler.Stats) int { return s.Sessions }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tfd_handoffs_total",
			Help: "Streams the lone driver handed to shared rounds when another stream needed the host."},
			func() float64 { return float64(stats().Handoffs) }),
		driverTokens(stats),
		draftTokens(stats),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	for _, o := range []string{outcomeOK, outcomeClientError, outcomeCancelled, outcomeUnavailable, outcomeError} {
		m.requests.WithLabelValues(o) // present at zero from the start, so rates work at once
	}
	for _, o := range []string{ReloadApplied, ReloadUnchanged, ReloadInvalid, ReloadFailed} {
		m.reloads.WithLabelValues(o)
	}
	return m
}

// driverTokens counts generated tokens by who made them: the lone driver or shared rounds.
func driverTokens(stats func() scheduler.Stats) prometheus.Collector {
	return &driverCollector{stats: stats, desc: prometheus.NewDesc("tfd_tokens_total",
		"Tokens generated, by driver: lone (one stream alone on the host) or shared (rounds).", []string{"driver"}, nil)}
}

// driverCollector reads both counts from one Stats snapshot per scrape.
type driverCollector struct {
	stats func() scheduler.Stats
	desc  *prometheus.Desc
}

func (c *driverCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *driverCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.stats()
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(s.LoneTokens), "lone")
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(s.SharedTokens), "shared")
}

// draftTokens counts draft tokens by source, depth and outcome, as the host counts them.
func draftTokens(stats func() scheduler.Stats) prometheus.Collector {
	return &draftCollector{stats: stats, desc: prometheus.NewDesc("tfd_draft_tokens_total",
		"Draft tokens fed to rounds (proposed) and those that equalled the model's own token (accepted), by source "+
			"(mtp: the model's MTP head, ngram: copied from the reply's context) and depth (1: the first draft after the newest token).",
		[]string{"source", "depth", "outcome"}, nil)}
}

// draftCollector reads every count from one Stats snapshot per scrape.
type draftCollector struct {
	stats func() scheduler.Stats
	desc  *prometheus.Desc
}

func (c *draftCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *draftCollector) Collect(ch chan<- prometheus.Metric) {
	for _, d := range c.stats().Drafts {
		depth := strconv.Itoa(d.Depth)
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(d.Proposed), d.Source, depth, "proposed")
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(d.Accepted), d.Source, depth, "accepted")
	}
}

// WatchResidency adds the residency of a backend that holds its memory resident (Metal's
// residency set), read from stats at each scrape: bytes and buffers held, commits and idle ticks.
func (m *Metrics) WatchResidency(stats func() compute.ResidencyStats) {
	if m == nil {
		return
	}
	gauge := func(name, help string, f func(compute.ResidencyStats) uint64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return float64(f(stats())) })
	}
	counter := func(name, help string, f func(compute.ResidencyStats) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(f(stats())) })
	}
	m.reg.MustRegister(
		gauge("tfd_resident_bytes", "Bytes held in the GPU's residency set; 0 when it is off (whole or none).",
			func(s compute.ResidencyStats) uint64 { return s.ResidentBytes }),
		gauge("tfd_resident_buffers", "Buffers held in the GPU's residency set.",
			func(s compute.ResidencyStats) uint64 { return s.ResidentBuffers }),
		counter("tfd_residency_commits_total", "Commits of the residency set: at load, between requests, and turning it off.",
			func(s compute.ResidencyStats) uint64 { return s.Commits }),
		counter("tfd_residency_ticks_total", "Idle ticks whose GPU work completed.",
			func(s compute.ResidencyStats) uint64 { return s.Ticks }),
	)
}

// WatchPromptCache adds the prompt cache's counters, read from stats at each scrape: lookups and
// hits, tokens reused, blocks and bytes in memory, evictions, and the spill folder's bytes, files,
// reads, writes and dropped files.
func (m *Metrics) WatchPromptCache(stats func() (promptcache.Stats, promptcache.DiskStats)) {
	if m == nil {
		return
	}
	gauge := func(name, help string, f func(promptcache.Stats, promptcache.DiskStats) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return f(stats()) })
	}
	counter := func(name, help string, f func(promptcache.Stats, promptcache.DiskStats) float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return f(stats()) })
	}
	m.reg.MustRegister(
		counter("tfd_prompt_cache_lookups_total", "Prompts looked up in the prompt cache as they were admitted.",
			func(s promptcache.Stats, _ promptcache.DiskStats) float64 { return float64(s.Lookups) }),
		counter("tfd_prompt_cache_hits_total", "Lookups that reused at least one block.",
			func(s promptcache.Stats, _ promptcache.DiskStats) float64 { return float64(s.Hits) }),
		counter("tfd_prompt_cache_misses_total", "Lookups that reused nothing.",
			func(s promptcache.Stats, _ promptcache.DiskStats) float64 { return float64(s.Lookups - s.Hits) }),
		counter("tfd_prompt_cache_tokens_reused_total", "Prompt tokens restored from the cache instead of computed.",
			func(s promptcache.Stats, _ promptcache.DiskStats) float64 { return float64(s.TokensReused) }),
		gauge("tfd_prompt_cache_bytes", "Bytes of blocks the prompt cache holds in memory.",
			func(s promptcache.Stats, _ promptcache.DiskStats) float64 {
				return float64(s.Blocks) * float64(s.BlockBytes)
			}),
		gauge("tfd_prompt_cache_capacity_bytes", "Bytes of blocks the prompt cache's memory can hold.",
			func(s promptcache.Stats, _ promptcache.DiskStats) float64 {
				return float64(s.Capacity) * float64(s.BlockBytes)
			}),
		counter("tfd_prompt_cache_evictions_total", "Blocks dropped from memory to make room (spilled first where a spill folder is set).",
			func(s promptcache.Stats, _ promptcache.DiskStats) float64 { return float64(s.Evictions) }),
		counter("tfd_prompt_cache_spill_writes_total", "Blocks written to the spill folder.",
			func(_ promptcache.Stats, d promptcache.DiskStats) float64 { return float64(d.Writes) }),
		counter("tfd_prompt_cache_spill_reads_total", "Blocks read back from the spill folder.",
			func(_ promptcache.Stats, d promptcache.DiskStats) float64 { return float64(d.Reads) }),
		counter("tfd_prompt_cache_spill_dropped_total", "Spill files dropped as corrupt, truncated or not this model's.",
			func(_ promptcache.Stats, d promptcache.DiskStats) float64 { return float64(d.Dropped) }),
		counter("tfd_prompt_cache_spill_evictions_total", "Spill files deleted to keep the folder within prompt_cache.spill_gib.",
			func(_ promptcache.Stats, d promptcache.DiskStats) float64 { return float64(d.Evictions) }),
		counter("tfd_prompt_cache_spill_skipped_total", "Blocks never written to the spill folder: its queue or the disk was full, or a write failed.",
			func(_ promptcache.Stats, d promptcache.DiskStats) float64 { return float64(d.Skipped) }),
		gauge("tfd_prompt_cache_spill_bytes", "Bytes in the spill folder (other models' files included).",
			func(_ promptcache.Stats, d promptcache.DiskStats) float64 { return float64(d.Bytes) }),
	)
}

// Handler returns the /metrics handler.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Request is one completion request as the metrics count it.
type Request struct {
	// Status is the request's HTTP status; for a stream that began with 200 and ended with an
	// error event, the error's status.
	Status int
	// ClientGone reports that the client left before the reply ended.
	ClientGone bool
	// Start is when the request arrived.
	Start time.Time
	// PromptTokens and CompletionTokens count the request's tokens. (Draft tokens are counted
	// by the host, by source and depth: see draftTokens.)
	PromptTokens, CompletionTokens int64
	// Tokens counts the generated tokens whose arrival was timed; FirstToken and LastToken are
	// when the first and last came (zero when none did).
	Tokens                int
	FirstToken, LastToken time.Time
}

// ObserveRequest counts one completion request.
func (m *Metrics) ObserveRequest(r Request) {
	if m == nil {
		return
	}
	m.requests.WithLabelValues(outcome(r.Status, r.ClientGone)).Inc()
	m.promptTokens.Add(float64(r.PromptTokens))
	m.completionTokens.Add(float64(r.CompletionTokens))
	if r.Tokens > 0 {
		m.firstToken.Observe(r.FirstToken.Sub(r.Start).Seconds())
	}
	if r.Tokens > 1 {
		m.perToken.Observe(r.LastToken.Sub(r.FirstToken).Seconds() / float64(r.Tokens-1))
	}
}

func outcome(status int, clientGone bool) string {
	switch {
	case clientGone || status == 499:
		return outcomeCancelled
	case status == http.StatusServiceUnavailable:
		return outcomeUnavailable
	case status >= 500:
		return outcomeError
	case status >= 400:
		return outcomeClientError
	}
	return outcomeOK
}

// ObserveReload counts one reload by its outcome.
func (m *Metrics) ObserveReload(outcome string) {
	if m != nil {
		m.reloads.WithLabelValues(outcome).Inc()
	}
}

// SetPlan publishes the memory plan now in force and the config generation.
func (m *Metrics) SetPlan(p engine.Plan, generation int) {
	if m == nil {
		return
	}
	for part, v := range map[string]int64{"limit": p.Limit, "weights": p.Weights, "scratch": p.Scratch,
		"margin": p.Margin, "prompt_cache": p.Cache, "sessions": p.KV, "left": p.Left} {
		m.plan.WithLabelValues(part).Set(float64(v))
	}
	m.planSessions.Set(float64(len(p.Layout)))
	m.planContext.Set(float64(p.Context))
	m.generation.Set(float64(generation))
}

// CountError counts an error worked around at where in tfd_errors_total.
func (m *Metrics) CountError(where string) {
	if m != nil {
		m.errors.WithLabelValues(where).Inc()
	}
}
