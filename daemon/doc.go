// Package daemon owns the life of the tfd process: Run binds the port, plans memory, loads the
// model into an instance (a backend, the weights, the scheduler host and the API Handler that
// feeds it), serves HTTP through the live handler (the API, /metrics and the status endpoint),
// watches the config and reloads it, switches models, and stops gracefully; and the process's
// log. The rooms it wires: config (what to run), api (the OpenAI-compatible HTTP API), metrics,
// status (the status report's shape). service installs the process; bench loads the model as
// the process does (OpenBackend, PlanConfig, ModelSource) to measure it.
//
// The API sees the model only through api.ServedModel, which an instance builds from the
// engine's model and its host.
//
// Reload semantics, in one place: a change of the config file or of the API keys file in force
// is debounced, the config is built again from every layer and validated as a whole (the keys
// file read, the memory plan made); an invalid config is refused in one log line and the running
// one stays. Sampling defaults, API keys, the stall timeout, the log level and the shutdown
// timeout apply to the next requests. Sessions (parallel, layout, grow, queue) and memory
// settings apply through the host's Reconfigure: new admissions use the new layout once running
// streams are done with the old. A layout that needs more KV than the loaded pool, a new
// model.path, model.context, model.quantize or sessions.kv_cache loads the model again: beside the current one
// when the plan leaves room for both, else after the current one has finished its replies.
// server.listen and model.backend wait for a restart. Every reload logs one line and is counted
// in tfd_config_reloads_total by outcome.
package daemon
