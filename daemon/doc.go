// Package daemon owns the life of the tfd process: its configuration (koanf layers, validation,
// the effective view printed by `tfd config`), the OpenAI-compatible HTTP API, request logs, and
// the wiring that loads a model, starts a scheduler host and serves until the context ends.
//
// The HTTP layer sees the model only through [Model], a small struct of the daemon's own, so it
// can be tested with a fake tokenizer, template and host; [Run] builds a Model from the engine.
package daemon
