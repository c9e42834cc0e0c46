// Package scheduler is the lane core: it turns requests into streams of tokens. It owns streams,
// sessions (KV ranges), rounds (batched forwards), keyed sampling, admission and cancellation. It
// sees the engine only through the Model interface.
package scheduler
