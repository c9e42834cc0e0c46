// Package config owns tfd's configuration: the [Config] struct and its documented defaults;
// loading it in layers through koanf (defaults < TOML file < TFD_* environment < flags), with
// where each value came from and warnings for stray environment variables; validating it as a
// whole; printing the effective config as TOML (`tfd config`); listing what differs between
// two configs (what a reload changed); and reading the API keys file that server.api_keys_file
// names. It knows nothing of the process that runs with the config.
package config

import "time"

// Config is tfd's whole configuration. Each field's koanf tag is its key in the TOML file (section
// and name), in TFD_* environment variables (TFD_SESSIONS_PARALLEL for sessions.parallel) and in
// `tfd config`. The zero value is not useful: start from [Default] or [Load].
type Config struct {
	Server      ServerConfig      `koanf:"server"`
	Model       ModelConfig       `koanf:"model"`
	Sessions    SessionsConfig    `koanf:"sessions"`
	Memory      MemoryConfig      `koanf:"memory"`
	PromptCache PromptCacheConfig `koanf:"prompt_cache"`
	Drafts      DraftsConfig      `koanf:"drafts"`
	Sampling    SamplingConfig    `koanf:"sampling"`
	Residency   ResidencyConfig   `koanf:"residency"`
	Log         LogConfig         `koanf:"log"`
}

// ServerConfig is the [server] section: where the HTTP API listens and who may use it.
type ServerConfig struct {
	// Listen is the TCP address to bind, host:port.
	Listen string `koanf:"listen"`
	// APIKeysFile names a file of bearer keys, one a line; empty: no authentication. The file is
	// watched: an edit applies within a second.
	APIKeysFile string `koanf:"api_keys_file"`
	// AllowOpen lets a Listen address that is not loopback serve without API keys; otherwise
	// such a config is refused, since anyone who reaches the machine could use the model.
	AllowOpen bool `koanf:"allow_open"`
	// StallTimeout bounds how long a client may take nothing: a streamed reply whose client has
	// not taken an event for this long is cancelled, freeing its session for others. 0: a stream
	// waits on its client for ever.
	StallTimeout time.Duration `koanf:"stall_timeout"`
	// ShutdownTimeout bounds how long running replies may finish after a stop signal; then they
	// are cancelled.
	ShutdownTimeout time.Duration `koanf:"shutdown_timeout"`
}

// ModelConfig is the [model] section: which model to serve and on what.
type ModelConfig struct {
	// Path is a Hugging Face-style model folder, a GGUF file, or a folder holding exactly one
	// GGUF file; empty: the bundled model.
	Path string `koanf:"path"`
	// Dir is the models folder `tfd pull` writes into (a repo's files go to Dir/owner/name); empty:
	// the service's models folder when the service is installed or pull runs as root, else the
	// user's cache (service.Paths.PullModelsDir). Serving does not read it.
	Dir string `koanf:"dir"`
	// Name is the model's id in /v1/models; empty: the folder's name.
	Name string `koanf:"name"`
	// Backend is auto, metal, cuda or cpu.
	Backend string `koanf:"backend"`
	// Context is the longest sequence (prompt plus reply) in tokens; 0: the model's window,
	// lowered to what memory allows.
	Context int `koanf:"context"`
	// Quantize is "" (keep the checkpoint's dtypes), "q8" or "q4": quantize the weight matrices
	// of a 16- or 32-bit checkpoint as they load (engine.Quantization). Every backend runs
	// them; a checkpoint already quantized (MLX) loads as it is.
	Quantize string `koanf:"quantize"`
}

// SessionsConfig is the [sessions] section: how many replies run at once and their KV sizes.
type SessionsConfig struct {
	// Parallel is "auto" or a whole number ≥ 1 (1: one reply at a time). See [SessionsConfig.ParallelN].
	Parallel string `koanf:"parallel"`
	// Layout lists session capacities, e.g. "65536,32768x3"; empty: sized from memory.
	Layout string `koanf:"layout"`
	// Grow is how many tokens past its prompt a stream's session must hold when it is admitted.
	Grow int `koanf:"grow"`
	// Queue bounds the requests waiting for a session; past it requests are answered 503.
	Queue int `koanf:"queue"`
	// KVCache is how sessions store keys and values: "f32" (exact: the transformers oracle's
	// arithmetic) or "f16" (half the memory, so about twice the sessions or context; each key
	// and value rounded to F16 as it is stored, which moves logits by about 1e-3). Replies stay
	// batch-invariant and drafted equals undrafted with either.
	KVCache string `koanf:"kv_cache"`
}

// MemoryConfig is the [memory] section: the budget the memory plan works within.
type MemoryConfig struct {
	// LoadLimitGB caps the memory tfd plans to use, in GB; 0: 70% of RAM (of device memory on CUDA).
	LoadLimitGB float64 `koanf:"load_limit_gb"`
	// MarginGB is left free under the limit, in GB.
	MarginGB float64 `koanf:"margin_gb"`
}

// PromptCacheConfig is the [prompt_cache] section.
type PromptCacheConfig struct {
	// GiB is the cache's own memory, reserved before the sessions are sized; -1: a default share
	// of what the weights and margin leave (engine.DefaultCacheShare); 0: off.
	GiB float64 `koanf:"gib"`
	// SpillDir is a folder for blocks evicted from memory and for those in memory at a graceful
	// stop, so a restart starts warm; empty: no spilling.
	SpillDir string `koanf:"spill_dir"`
	// SpillGiB bounds the spill folder's size (least recently used files go first); it must be
	// set with SpillDir.
	SpillGiB float64 `koanf:"spill_gib"`
}

// DraftsConfig is the [drafts] section: speculative decoding.
type DraftsConfig struct {
	Enabled bool `koanf:"enabled"`
	// MTPMax is the deepest chain drafted from the model's MTP head a round, 0 to 16: the head
	// drafts the token after the newest, then the token after its own draft, and so on, up to
	// MTPMax tokens; n-gram copies may follow the chain. Each depth costs a step of the head and a
	// row of the round, so priced rounds keep a depth only while drafts there land often enough to
	// pay for it (tfd_draft_tokens_total{source="mtp",depth} shows how often they do). 0 turns MTP
	// drafts off.
	MTPMax int `koanf:"mtp_max"`
	// NGram drafts by copying from the reply's own context, up to NGramMax tokens a round.
	NGram    bool `koanf:"ngram"`
	NGramMax int  `koanf:"ngram_max"`
}

// Depths returns how many tokens a round may draft from the MTP head and by n-gram copies, when
// drafting is on: mtp_max, and ngram_max where ngram allows copies.
func (d DraftsConfig) Depths() (mtp, ngram int) {
	if d.NGram {
		ngram = d.NGramMax
	}
	return d.MTPMax, ngram
}

// SamplingConfig is the [sampling] section: defaults for requests that set none. A negative
// Temperature, TopP, TopK or MinP is unset, and the model's generation_config.json decides.
// The same type carries a model's own defaults in [Model.Defaults].
type SamplingConfig struct {
	Temperature float64 `koanf:"temperature"`
	TopP        float64 `koanf:"top_p"`
	TopK        int     `koanf:"top_k"`
	MinP        float64 `koanf:"min_p"`
	// RepetitionPenalty is the default of requests' repetition_penalty (1 is off).
	RepetitionPenalty float64 `koanf:"repetition_penalty"`
	// MaxTokens bounds a reply when the request sets no max_tokens; 0 is unset.
	MaxTokens int `koanf:"max_tokens"`
}

// ResidencyConfig is the [residency] section: keeping the model's GPU memory wired while idle.
type ResidencyConfig struct {
	Enabled bool `koanf:"enabled"`
	// KeepWarm is how long after the last request the memory is kept warm. In the file it is a
	// duration string ("15m") or a number of seconds.
	KeepWarm time.Duration `koanf:"keep_warm"`
	// Tick is how often an idle GPU gets a token amount of real work within KeepWarm.
	Tick time.Duration `koanf:"tick"`
}

// LogConfig is the [log] section.
type LogConfig struct {
	// Level is debug, info, warn or error.
	Level string `koanf:"level"`
}

// DefaultStallTimeout is server.stall_timeout's default: long enough for any client that is
// reading, short enough that a stalled one gives its session back within a minute.
const DefaultStallTimeout = 60 * time.Second

// Default returns the documented defaults: what tfd runs with when no file, environment variable
// or flag says otherwise.
func Default() Config {
	return Config{
		Server: ServerConfig{Listen: "127.0.0.1:8417", StallTimeout: DefaultStallTimeout, ShutdownTimeout: 10 * time.Second},
		Model:  ModelConfig{Backend: "auto"},
		Sessions: SessionsConfig{
			Parallel: "auto",
			Grow:     2048,
			KVCache:  "f32",
			Queue:    64,
		},
		Memory:      MemoryConfig{MarginGB: 2},
		PromptCache: PromptCacheConfig{GiB: -1},
		Drafts:      DraftsConfig{Enabled: true, MTPMax: 3, NGram: true, NGramMax: 4},
		Sampling:    SamplingConfig{Temperature: -1, TopP: -1, TopK: -1, MinP: -1, RepetitionPenalty: -1, MaxTokens: 4096},
		Residency:   ResidencyConfig{Enabled: true, KeepWarm: 15 * time.Minute, Tick: 500 * time.Millisecond},
		Log:         LogConfig{Level: "info"},
	}
}
