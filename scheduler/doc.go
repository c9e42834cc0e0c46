// Package scheduler is the lane core: it turns requests into streams of tokens. It owns streams,
// sessions (ranges of the model's KV slots), rounds (batched forwards), drafting, keyed sampling,
// admission and cancellation, and sees the engine only through the Model interface (and the
// optional Drafter, Chainer and Warmer).
//
// One goroutine, the lane, owns all of that state; Submit, Close, Reconfigure and Stats reach it
// through a channel and a few atomics. Each turn of the lane admits waiting streams into free
// sessions (preferring one that still holds the start of the prompt), ends cancelled ones, and
// then either drives a stream that is alone (the lone driver: greedy chains of several tokens per
// call where the backend offers them) or runs one shared round: a decoding row per stream, with
// the drafts priced rounds grant it, then prompt chunks with what is left.
//
// Every reply is exact: a forward's rows do not affect one another (the compute contract's batch
// invariance), and a token sampled at position p depends only on the logits and (seed, p). So a
// reply is the same bits whether it ran alone or beside others, in one session or moved between
// two, with drafts or without, and from a reused prompt start or a fresh one; the tests hold the
// scheduler to each of these on the bundled model.
package scheduler
