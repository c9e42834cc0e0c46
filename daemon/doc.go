// Package daemon owns the life of the tfd process: its configuration (koanf layers, validation,
// the effective view printed by `tfd config`) and its live reload (an fsnotify watch on the
// config's folder), the memory plan in force, the OpenAI-compatible HTTP API with /metrics and
// the status endpoint, request logs, the graceful stop, and tfd's install as a system service
// (launchd on macOS, systemd on Linux).
//
// The HTTP layer sees the model only through [Model], a small struct of the daemon's own, so it
// can be tested with a fake tokenizer, template and host; [Run] builds a Model from the engine.
//
// Reload semantics, in one place: a change of the config file or of the API keys file in force
// is debounced, the config is built again from every layer and validated as a whole (the keys
// file read, the memory plan made); an invalid config is refused in one log line and the running
// one stays. Sampling defaults, API keys, the stall timeout, the log level and the shutdown
// timeout apply to the next requests. Sessions (parallel, layout, grow, queue) and memory
// settings apply through the host's Reconfigure: new admissions use the new layout once running
// streams are done with the old. A layout that needs more KV than the loaded pool, a new
// model.path or model.context loads the model again: beside the current one when the plan leaves
// room for both, else after the current one has finished its replies. server.listen and
// model.backend wait for a restart. Every reload logs one line and is counted in
// tfd_config_reloads_total by outcome.
package daemon
