// Package status is the vocabulary of tfd's status endpoint, GET /v1/tfd/status: the report a
// running daemon answers with, and `tfd status` prints. It imports nothing of tfd's, so that the
// service commands read the report without the process that makes it.
package status

import "time"

// Path is the daemon's status endpoint. Like /metrics it needs an API key when keys are set:
// the config file, the load and the memory plan are not for whoever reaches the port.
const Path = "/v1/tfd/status"

// Report is the answer of GET /v1/tfd/status, and what `tfd status` prints.
type Report struct {
	// Status is "serving", or "switching" while a model switch has no model in force.
	Status  string    `json:"status"`
	PID     int       `json:"pid"`
	Started time.Time `json:"started"`
	Model   string    `json:"model,omitempty"`
	Backend string    `json:"backend,omitempty"`
	Config  struct {
		File       string   `json:"file"`
		Generation int      `json:"generation"` // 1 at start, +1 for each reload applied
		LastReload Reload   `json:"last_reload"`
		Waiting    []string `json:"waiting_for_restart,omitempty"`
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
	Plan        Plan        `json:"plan"`
	PromptCache PromptCache `json:"prompt_cache"`
}

// PromptCache is what the prompt cache holds and did: its memory, in blocks of BlockTokens
// tokens, and its spill folder.
type PromptCache struct {
	BlockTokens    int    `json:"block_tokens"`
	Blocks         int    `json:"blocks"`          // in memory now
	CapacityBlocks int    `json:"capacity_blocks"` // what its memory holds
	Bytes          int64  `json:"bytes"`
	CapacityBytes  int64  `json:"capacity_bytes"`
	Lookups        uint64 `json:"lookups"`
	Hits           uint64 `json:"hits"`
	TokensReused   uint64 `json:"tokens_reused"`
	Evictions      uint64 `json:"evictions"`
	SpillDir       string `json:"spill_dir,omitempty"`
	SpillBytes     int64  `json:"spill_bytes"`
	SpillFiles     int    `json:"spill_files"`
	SpillFull      bool   `json:"spill_full,omitempty"` // spilling stopped: the disk is full
}

// Plan is the memory plan in force: its figures in bytes and its text.
type Plan struct {
	LimitBytes    int64    `json:"limit_bytes"`
	WeightsBytes  int64    `json:"weights_bytes"`
	ScratchBytes  int64    `json:"scratch_bytes"`
	MarginBytes   int64    `json:"margin_bytes"`
	CacheBytes    int64    `json:"prompt_cache_bytes"`
	SessionsBytes int64    `json:"sessions_bytes"`
	LeftBytes     int64    `json:"left_bytes"`
	Context       int      `json:"context"`
	Layout        string   `json:"layout"`
	KVCache       string   `json:"kv_cache"` // how sessions store keys and values: "f32" or "f16"
	Notes         []string `json:"notes,omitempty"`
	Text          string   `json:"text"`
}

// Reload is the last reload's outcome: when, applied or not (the labels of
// tfd_config_reloads_total), and why, in a line.
type Reload struct {
	At      time.Time `json:"at"`
	Outcome string    `json:"outcome"`
	Summary string    `json:"summary"`
}
